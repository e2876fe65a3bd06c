#include "int8_dot.hpp"

#include <algorithm>
#include <cstring>

#include "loom/vulkan_compute/int8_kernels.hpp"

namespace loom::vulkan {

namespace {

constexpr uint64_t kMaxWords = uint64_t{1} << 31;

// The push constants of a qconv dispatch (make_qconv).
struct QConvShape {
  uint64_t n, c, h, w, m, kh, kw, group, types;
};

QConvShape shape_of(const BlobDispatch& d) {
  const auto q = [&](size_t i) { return uint64_t{d.push[i]}; };
  return {q(0), q(1), q(2), q(3), q(4), q(7), q(8), q(15), q(18)};
}

}  // namespace

size_t use_integer_dot(BlobProgram* program, std::map<uint32_t, std::vector<uint8_t>>* constants) {
  BlobProgram& prog = *program;
  constants->clear();
  std::vector<BlobDispatch> out;
  out.reserve(prog.dispatches.size());
  uint64_t scratch_words = 0;
  const auto scratch = static_cast<uint32_t>(prog.tensors.size());  // the shared packed x, if any
  size_t rewritten = 0;
  for (const BlobDispatch& d : prog.dispatches) {
    // (A transposed qconv gathers its taps: it stays on qconv.comp.)
    if (d.kernel != Kernel::kQConv || d.push.size() != kQConvPush || d.bindings.size() != 4 || qconv_transposed(d)) {
      out.push_back(d);
      continue;
    }
    const BlobTensor& wt = prog.tensors[d.bindings[1]];
    const QConvShape s = shape_of(d);
    const bool b_layout = (s.types & kQConvBLayout) != 0;
    const bool w_signed = ((s.types >> 4) & 15) == static_cast<uint32_t>(DType::kI8);
    if (wt.kind != TensorKind::kConstant || prog.data_view == nullptr || s.group == 0 || s.c % s.group != 0 ||
        s.m % s.group != 0) {
      out.push_back(d);
      continue;
    }
    const uint64_t cg = s.c / s.group, c4 = (cg + 3) / 4, taps = s.kh * s.kw;
    const uint64_t w_words = s.m * taps * c4 + s.m * taps;
    const uint64_t x_words = s.n * s.group * s.h * s.w * c4;
    const uint64_t w_bytes = b_layout ? s.c * s.m : s.m * cg * taps;
    if (wt.bytes() != w_bytes || w_words >= kMaxWords || x_words >= kMaxWords ||
        wt.data_offset > prog.data_size || w_bytes > prog.data_size - wt.data_offset) {
      out.push_back(d);
      continue;
    }
    const uint8_t* wb = prog.data_view + wt.data_offset;
    std::vector<uint32_t> packed(static_cast<size_t>(w_words), 0);
    const uint64_t sums = s.m * taps * c4;
    for (uint64_t oc = 0; oc < s.m; ++oc) {
      for (uint64_t tap = 0; tap < taps; ++tap) {
        int32_t sum = 0;
        for (uint64_t c = 0; c < cg; ++c) {
          const uint8_t byte = b_layout ? wb[c * s.m + oc] : wb[(oc * cg + c) * taps + tap];
          packed[static_cast<size_t>((oc * taps + tap) * c4 + c / 4)] |= uint32_t{byte} << (8 * (c % 4));
          sum += w_signed ? static_cast<int32_t>(static_cast<int8_t>(byte)) : static_cast<int32_t>(byte);
        }
        packed[static_cast<size_t>(sums + oc * taps + tap)] = static_cast<uint32_t>(sum);
      }
    }
    const auto wp = static_cast<uint32_t>(prog.tensors.size() + 1 + constants->size());
    std::vector<uint8_t>& bytes = (*constants)[wp];
    bytes.resize(packed.size() * 4);
    std::memcpy(bytes.data(), packed.data(), bytes.size());
    scratch_words = std::max(scratch_words, x_words);

    BlobDispatch pack;
    pack.kernel = Kernel::kQPack;
    pack.bindings = {d.bindings[0], scratch};
    pack.push = {static_cast<uint32_t>(x_words), static_cast<uint32_t>(s.c), static_cast<uint32_t>(s.h * s.w),
                 static_cast<uint32_t>(s.group)};
    linear_groups(x_words, pack.groups);
    out.push_back(pack);
    BlobDispatch dot = d;
    dot.kernel = Kernel::kQConvDot;
    dot.bindings = {scratch, wp, d.bindings[2], d.bindings[3]};
    out.push_back(dot);
    ++rewritten;
  }
  if (rewritten == 0) return 0;
  BlobTensor x;
  x.kind = TensorKind::kIntermediate;
  x.dtype = DType::kI32;
  x.shape = {static_cast<int64_t>(std::max<uint64_t>(scratch_words, 1))};
  prog.tensors.push_back(x);
  // The packed weights, in the order of their indices (scratch + 1, ...).
  for (const auto& entry : *constants) {
    BlobTensor t;
    t.kind = TensorKind::kConstant;
    t.dtype = DType::kI32;
    t.shape = {static_cast<int64_t>(entry.second.size() / 4)};
    prog.tensors.push_back(t);
  }
  prog.dispatches = std::move(out);
  return rewritten;
}

}  // namespace loom::vulkan
