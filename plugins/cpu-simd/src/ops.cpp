#include "ops.hpp"

#include <cmath>

#ifndef LOOM_CPU_SIMD_ISA
#define LOOM_CPU_SIMD_ISA isa_baseline
#endif

namespace loom::cpu_simd {
namespace LOOM_CPU_SIMD_ISA {
namespace {

// Columns of B kept hot while sweeping a row panel.
constexpr int64_t kBlockK = 128;

}  // namespace

BroadcastGeometry broadcast_geometry(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  BroadcastGeometry g;
  std::vector<int64_t> out;
  broadcast_shapes(a, b, &out);
  g.rank = out.size();
  auto strides = [&](const std::vector<int64_t>& s, std::array<int64_t, kMaxRank>& st) {
    const size_t pad = g.rank - s.size();
    int64_t stride = 1;
    for (size_t d = g.rank; d-- > 0;) {
      if (d < pad) {
        st[d] = 0;
        continue;
      }
      const int64_t extent = s[d - pad];
      st[d] = extent == 1 ? 0 : stride;
      stride *= extent;
    }
  };
  for (size_t d = 0; d < g.rank; ++d) g.dims[d] = out[d];
  strides(a, g.a_strides);
  strides(b, g.b_strides);
  coalesce(&g);
  return g;
}

namespace {

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Rows [begin, end) of C = A * B, A [m, k], B [k, n], blocked over k.
void matmul_rows(const float* a, const float* b, float* c, int64_t k, int64_t n, int64_t begin,
                 int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float* row = c + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < k; p0 += kBlockK) {
    const int64_t p1 = p0 + kBlockK < k ? p0 + kBlockK : k;
    for (int64_t i = begin; i < end; ++i) {
      float* __restrict row = c + i * n;
      const float* arow = a + i * k;
      for (int64_t p = p0; p < p1; ++p) {
        const float av = arow[p];
        const float* __restrict brow = b + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
      }
    }
  }
}

void run_matmul(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* a = t[p.inputs[0]];
  const float* b = t[p.inputs[1]];
  float* y = t[p.output];
  const int64_t batches = static_cast<int64_t>(p.a_offsets.size());
  const int64_t rows = batches * p.m;
  if (p.m * p.n == 0) return;
  auto body = [&](size_t begin, size_t end) {
    // A range of rows over all batches, cut at batch boundaries.
    int64_t r = static_cast<int64_t>(begin);
    while (r < static_cast<int64_t>(end)) {
      const int64_t batch = r / p.m;
      const int64_t row = r % p.m;
      int64_t stop = (batch + 1) * p.m;
      if (stop > static_cast<int64_t>(end)) stop = static_cast<int64_t>(end);
      matmul_rows(a + p.a_offsets[batch], b + p.b_offsets[batch], y + batch * p.m * p.n, p.k,
                  p.n, row, row + (stop - r));
      r = stop;
    }
  };
  const int64_t work = rows * p.k * p.n;
  if (work < kParallelThreshold) {
    body(0, static_cast<size_t>(rows));
  } else {
    pool.parallel_for(static_cast<size_t>(rows), 1, body);
  }
}

void run_gemm(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* a = t[p.inputs[0]];
  const float* b = t[p.inputs[1]];
  const float* c = p.input_count == 3 ? t[p.inputs[2]] : nullptr;
  float* y = t[p.output];
  // Element (i, q) of op(A) and (q, j) of op(B).
  const int64_t a_i = p.trans_a ? 1 : p.k, a_q = p.trans_a ? p.m : 1;
  const int64_t b_q = p.trans_b ? 1 : p.n, b_j = p.trans_b ? p.k : 1;
  auto body = [&](size_t begin, size_t end) {
    for (int64_t i = static_cast<int64_t>(begin); i < static_cast<int64_t>(end); ++i) {
      float* row = y + i * p.n;
      for (int64_t j = 0; j < p.n; ++j) row[j] = 0.0f;
      for (int64_t q = 0; q < p.k; ++q) {
        const float av = a[i * a_i + q * a_q];
        const float* bq = b + q * b_q;
        if (b_j == 1) {
          for (int64_t j = 0; j < p.n; ++j) row[j] += av * bq[j];
        } else {
          for (int64_t j = 0; j < p.n; ++j) row[j] += av * bq[j * b_j];
        }
      }
      for (int64_t j = 0; j < p.n; ++j) {
        row[j] *= p.alpha;
        if (c != nullptr) row[j] += p.beta * c[i * p.c_row_stride + j * p.c_col_stride];
      }
    }
  };
  if (p.m * p.k * p.n < kParallelThreshold) {
    body(0, static_cast<size_t>(p.m));
  } else {
    pool.parallel_for(static_cast<size_t>(p.m), 1, body);
  }
}

}  // namespace

NodePlan plan_node(const BlobGraph& graph, size_t index) {
  const BlobNode& node = graph.nodes[index];
  NodePlan p;
  p.op = node.op;
  p.input_count = node.inputs.size();
  p.inputs = node.inputs;
  p.output = node.outputs[0];
  const std::vector<int64_t>& out = graph.tensors[p.output].shape;
  p.count = elements(out);
  p.out_dtype = graph.tensors[p.output].dtype;
  p.elem = dtype_size(p.out_dtype);
  auto shape = [&](size_t i) -> const std::vector<int64_t>& {
    return graph.tensors[node.inputs[i]].shape;
  };
  switch (node.op) {
    case Op::kMatMul: {
      const std::vector<int64_t>& a = shape(0);
      const std::vector<int64_t>& b = shape(1);
      p.m = a.size() == 1 ? 1 : a[a.size() - 2];
      p.k = a.back();
      p.n = b.size() == 1 ? 1 : b.back();
      std::vector<int64_t> ba(a.begin(), a.end() - (a.size() >= 2 ? 2 : 1));
      std::vector<int64_t> bb(b.begin(), b.end() - (b.size() >= 2 ? 2 : 1));
      BroadcastGeometry g = broadcast_geometry(ba, bb);
      int64_t batches = 1;
      for (size_t d = 0; d < g.rank; ++d) batches *= g.dims[d];
      std::array<int64_t, kMaxRank> idx{};
      for (int64_t bi = 0; bi < batches; ++bi) {
        int64_t ao = 0, bo = 0;
        for (size_t d = 0; d < g.rank; ++d) {
          ao += idx[d] * g.a_strides[d];
          bo += idx[d] * g.b_strides[d];
        }
        p.a_offsets.push_back(ao * p.m * p.k);
        p.b_offsets.push_back(bo * p.k * p.n);
        for (size_t d = g.rank; d-- > 0;) {
          if (++idx[d] < g.dims[d]) break;
          idx[d] = 0;
        }
      }
      break;
    }
    case Op::kGemm: {
      const std::vector<int64_t>& a = shape(0);
      const std::vector<int64_t>& b = shape(1);
      p.trans_a = node.trans_a != 0;
      p.trans_b = node.trans_b != 0;
      p.m = p.trans_a ? a[1] : a[0];
      p.k = p.trans_a ? a[0] : a[1];
      p.n = p.trans_b ? b[0] : b[1];
      p.alpha = node.alpha;
      p.beta = node.beta;
      if (p.input_count == 3) {
        const std::vector<int64_t>& c = shape(2);
        const int64_t cm = c.size() == 2 ? c[0] : 1;
        const int64_t cn = c.empty() ? 1 : c.back();
        p.c_row_stride = cm == 1 ? 0 : cn;
        p.c_col_stride = cn == 1 ? 0 : 1;
      }
      break;
    }
    default:
      plan_nn_node(graph, node, &p);
      break;
  }
  return p;
}

void run_node(const NodePlan& plan, float* const* tensors, ThreadPool& pool) {
  if (plan.elem != 4 && moves_elements(plan.op)) return run_moved_node(plan, tensors);
  switch (plan.op) {
    case Op::kMatMul: run_matmul(plan, tensors, pool); return;
    case Op::kGemm: run_gemm(plan, tensors, pool); return;
    default: run_nn_node(plan, tensors, pool); return;
  }
}

}  // namespace LOOM_CPU_SIMD_ISA
}  // namespace loom::cpu_simd
