#include "compile.hpp"

#include <utility>

#include "fuse_qdq.hpp"
#include "lower.hpp"

namespace loom::vulkan {
namespace {

// Open dimensions take this size when compile_supported and compile check
// an open graph's nodes (each node on its own: its operands' open
// dimensions at the probe, its output by the operator's rule). Large
// enough for any window a model slides over a map whose size is left open.
constexpr int64_t kOpenProbe = 64;

// The declared shape of every tensor of `g`, open dimensions at the probe.
std::vector<Shape> probe_shapes(const sdk::GraphView& g) {
  std::vector<Shape> shapes(g.tensor_count());
  for (size_t t = 0; t < shapes.size(); ++t) {
    shapes[t] = g.tensor(t).shape();
    for (int64_t& d : shapes[t]) d = d < 0 ? kOpenProbe : d;
  }
  return shapes;
}

// How the builder treats shapes.
enum class ShapeMode {
  kStatic,  // the graph's own (a static graph)
  kBound,   // `bound`: the graph inputs' concrete, nodes' outputs by their rules (one binding)
  kProbe,   // `bound` = probe_shapes(); each node checked on its own at the probe, no program kept
};

// Builds the blob program node by node.
class Builder {
 public:
  Builder(const sdk::GraphView& g, ShapeMode mode = ShapeMode::kStatic, std::vector<Shape>* bound = nullptr,
          const std::string* int8_unavailable = nullptr)
      : g_(g), mode_(mode), bound_(bound), int8_unavailable_(int8_unavailable), map_(g.tensor_count(), UINT32_MAX),
        readers_(g.tensor_count(), 0) {
    for (size_t n = 0; n < g.node_count(); ++n) {
      const sdk::NodeView node = g.node(n);
      for (size_t i = 0; i < node.input_count(); ++i) {
        if (node.has_input(i)) ++readers_[static_cast<size_t>(node.input_index(i))];
      }
    }
  }

  Status build(BlobProgram* out) {
    for (size_t i = 0; i < g_.input_count(); ++i) {
      const sdk::TensorView t = g_.input(i);
      const loom_dtype_t d = t.dtype();
      if (d != LOOM_DTYPE_F32 && d != LOOM_DTYPE_U8 && d != LOOM_DTYPE_I8 && d != LOOM_DTYPE_I32) {
        return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " (" + t.name() +
                                     ") is not f32, u8, i8 or i32");
      }
      if (map_[static_cast<size_t>(t.index())] != UINT32_MAX) {
        return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " is listed twice");
      }
      add(t.index(), TensorKind::kInput);
    }
    for (size_t i = 0; i < g_.output_count(); ++i) {
      const sdk::TensorView t = g_.output(i);
      if (map_[static_cast<size_t>(t.index())] != UINT32_MAX) {
        return sdk::invalid_argument("compile: graph output " + std::to_string(i) + " (" + t.name() +
                                     ") is a graph input or listed twice");
      }
      add(t.index(), TensorKind::kOutput);
    }
    std::vector<bool> written(g_.tensor_count(), false);
    for (size_t n = 0; n < g_.node_count(); ++n) {
      Lowered node;
      std::string why;
      Shape declared_probe;
      const sdk::NodeView gn = g_.node(n);
      const int32_t out_index = gn.output_count() > 0 && gn.has_output(0) ? gn.output_index(0) : -1;
      if (mode_ == ShapeMode::kProbe && out_index >= 0) declared_probe = (*bound_)[static_cast<size_t>(out_index)];
      if (!lower_node(g_, n, &node, &why, mode_ == ShapeMode::kStatic ? nullptr : bound_, int8_unavailable_)) {
        if (mode_ == ShapeMode::kBound) {
          return sdk::invalid_argument(gn.label() + " cannot run at this binding: " + why);
        }
        return sdk::invalid_argument("compile: " + gn.label() + " is not supported by vulkan-compute: " + why +
                                     (mode_ == ShapeMode::kProbe ? probe_note() : std::string()));
      }
      // Each node on its own: the next reads the declared (probed) shape.
      if (mode_ == ShapeMode::kProbe) (*bound_)[static_cast<size_t>(node.output)] = declared_probe;
      if (mode_ == ShapeMode::kBound && map_[static_cast<size_t>(node.output)] != UINT32_MAX) {
        // A graph output, added before its producer: its shape at this binding.
        p_.tensors[map_[static_cast<size_t>(node.output)]].shape = (*bound_)[static_cast<size_t>(node.output)];
      }
      std::vector<uint32_t> operands;
      for (int32_t t : node.operands) {
        if (map_[static_cast<size_t>(t)] == UINT32_MAX) {
          const sdk::TensorView gt = g_.tensor(static_cast<size_t>(t));
          if (!gt.has_data()) {
            return sdk::invalid_argument("compile: " + g_.node(n).label() + " reads tensor " + gt.name() +
                                         ", which is neither a graph input, an inline constant, "
                                         "nor written by an earlier node");
          }
          add(t, TensorKind::kConstant);
        }
        operands.push_back(map_[static_cast<size_t>(t)]);
      }
      const size_t o = static_cast<size_t>(node.output);
      if (written[o]) {
        return sdk::invalid_argument("compile: " + g_.node(n).label() + " writes tensor " +
                                     g_.tensor(o).name() + ", which already has a producer");
      }
      written[o] = true;
      LOOM_SDK_RETURN_IF_ERROR(emit(node, operands));
      labels_.resize(p_.dispatches.size(), gn.label());
    }
    for (size_t i = 0; i < g_.output_count(); ++i) {
      if (!written[static_cast<size_t>(g_.output(i).index())]) {
        return sdk::invalid_argument("compile: graph output " + std::to_string(i) + " (" + g_.output(i).name() +
                                     ") is not written by any node");
      }
    }
    if (mode_ == ShapeMode::kProbe) return Status();  // a check: no program
    fuse_qdq(&p_, consumers_, &labels_, notes_);
    split_convolutions();
    // Intermediates a fusion left unused get no memory.
    std::vector<bool> used(p_.tensors.size(), false);
    for (const BlobDispatch& d : p_.dispatches) {
      for (uint32_t b : d.bindings) used[b] = true;
    }
    for (const BlobTensor& t : p_.tensors) {
      if (t.kind == TensorKind::kAlias) used[t.alias] = true;
    }
    for (size_t t = 0; t < p_.tensors.size(); ++t) {
      if (p_.tensors[t].kind == TensorKind::kIntermediate && !used[t]) p_.tensors[t].shape = {0};
    }
    std::string error;
    const std::vector<uint8_t> bytes = encode(p_);
    BlobProgram check;
    if (!decode(bytes.data(), bytes.size(), &check, &error)) {
      return sdk::internal_error("compile: the vulkan-compute program is invalid: " + error);
    }
    *out = std::move(p_);
    return Status();
  }

 private:
  // Split-K (kernels.hpp, conv): a convolution with few output tiles and a
  // long reduction (the deep layers of a CNN at small spatial sizes, which
  // would otherwise run on a handful of workgroups) writes `splits` partial
  // results to an intermediate of its own, and a reduce dispatch right after
  // sums them into the output, applying the Relu the convolution had folded.
  void split_convolutions() {
    std::vector<BlobDispatch> out;
    out.reserve(p_.dispatches.size());
    for (BlobDispatch& d : p_.dispatches) {
      if (d.kernel != Kernel::kConv || d.push.size() != 17) {
        out.push_back(std::move(d));
        continue;
      }
      const uint32_t* q = d.push.data();
      ConvParams cp;
      cp.n = q[0]; cp.c = q[1]; cp.h = q[2]; cp.w = q[3]; cp.m = q[4]; cp.oh = q[5]; cp.ow = q[6];
      cp.kh = q[7]; cp.kw = q[8]; cp.group = q[15];
      const uint32_t splits = conv_splits(cp);
      if (splits == 1) {
        out.push_back(std::move(d));
        continue;
      }
      const uint32_t y = d.bindings[3];
      const uint64_t count = uint64_t{cp.n} * cp.m * cp.oh * cp.ow;
      BlobTensor partial;
      partial.kind = TensorKind::kIntermediate;
      partial.shape = {static_cast<int64_t>(splits), static_cast<int64_t>(count)};
      p_.tensors.push_back(partial);
      consumers_.push_back(1);
      const uint32_t pt = static_cast<uint32_t>(p_.tensors.size() - 1);
      const bool relu = (d.push[16] >> kMatMulActShift) == 1;
      d.push[16] &= ~(3u << kMatMulActShift);
      d.push.push_back(splits);
      d.groups[2] *= splits;
      d.bindings[3] = pt;
      out.push_back(std::move(d));
      out.push_back(make_reduce(pt, y, 1, splits, count, relu ? kReduceSumRelu : 0));
    }
    p_.dispatches = std::move(out);
  }

  static std::string probe_note() {
    return " (open dimensions probed at " + std::to_string(kOpenProbe) + ")";
  }

  uint32_t add(int32_t t, TensorKind kind) {
    BlobTensor bt;
    bt.kind = kind;
    const sdk::TensorView gt = g_.tensor(static_cast<size_t>(t));
    bt.shape = bound_ != nullptr ? (*bound_)[static_cast<size_t>(t)] : gt.shape();
    switch (gt.dtype()) {
      case LOOM_DTYPE_U8: bt.dtype = DType::kU8; break;
      case LOOM_DTYPE_I8: bt.dtype = DType::kI8; break;
      case LOOM_DTYPE_I32: bt.dtype = DType::kI32; break;
      default: bt.dtype = DType::kF32; break;
    }
    if (kind == TensorKind::kConstant) {
      bt.data_offset = p_.data.size();
      p_.data.insert(p_.data.end(), gt.data(), gt.data() + gt.data_size());
    }
    p_.tensors.push_back(bt);
    consumers_.push_back(readers_[static_cast<size_t>(t)]);
    const uint32_t i = static_cast<uint32_t>(p_.tensors.size() - 1);
    if (kind == TensorKind::kInput) p_.inputs.push_back(i);
    if (kind == TensorKind::kOutput) p_.outputs.push_back(i);
    map_[static_cast<size_t>(t)] = i;
    return i;
  }
  // The blob tensor for a node's output, made on first write.
  uint32_t target(int32_t t) {
    const uint32_t m = map_[static_cast<size_t>(t)];
    return m != UINT32_MAX ? m : add(t, TensorKind::kIntermediate);
  }
  // The tensor a dispatch wrote last, when a following elementwise node may
  // be folded into it (a single-consumer intermediate of a matmul).
  BlobDispatch* foldable(uint32_t operand) {
    if (p_.dispatches.empty()) return nullptr;
    BlobDispatch& d = p_.dispatches.back();
    if ((d.kernel != Kernel::kMatMul && d.kernel != Kernel::kConv &&
         d.kernel != Kernel::kDirectConv) ||
        d.bindings.back() != operand) {
      return nullptr;
    }
    if (p_.tensors[operand].kind != TensorKind::kIntermediate || consumers_[operand] != 1) return nullptr;
    return &d;
  }

  Status emit(const Lowered& node, const std::vector<uint32_t>& in) {
    switch (node.kind) {
      case Lowered::Kind::kUnary: {
        if (node.unary == UnaryOp::kRelu) {
          BlobDispatch* d = foldable(in[0]);
          uint32_t* flags = d == nullptr ? nullptr : &d->push[d->kernel == Kernel::kMatMul ? 7 : 16];
          if (flags != nullptr && (*flags >> kMatMulActShift) == 0) {
            *flags |= 1u << kMatMulActShift;
            d->bindings.back() = target(node.output);
            return Status();
          }
        }
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_unary(node.unary, in[0], y, p_.tensors[y].elements(), node.alpha, node.beta));
        return Status();
      }
      case Lowered::Kind::kBinary: {
        if (node.binary == BinaryOp::kAdd) {
          for (int side = 0; side < 2; ++side) {
            BlobDispatch* d = foldable(in[side]);
            if (d == nullptr || d->kernel != Kernel::kMatMul || (d->push[7] & (kMatMulBias | (3u << kMatMulActShift))) != 0) continue;
            const BlobTensor& c = p_.tensors[in[1 - side]];
            const uint32_t m = d->push[0], n = d->push[1];
            std::vector<uint64_t> strides;
            if (c.shape.size() > 2 || !broadcast_strides(c.shape, {m, n}, &strides)) continue;
            if (node.dims != p_.tensors[in[side]].shape) continue;
            d->bindings[2] = in[1 - side];
            d->push[6] = 0;
            d->push[7] |= kMatMulBias;
            d->push[9] = float_bits(1.0f);
            d->push[10] = static_cast<uint32_t>(strides[0]);
            d->push[11] = static_cast<uint32_t>(strides[1]);
            d->bindings.back() = target(node.output);
            return Status();
          }
        }
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_binary(node.binary, in[0], in[1], y, node.dims, node.sa, node.sb));
        return Status();
      }
      case Lowered::Kind::kMatMul: {
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_matmul(node.mm, in[0], in[1], node.mm.bias ? in[2] : 0, y));
        return Status();
      }
      case Lowered::Kind::kConv: {
        const uint32_t y = target(node.output);
        const uint32_t b = node.conv.bias ? in[2] : 0;
        p_.dispatches.push_back(conv_is_direct(node.conv) ? make_direct_conv(node.conv, in[0], in[1], b, y)
                                                          : make_conv(node.conv, in[0], in[1], b, y));
        return Status();
      }
      case Lowered::Kind::kReduce: {
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_reduce(in[0], y, node.outer, node.n, node.inner, node.reduce_op));
        return Status();
      }
      case Lowered::Kind::kPool: {
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_pool(node.pool, in[0], y));
        return Status();
      }
      case Lowered::Kind::kCopy: {
        const uint32_t y = target(node.output);
        for (size_t i = 0; i < node.boxes.size(); ++i) {
          const CopyBox& b = node.boxes[i];
          p_.dispatches.push_back(make_copy(in[i], y, b.dims, b.sx, b.sy, b.x0, b.y0));
        }
        return Status();
      }
      case Lowered::Kind::kLayerNorm: {
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_layernorm(in[0], in[1], node.has_bias ? in[2] : 0, y, node.outer,
                                               node.n, node.has_bias, node.alpha));
        return Status();
      }
      case Lowered::Kind::kResize: {
        // The tap table is a constant the compiler makes: no graph tensor.
        BlobTensor table;
        table.kind = TensorKind::kConstant;
        table.shape = {static_cast<int64_t>(node.table.size())};
        table.data_offset = p_.data.size();
        const auto* bytes = reinterpret_cast<const uint8_t*>(node.table.data());
        p_.data.insert(p_.data.end(), bytes, bytes + node.table.size() * 4);
        p_.tensors.push_back(table);
        consumers_.push_back(1);
        const uint32_t t = static_cast<uint32_t>(p_.tensors.size() - 1);
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_resize(in[0], t, y, node.in_dims, node.dims));
        return Status();
      }
      case Lowered::Kind::kQuantize:
      case Lowered::Kind::kDequantize:
      case Lowered::Kind::kQConv: {
        // The table of scales and zero points (or per-channel bias, zero
        // point and multiplier) is a constant the compiler makes.
        BlobTensor table;
        table.kind = TensorKind::kConstant;
        table.dtype = node.table_dtype;
        table.shape = {static_cast<int64_t>(node.words.size())};
        table.data_offset = p_.data.size();
        for (uint32_t w : node.words) {
          for (int b = 0; b < 4; ++b) p_.data.push_back(static_cast<uint8_t>(w >> (8 * b)));
        }
        p_.tensors.push_back(table);
        consumers_.push_back(1);
        const uint32_t t = static_cast<uint32_t>(p_.tensors.size() - 1);
        const uint32_t y = target(node.output);
        const uint64_t count = p_.tensors[y].elements();
        if (node.kind == Lowered::Kind::kQuantize) {
          p_.dispatches.push_back(make_quantize(in[0], t, y, count, node.channels, node.inner,
                                                node.y_dtype == DType::kI8));
        } else if (node.kind == Lowered::Kind::kDequantize) {
          p_.dispatches.push_back(make_dequantize(in[0], t, y, count, node.channels, node.inner, node.x_dtype));
        } else {
          p_.dispatches.push_back(make_qconv(node.conv, in[0], in[1], t, y, node.x_zero, node.y_zero, node.x_dtype,
                                             node.w_dtype, node.y_dtype, node.b_layout));
        }
        return Status();
      }
      case Lowered::Kind::kConvTranspose: {
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_conv_transpose(node.conv, in[0], in[1], node.conv.bias ? in[2] : 0, y));
        return Status();
      }
      case Lowered::Kind::kSoftmax: {
        const uint32_t y = target(node.output);
        p_.dispatches.push_back(make_softmax(in[0], y, node.outer, node.n, node.inner, node.log_softmax));
        return Status();
      }
      case Lowered::Kind::kAlias: {
        uint32_t base = in[0];
        if (p_.tensors[base].kind == TensorKind::kAlias) base = p_.tensors[base].alias;
        const uint32_t existing = map_[static_cast<size_t>(node.output)];
        if (existing != UINT32_MAX) {  // a graph output: it needs its own bytes
          p_.dispatches.push_back(make_unary(UnaryOp::kIdentity, in[0], existing, p_.tensors[existing].elements()));
          return Status();
        }
        const uint32_t y = add(node.output, TensorKind::kAlias);
        p_.tensors[y].alias = base;
        return Status();
      }
    }
    return sdk::internal_error("compile: unknown lowering");
  }

  const sdk::GraphView& g_;
  ShapeMode mode_;
  std::vector<std::string> labels_;  // per dispatch: the graph node it came from
  std::vector<std::string>* notes_ = nullptr;  // compile notes (fuse_qdq.hpp), when wanted

 public:
  void set_notes(std::vector<std::string>* notes) { notes_ = notes; }

 private:
  std::vector<Shape>* bound_;  // kBound, kProbe: one shape per graph tensor
  const std::string* int8_unavailable_;  // lower_node's
  std::vector<uint32_t> map_;
  std::vector<uint32_t> readers_;  // per graph tensor: node operands reading it
  BlobProgram p_;
  std::vector<uint32_t> consumers_;  // per blob tensor: node operands reading it
};

}  // namespace

Status compile_supported(const sdk::GraphView& g, const std::string& int8_unavailable, sdk::Claims* claims,
                         std::vector<std::string>* notes) {
  std::vector<Shape> probe;
  if (g.has_open_dims()) probe = probe_shapes(g);
  sdk::DeclineNotes declined;
  for (size_t n = 0; n < g.node_count(); ++n) {
    Lowered node;
    std::string why;
    if (!g.has_open_dims()) {
      if (lower_node(g, n, &node, &why, nullptr, &int8_unavailable)) {
        LOOM_SDK_RETURN_IF_ERROR(claims->claim(n));
      } else if (sdk::is_quantized_op(g.node(n).op_type())) {
        declined.add(g.node(n).label(), why);
      }
      continue;
    }
    // An open graph: the node's rule must hold at the probe and give a shape
    // that fits the declared one; each binding is checked again at execute.
    const sdk::NodeView gn = g.node(n);
    const int32_t out = gn.output_count() > 0 && gn.has_output(0) ? gn.output_index(0) : -1;
    const Shape keep = out >= 0 ? probe[static_cast<size_t>(out)] : Shape();
    const bool ok = lower_node(g, n, &node, &why, &probe, &int8_unavailable);
    if (out >= 0) probe[static_cast<size_t>(out)] = keep;
    if (ok) {
      LOOM_SDK_RETURN_IF_ERROR(claims->claim(n));
    } else if (sdk::is_quantized_op(gn.op_type())) {
      declined.add(gn.label(), why + " (open dimensions probed at " + std::to_string(kOpenProbe) + ")");
    }
  }
  if (notes != nullptr) *notes = declined.lines();
  return Status();
}

Status compile_graph(const sdk::GraphView& g, const std::string& int8_unavailable, BlobProgram* out,
                     std::vector<std::string>* notes) {
  Builder b(g, ShapeMode::kStatic, nullptr, &int8_unavailable);
  b.set_notes(notes);
  return b.build(out);
}

Status check_open_graph(const sdk::GraphView& g, const std::string& int8_unavailable) {
  std::vector<Shape> probe = probe_shapes(g);
  Builder b(g, ShapeMode::kProbe, &probe, &int8_unavailable);
  BlobProgram ignored;
  return b.build(&ignored);
}

Status bind_graph(const sdk::GraphView& g, const std::string& int8_unavailable, std::vector<Shape>* shapes,
                  BlobProgram* out, std::vector<std::string>* notes) {
  Builder b(g, ShapeMode::kBound, shapes, &int8_unavailable);
  b.set_notes(notes);
  return b.build(out);
}

Status probe_binding_notes(const sdk::GraphView& g, const std::string& int8_unavailable,
                           std::vector<std::string>* notes) {
  std::vector<Shape> shapes(g.tensor_count());
  for (size_t t = 0; t < shapes.size(); ++t) shapes[t] = g.tensor(t).shape();
  const std::vector<Shape> probe = probe_shapes(g);
  for (size_t i = 0; i < g.input_count(); ++i) {
    const size_t t = static_cast<size_t>(g.input(i).index());
    shapes[t] = probe[t];
  }
  BlobProgram ignored;
  return bind_graph(g, int8_unavailable, &shapes, &ignored, notes);
}

}  // namespace loom::vulkan
