// Packing a quantized step's weights once: shifted into s8, split where
// oneDNN's 16-bit pairs could saturate without VNNI, reordered into the
// primitive's layout (schedule_int8.hpp has why each split is exact).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "schedule_int8_step.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {
namespace {

using plan::cpu_engine;

// Whether oneDNN's kernels without VNNI multiply x by these weights (ws,
// shifted into s8, in the plain layout: conv [M, Cg, taps], matmul [batches,
// K, N]) exactly in one pass. vpmaddubsw adds two u8 x s8 products of one
// output channel into 16 bits; with x <= 255 the pair stays within s16 when
// |w_a| + |w_b| <= 128 (255 * 128 = 32640). Which two weights oneDNN pairs
// depends on its packed layout, so the check takes the two largest
// magnitudes of each output channel over its whole reduction: true for
// weights in [-64, 64] (7-bit weights, as quantizers write them with
// `reduce_range` for such CPUs), rarely for full 8-bit weights. u8 x only
// (s8 x goes through oneDNN's sign shift and keeps the split).
bool pairs_cannot_saturate(const Int8Step& s, const std::vector<int8_t>& ws) {
  if (s.in_dtypes[0] != LOOM_DTYPE_U8) return false;
  const int64_t outs = s.conv ? s.m : s.b_batches * s.cols;
  const int64_t reduce = s.conv ? s.cg * s.k : s.inner_k;
  for (int64_t ch = 0; ch < outs; ++ch) {
    int first = 0, second = 0;
    for (int64_t r = 0; r < reduce; ++r) {
      // conv: [M, Cg * taps] rows; matmul: column j of batch b in [K, N].
      const int64_t i = s.conv ? ch * reduce + r : ((ch / s.cols) * s.inner_k + r) * s.cols + ch % s.cols;
      const int v = std::abs(static_cast<int>(ws[static_cast<size_t>(i)]));
      if (v > first) {
        second = first;
        first = v;
      } else if (v > second) {
        second = v;
      }
    }
    if (first + second > 128) return false;
  }
  return true;
}

// Whether oneDNN's float(acc) + float(bias) is float(acc + bias) for every
// output of a conv or matmul with these weights (Int8Step::fused_prim): each channel's
// accumulator is at most 255 * sum |w| in magnitude (|x - x_zero| <= 255 for
// u8 x), and integers below 2^24 are floats exactly, their sums too while
// below 2^24.
bool fused_sums_exact(const Int8Step& s, const std::vector<int8_t>& ws) {
  const int64_t reduce = s.conv ? s.cg * s.k : s.inner_k;
  const int64_t channels = s.conv ? s.m : s.cols;
  for (int64_t ch = 0; ch < channels; ++ch) {
    int64_t sum = 0;
    for (int64_t r = 0; r < reduce; ++r) {
      // conv: [M, Cg * taps] rows; matmul: column ch of [K, N].
      const int64_t i = s.conv ? ch * reduce + r : r * s.cols + ch;
      sum += std::abs(static_cast<int>(ws[static_cast<size_t>(i)]));
    }
    if (255 * sum + s.bias_abs[static_cast<size_t>(ch)] >= (int64_t{1} << 24)) return false;
  }
  return true;
}

// The even-channel split of conv weights ws [M, C, taps] (Int8Step::
// half_possible): where a channel pair (2j, 2j + 1) at one output channel
// and tap has |a| + |b| > 128, the even one keeps a' = sign(a) (128 - |b|)
// and the residual a - a' goes to `residual` [M, C / 2, taps]; elsewhere
// the residual is 0. Exact: ws = main + residual on the even channels.
// The residual's own pairs (channels 4i and 4i + 2 of ws) must not
// saturate either; where one would, false (the 7 + 1 bit split instead).
bool split_even(const Int8Step& s, const std::vector<int8_t>& ws, std::vector<int8_t>* main_part,
                std::vector<int8_t>* residual) {
  const int64_t half = s.c / 2;
  *main_part = ws;
  residual->assign(static_cast<size_t>(s.m * half * s.k), 0);
  for (int64_t mm = 0; mm < s.m; ++mm) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t t = 0; t < s.k; ++t) {
        const size_t ia = static_cast<size_t>((mm * s.c + 2 * j) * s.k + t), ib = ia + static_cast<size_t>(s.k);
        const int a = ws[ia], b = ws[ib];
        if (std::abs(a) + std::abs(b) <= 128) continue;
        const int kept = (a < 0 ? -1 : 1) * (128 - std::abs(b));
        (*main_part)[ia] = static_cast<int8_t>(kept);
        (*residual)[static_cast<size_t>((mm * half + j) * s.k + t)] = static_cast<int8_t>(a - kept);
      }
    }
  }
  for (int64_t mm = 0; mm < s.m; ++mm) {
    for (int64_t j = 0; j + 1 < half; j += 2) {
      for (int64_t t = 0; t < s.k; ++t) {
        const size_t i = static_cast<size_t>((mm * half + j) * s.k + t);
        if (std::abs(int{(*residual)[i]}) + std::abs(int{(*residual)[i + static_cast<size_t>(s.k)]}) > 128) {
          return false;
        }
      }
    }
  }
  return true;
}

// Shifts the weights into s8, reorders them for the primitive and sums
// them per output position (Tw).
}  // namespace

std::shared_ptr<const PackedInt8> shared_int8_pack(Int8PackStore& store, const Int8Step& s, const void* w) {
  Int8PackKey key;
  key.from = w;
  key.x_dtype = s.in_dtypes[0];
  key.w_dtype = s.in_dtypes[static_cast<size_t>(s.q.weight)];
  key.w_shape = s.in_shapes[static_cast<size_t>(s.q.weight)];
  key.shift = s.shift;
  key.conv = s.conv;
  key.nhwc = s.nhwc;
  key.trans_b = s.trans_b;
  key.split = s.split;
  key.fused_possible = s.fused_possible;
  key.half_possible = s.half_possible;
  key.m = s.m;
  key.c = s.c;
  key.cg = s.cg;
  key.k = s.k;
  key.o = s.o;
  key.cols = s.cols;
  key.inner_k = s.inner_k;
  key.b_batches = s.b_batches;
  key.taps = s.taps;
  key.bias_abs = s.bias_abs;
  key.user_wei_md = s.user_wei_md;
  key.wei_md = s.wei_md;
  key.fused_wei_md = s.fused_wei_md;
  key.half_user_wei_md = s.half_user_wei_md;
  key.half_wei_md = s.half_wei_md;
  std::lock_guard<std::mutex> lock(store.mutex);
  for (const auto& [k, pack] : store.entries) {
    if (!(k == key)) continue;
    ++store.reuses;
    return pack;
  }
  std::shared_ptr<const PackedInt8> made = pack_int8_weights(s, w);
  store.entries.emplace_back(std::move(key), made);
  ++store.packs;
  return made;
}

std::shared_ptr<PackedInt8> pack_int8_weights(const Int8Step& s, const void* w) {
  auto p = std::make_shared<PackedInt8>();
  p->from = w;
  const std::vector<int64_t>& wshape = s.in_shapes[static_cast<size_t>(s.q.weight)];
  int64_t count = 1;
  for (int64_t d : wshape) count *= d;
  std::vector<int8_t> shifted(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int32_t v = s.in_dtypes[static_cast<size_t>(s.q.weight)] == LOOM_DTYPE_U8
                          ? static_cast<int32_t>(static_cast<const uint8_t*>(w)[i]) - s.shift
                          : static_cast<int32_t>(static_cast<const int8_t*>(w)[i]);
    shifted[static_cast<size_t>(i)] = static_cast<int8_t>(v);
  }
  if (s.trans_b) {
    // [N, K] -> [K, N]: everything below reads B as [K, N].
    std::vector<int8_t> kn(shifted.size());
    for (int64_t j = 0; j < s.cols; ++j) {
      for (int64_t kk = 0; kk < s.inner_k; ++kk) {
        kn[static_cast<size_t>(kk * s.cols + j)] = shifted[static_cast<size_t>(j * s.inner_k + kk)];
      }
    }
    shifted.swap(kn);
  }
  dnnl::engine& eng = cpu_engine();
  dnnl::stream st(eng);
  auto reorder_in = [&](std::vector<int8_t>& plain, memory* into) {
    memory user(s.user_wei_md, eng, plain.data());
    *into = memory(s.wei_md, eng);
    dnnl::reorder(user, *into).execute(st, user, *into);
    st.wait();
  };
  if (s.fused_possible && (!s.split || pairs_cannot_saturate(s, shifted)) && fused_sums_exact(s, shifted)) {
    // oneDNN requantizes: its weights layout (with the compensation for x's
    // zero point) is all the step needs.
    memory user(s.user_wei_md, eng, shifted.data());
    p->mem = memory(s.fused_wei_md, eng);
    dnnl::reorder(user, p->mem).execute(st, user, p->mem);
    st.wait();
    p->fused = true;
    return p;
  }
  p->two_pass = s.split && !pairs_cannot_saturate(s, shifted);
  std::vector<int8_t> main_part, residual;
  if (p->two_pass && s.half_possible && split_even(s, shifted, &main_part, &residual)) {
    p->half = true;
    p->low_shift = 0;
    reorder_in(main_part, &p->mem);
    memory user(s.half_user_wei_md, eng, residual.data());
    p->low = memory(s.half_wei_md, eng);
    dnnl::reorder(user, p->low).execute(st, user, p->low);
    st.wait();
  } else if (p->two_pass) {
    std::vector<int8_t> hi(shifted.size()), lo(shifted.size());
    for (size_t i = 0; i < shifted.size(); ++i) {
      const int v = shifted[i];
      const int h = v >= 0 ? v / 2 : -((-v + 1) / 2);  // floor(v / 2)
      hi[i] = static_cast<int8_t>(h);
      lo[i] = static_cast<int8_t>(v - 2 * h);
    }
    reorder_in(hi, &p->mem);
    reorder_in(lo, &p->low);
  } else {
    reorder_in(shifted, &p->mem);
  }
  if (s.conv) {
    // wk[m, tap] = sum over the group's input channels.
    std::vector<int64_t> wk(static_cast<size_t>(s.m * s.k), 0);
    for (int64_t mm = 0; mm < s.m; ++mm) {
      for (int64_t ci = 0; ci < s.cg; ++ci) {
        const int8_t* row = shifted.data() + (mm * s.cg + ci) * s.k;
        for (int64_t t = 0; t < s.k; ++t) wk[static_cast<size_t>(mm * s.k + t)] += row[t];
      }
    }
    p->tw.assign(static_cast<size_t>(s.m * s.o), 0);
    for (int64_t mm = 0; mm < s.m; ++mm) {
      for (int64_t op = 0; op < s.o; ++op) {
        int64_t sum = 0;
        for (int64_t t = 0; t < s.k; ++t) {
          if (s.taps[static_cast<size_t>(op * s.k + t)] >= 0) sum += wk[static_cast<size_t>(mm * s.k + t)];
        }
        p->tw[static_cast<size_t>(mm * s.o + op)] = sum;
      }
    }
    if (s.nhwc) {
      p->tw_t.resize(p->tw.size());
      for (int64_t mm = 0; mm < s.m; ++mm) {
        for (int64_t op = 0; op < s.o; ++op) {
          const uint64_t tw = static_cast<uint64_t>(p->tw[static_cast<size_t>(mm * s.o + op)]);
          p->tw_t[static_cast<size_t>(op * s.m + mm)] = static_cast<int32_t>(static_cast<uint32_t>(tw));
        }
      }
    }
  } else {
    p->tw.assign(static_cast<size_t>(s.b_batches * s.cols), 0);
    for (int64_t b = 0; b < s.b_batches; ++b) {
      for (int64_t kk = 0; kk < s.inner_k; ++kk) {
        const int8_t* row = shifted.data() + (b * s.inner_k + kk) * s.cols;
        for (int64_t j = 0; j < s.cols; ++j) p->tw[static_cast<size_t>(b * s.cols + j)] += row[j];
      }
    }
    // The same sums wrapped to 32 bits, for requantize_row_avx2.
    p->tw_t.resize(p->tw.size());
    for (size_t j = 0; j < p->tw.size(); ++j) {
      p->tw_t[j] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(p->tw[j])));
    }
  }
  return p;
}

}  // namespace loom::cpu_simd
