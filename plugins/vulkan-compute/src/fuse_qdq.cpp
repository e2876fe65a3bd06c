#include "fuse_qdq.hpp"

#include <cmath>
#include <cstring>

#include "loom/vulkan_compute/int8_kernels.hpp"

namespace loom::vulkan {

namespace {

// A quantize or dequantize dispatch's table: per channel, scale and zero
// point (make_quantize / make_dequantize: f32 words, scales then zeros).
struct QTable {
  std::vector<float> scales, zeros;
};

bool read_table(const BlobProgram& p, const BlobDispatch& d, QTable* out) {
  const BlobTensor& t = p.tensors[d.bindings[1]];
  const uint64_t channels = d.push[1];
  if (t.kind != TensorKind::kConstant || t.dtype != DType::kF32 || t.elements() != 2 * channels ||
      t.data_offset > p.data.size() || t.bytes() > p.data.size() - t.data_offset) {
    return false;
  }
  out->scales.resize(channels);
  out->zeros.resize(channels);
  std::memcpy(out->scales.data(), p.data.data() + t.data_offset, channels * 4);
  std::memcpy(out->zeros.data(), p.data.data() + t.data_offset + channels * 4, channels * 4);
  return true;
}

bool is8(DType t) { return t == DType::kU8 || t == DType::kI8; }

}  // namespace

size_t fuse_qdq(BlobProgram* prog, const std::vector<uint32_t>& readers,
                const std::vector<std::string>* labels, std::vector<std::string>* notes) {
  BlobProgram& p = *prog;
  const size_t n = p.dispatches.size();
  // The dispatch writing each tensor (its last binding), and each tensor's
  // readers among the dispatches.
  std::vector<size_t> writer(p.tensors.size(), SIZE_MAX);
  std::vector<std::vector<size_t>> read_by(p.tensors.size());
  for (size_t i = 0; i < n; ++i) {
    const BlobDispatch& d = p.dispatches[i];
    if (d.bindings.empty()) continue;
    writer[d.bindings.back()] = i;
    for (size_t b = 0; b + 1 < d.bindings.size(); ++b) {
      std::vector<size_t>& r = read_by[d.bindings[b]];
      if (r.empty() || r.back() != i) r.push_back(i);  // conv binds x again where it has no bias
    }
  }
  auto single = [&](uint32_t t) {
    return p.tensors[t].kind == TensorKind::kIntermediate && t < readers.size() && readers[t] == 1;
  };
  auto dequantize_of = [&](uint32_t t) -> const BlobDispatch* {
    const size_t w = writer[t];
    return w != SIZE_MAX && p.dispatches[w].kernel == Kernel::kDequantize ? &p.dispatches[w] : nullptr;
  };
  std::vector<bool> drop(n, false);
  size_t fused = 0;
  // An Add or Mul of two per-tensor dequantizes read by one per-tensor
  // quantize: qbinary with ONNX Runtime's QLinearAdd / QLinearMul
  // arithmetic (as cpu-simd's qadd: ra = a_scale / y_scale, rb likewise;
  // Add: u the operand that varies along the output's last dimension of
  // extent > 1, a unless only b does; fixed = y_zero - fma(r_u, u_zero,
  // r_w * w_zero); Mul: ratio = a_scale * b_scale / y_scale).
  auto fuse_binary = [&](size_t i) {
    BlobDispatch& d = p.dispatches[i];
    const uint32_t op = d.push.size() == 3 + 3 * kBinaryMaxRank ? d.push[1] : UINT32_MAX;
    const bool multiply = op == static_cast<uint32_t>(BinaryOp::kMul);
    if (op != static_cast<uint32_t>(BinaryOp::kAdd) && !multiply) return false;
    const uint32_t af = d.bindings[0], bf = d.bindings[1], yf = d.bindings[2];
    const BlobDispatch* da = dequantize_of(af);
    const BlobDispatch* db = dequantize_of(bf);
    if (da == nullptr || db == nullptr) return false;
    const std::string label =
        labels != nullptr && i < labels->size() ? (*labels)[i] : std::string(multiply ? "a Mul" : "an Add");
    auto stays = [&](const std::string& why) {
      if (notes != nullptr) notes->push_back("f32: " + label + ": between DequantizeLinear and QuantizeLinear: " + why);
      return false;
    };
    QTable at, bt, yt;
    if (da->push[1] != 1 || db->push[1] != 1 || !is8(p.tensors[da->bindings[0]].dtype) ||
        !is8(p.tensors[db->bindings[0]].dtype) || !read_table(p, *da, &at) || !read_table(p, *db, &bt)) {
      return stays("a DequantizeLinear is per axis or not of u8 / i8");
    }
    if (!single(yf) || read_by[yf].size() != 1) {
      return stays("its output has readers other than one QuantizeLinear, or is a graph output");
    }
    const size_t qi = read_by[yf][0];
    const BlobDispatch& qd = p.dispatches[qi];
    if (qd.kernel != Kernel::kQuantize || qd.bindings[0] != yf || qd.push[1] != 1 || !read_table(p, qd, &yt)) {
      return stays("its output is not read by one per-tensor QuantizeLinear");
    }
    const uint32_t rank = d.push[2];
    bool swap = false;
    for (uint32_t k = rank; k-- > 0;) {
      if (d.push[3 + k] == 1) continue;
      swap = d.push[3 + kBinaryMaxRank + k] == 0 && d.push[3 + 2 * kBinaryMaxRank + k] != 0;
      break;
    }
    const float as = at.scales[0], bs = bt.scales[0], ys = yt.scales[0];
    const float za = at.zeros[0], zb = bt.zeros[0], zy = yt.zeros[0];
    float params[3] = {0, 0, 0};
    if (multiply) {
      params[0] = as * bs / ys;
    } else {
      const float ra = as / ys, rb = bs / ys;
      params[0] = swap ? rb : ra;
      params[1] = swap ? ra : rb;
      const float w_term = params[1] * (swap ? za : zb);
      params[2] = zy - std::fma(params[0], swap ? zb : za, w_term);
    }
    const uint32_t aq = da->bindings[0], bq = db->bindings[0], yq = qd.bindings[2];
    if (single(af) && read_by[af].size() == 1) drop[writer[af]] = true;
    if (single(bf) && read_by[bf].size() == 1) drop[writer[bf]] = true;
    drop[qi] = true;
    d = make_qbinary(d, aq, bq, yq, p.tensors[aq].dtype, p.tensors[bq].dtype, p.tensors[yq].dtype, swap && !multiply,
                     static_cast<int32_t>(za), static_cast<int32_t>(zb), static_cast<int32_t>(zy), params);
    if (notes != nullptr) {
      notes->push_back("int8: " + label + ": one qbinary on the bytes (ONNX Runtime's QLinear" +
                       (multiply ? "Mul" : "Add") + " arithmetic)");
    }
    return true;
  };
  for (size_t i = 0; i < n; ++i) {
    BlobDispatch& d = p.dispatches[i];
    if (d.kernel == Kernel::kBinary) {
      fused += fuse_binary(i) ? 1 : 0;
      continue;
    }
    // ConvTranspose has conv's push layout (and no activation): a
    // transposed qconv, w [C, M / group, KH, KW].
    const bool deconv = d.kernel == Kernel::kConvTranspose && d.push.size() == 17;
    const bool conv = ((d.kernel == Kernel::kConv || d.kernel == Kernel::kDirectConv) && d.push.size() == 17) || deconv;
    const bool matmul = d.kernel == Kernel::kMatMul && d.push.size() == 12;
    if (!conv && !matmul) continue;
    // Only a convolution or matmul of dequantized values gets a note.
    const BlobDispatch* dx = dequantize_of(d.bindings[0]);
    if (dx == nullptr) continue;
    const std::string label =
        labels != nullptr && i < labels->size() ? (*labels)[i]
                                                 : std::string(deconv ? "a ConvTranspose" : conv ? "a Conv" : "a MatMul");
    auto stays = [&](const std::string& why) {
      if (notes != nullptr) notes->push_back("f32: " + label + ": between DequantizeLinear and QuantizeLinear: " + why);
    };
    const uint32_t flags = conv ? d.push[16] : d.push[7];
    const bool has_bias = (flags & kMatMulBias) != 0;
    if ((flags >> kMatMulActShift) != 0) {
      stays("a Relu follows it before the QuantizeLinear (quantizers fold it into the output range)");
      continue;
    }
    const uint32_t xf = d.bindings[0], wf = d.bindings[1], bf = d.bindings[2], yf = d.bindings[3];
    // The geometry as qconv's: a convolution's own; a matmul's rows (every
    // batch of A against one B) as a batch of 1x1 convolutions, B read as
    // [K, N] (the b layout) or, transposed, as [N, K, 1, 1] weights.
    ConvParams cp;
    const uint32_t* q = d.push.data();
    bool b_layout = false;
    uint64_t w_inner = 0;  // a per-channel weight dequantize's inner size
    if (conv) {
      cp.n = q[0]; cp.c = q[1]; cp.h = q[2]; cp.w = q[3]; cp.m = q[4]; cp.oh = q[5]; cp.ow = q[6];
      cp.kh = q[7]; cp.kw = q[8]; cp.sh = q[9]; cp.sw = q[10]; cp.dh = q[11]; cp.dw = q[12]; cp.pt = q[13];
      cp.pl = q[14]; cp.group = q[15];
      if (cp.group == 0 || cp.m % cp.group != 0 || cp.c % cp.group != 0) continue;
      // A per-channel weight scale: axis 0 of [M, C / group, KH, KW], or
      // axis 1 of ConvTranspose's [C, M / group, KH, KW] (M channels in
      // one group only).
      w_inner = deconv ? (cp.group == 1 ? uint64_t{cp.kh} * cp.kw : 0) : uint64_t{cp.c / cp.group} * cp.kh * cp.kw;
    } else {
      const uint32_t m = q[0], nn = q[1], k = q[2], batch = q[3];
      const bool trans_b = (flags & kMatMulTransB) != 0;
      const uint64_t rows = uint64_t{batch} * m;
      if ((flags & kMatMulTransA) != 0 || (batch > 1 && (q[5] != 0 || q[4] != uint64_t{m} * k)) ||
          rows >= (uint64_t{1} << 31)) {
        stays("A is transposed, or B differs per batch");
        continue;
      }
      if (q[8] != float_bits(1.0f) || (has_bias && (q[9] != float_bits(1.0f) || q[10] != 0 || q[11] != 1))) {
        stays("alpha or beta is not 1, or C is not a bias of one value per column");
        continue;
      }
      cp.n = static_cast<uint32_t>(rows);
      cp.c = k;
      cp.m = nn;
      b_layout = !trans_b;
      w_inner = trans_b ? k : 1;
    }
    // y: read by one per-tensor quantize only.
    if (!single(yf) || read_by[yf].size() != 1) {
      stays("its output has readers other than one QuantizeLinear, or is a graph output");
      continue;
    }
    const size_t qi = read_by[yf][0];
    const BlobDispatch& qd = p.dispatches[qi];
    QTable yt, xt, wt, bt;
    if (qd.kernel != Kernel::kQuantize || qd.bindings[0] != yf || qd.push[1] != 1 || !read_table(p, qd, &yt)) {
      stays("its output is not read by one per-tensor QuantizeLinear");
      continue;
    }
    // x: a per-tensor dequantize of u8 / i8.
    if (dx->push[1] != 1 || !is8(p.tensors[dx->bindings[0]].dtype) || !read_table(p, *dx, &xt)) {
      stays("x's DequantizeLinear is per axis or not of u8 / i8");
      continue;
    }
    // w: a dequantize of a u8 / i8 constant, per tensor or per output channel.
    const BlobDispatch* dw = dequantize_of(wf);
    const BlobTensor* wq = dw != nullptr ? &p.tensors[dw->bindings[0]] : nullptr;
    if (dw == nullptr || !read_table(p, *dw, &wt) || wq->kind != TensorKind::kConstant || !is8(wq->dtype) ||
        !(dw->push[1] == 1 || (dw->push[1] == cp.m && dw->push[2] == w_inner))) {
      stays("the weights are not a DequantizeLinear (per tensor or per output channel) of a u8 / i8 constant");
      continue;
    }
    const DType w_dtype = wq->dtype;  // (p.tensors grows below: no pointer into it past here)
    // The bias: a dequantize of an i32 constant whose scale is the product.
    const BlobDispatch* db = has_bias ? dequantize_of(bf) : nullptr;
    std::vector<int32_t> bias(cp.m, 0);
    if (has_bias) {
      const BlobTensor* bq = db != nullptr ? &p.tensors[db->bindings[0]] : nullptr;
      if (db == nullptr || !read_table(p, *db, &bt) || bq->kind != TensorKind::kConstant ||
          bq->dtype != DType::kI32 || bq->elements() != cp.m || !(db->push[1] == 1 || db->push[1] == cp.m) ||
          bq->data_offset > p.data.size() || bq->bytes() > p.data.size() - bq->data_offset) {
        stays("the bias is not a DequantizeLinear of an i32 constant");
        continue;
      }
      std::memcpy(bias.data(), p.data.data() + bq->data_offset, bias.size() * 4);
    }
    bool exact_bias = true;
    std::vector<uint32_t> words;
    for (uint32_t c = 0; c < cp.m; ++c) {
      const float ws = wt.scales[wt.scales.size() == 1 ? 0 : c];
      const float wz = wt.zeros[wt.zeros.size() == 1 ? 0 : c];
      if (has_bias) {
        const float product = xt.scales[0] * ws;
        const size_t k = bt.scales.size() == 1 ? 0 : c;
        exact_bias = exact_bias && bt.scales[k] == product && bt.zeros[k] == 0.0f;
      }
      // QLinearConv's multiplier, in f32 as the reference computes it.
      const float multiplier = xt.scales[0] * ws / yt.scales[0];
      words.push_back(static_cast<uint32_t>(bias[c]));
      words.push_back(static_cast<uint32_t>(static_cast<int32_t>(wz)));
      words.push_back(float_bits(multiplier));
    }
    if (!exact_bias) {
      stays("the bias's scale is not x_scale * w_scale, or its zero point is not 0");
      continue;
    }
    BlobTensor table;
    table.kind = TensorKind::kConstant;
    table.dtype = DType::kI32;
    table.shape = {static_cast<int64_t>(words.size())};
    table.data_offset = p.data.size();
    for (uint32_t w : words) {
      for (int b = 0; b < 4; ++b) p.data.push_back(static_cast<uint8_t>(w >> (8 * b)));
    }
    p.tensors.push_back(table);
    const auto ti = static_cast<uint32_t>(p.tensors.size() - 1);
    const uint32_t xq = dx->bindings[0], wqi = dw->bindings[0], yq = qd.bindings[2];
    const DType yt_dtype = p.tensors[yq].dtype;
    const auto xz = static_cast<int32_t>(xt.zeros[0]), yz = static_cast<int32_t>(yt.zeros[0]);
    const DType x_dtype = p.tensors[xq].dtype;
    // The dequantizes nothing else reads go with the quantize.
    if (single(xf) && read_by[xf].size() == 1) drop[writer[xf]] = true;
    if (single(wf) && read_by[wf].size() == 1) drop[writer[wf]] = true;
    if (has_bias && single(bf) && read_by[bf].size() == 1) drop[writer[bf]] = true;
    drop[qi] = true;
    d = deconv ? make_qconv_transpose(cp, xq, wqi, ti, yq, xz, yz, x_dtype, w_dtype, yt_dtype)
               : make_qconv(cp, xq, wqi, ti, yq, xz, yz, x_dtype, w_dtype, yt_dtype, b_layout, /*round_first=*/true);
    ++fused;
    if (notes != nullptr) {
      notes->push_back("int8: " + label + ": one " + (deconv ? "transposed qconv" : "qconv") +
                       " with its DequantizeLinear inputs and QuantizeLinear");
    }
  }
  if (fused == 0) return 0;
  // A dequantize whose every reader was fused (x read by two convolutions)
  // goes too: nothing reads its output any more.
  std::vector<bool> read(p.tensors.size(), false), aliased(p.tensors.size(), false);
  for (size_t i = 0; i < n; ++i) {
    if (drop[i]) continue;
    const BlobDispatch& d = p.dispatches[i];
    for (size_t b = 0; b + 1 < d.bindings.size(); ++b) read[d.bindings[b]] = true;
  }
  for (const BlobTensor& t : p.tensors) {
    if (t.kind == TensorKind::kAlias) aliased[t.alias] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const BlobDispatch& d = p.dispatches[i];
    const uint32_t y = d.bindings.back();
    if (!drop[i] && d.kernel == Kernel::kDequantize && p.tensors[y].kind == TensorKind::kIntermediate && !read[y] &&
        !aliased[y]) {
      drop[i] = true;
    }
  }
  std::vector<BlobDispatch> kept;
  kept.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!drop[i]) kept.push_back(std::move(p.dispatches[i]));
  }
  p.dispatches = std::move(kept);
  return fused;
}

}  // namespace loom::vulkan
