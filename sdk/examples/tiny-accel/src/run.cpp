// tiny-accel's "device": a plain loop per op on host memory. A real
// accelerator would submit the program to its queue here; the structure
// (inputs and outputs resolved by the caller, scratch per call) is the same.
#include <algorithm>
#include <cstring>

#include "program.hpp"

namespace tiny_accel {
namespace {

// Strides (in elements) of `dims` seen through an output of rank `rank`:
// 0 along broadcast dimensions.
std::vector<uint64_t> broadcast_strides(const std::vector<int64_t>& dims, size_t rank) {
  std::vector<uint64_t> s(rank, 0);
  uint64_t stride = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    const size_t i = rank - dims.size() + k;
    s[i] = dims[k] == 1 ? 0 : stride;
    stride *= static_cast<uint64_t>(dims[k]);
  }
  return s;
}

void binary(OpCode code, const Tensor& ta, const float* a, const Tensor& tb, const float* b,
            const Tensor& to, float* out) {
  const size_t rank = to.dims.size();
  const std::vector<uint64_t> sa = broadcast_strides(ta.dims, rank);
  const std::vector<uint64_t> sb = broadcast_strides(tb.dims, rank);
  std::vector<int64_t> index(rank, 0);
  uint64_t ia = 0, ib = 0;
  const uint64_t n = to.elements();
  for (uint64_t i = 0; i < n; ++i) {
    out[i] = code == OpCode::kAdd ? a[ia] + b[ib] : a[ia] * b[ib];
    // Advance the output index like an odometer, moving both input offsets.
    for (size_t d = rank; d-- > 0;) {
      ia += sa[d];
      ib += sb[d];
      if (++index[d] < to.dims[d]) break;
      ia -= sa[d] * static_cast<uint64_t>(to.dims[d]);
      ib -= sb[d] * static_cast<uint64_t>(to.dims[d]);
      index[d] = 0;
    }
  }
}

void matmul(const Tensor& ta, const float* a, const Tensor& tb, const float* b, float* out) {
  const int64_t m = ta.dims[0], k = ta.dims[1], n = tb.dims[1];
  std::fill(out, out + m * n, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = a[i * k + kk];
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += av * b[kk * n + j];
    }
  }
}

}  // namespace

void run(const Program& p, const float* const* inputs, float* const* outputs) {
  // One pointer per tensor: inputs are the caller's, constants the
  // program's, values live in scratch owned by this call.
  std::vector<const float*> data(p.tensors.size(), nullptr);
  std::vector<std::vector<float>> scratch(p.tensors.size());
  for (size_t i = 0; i < p.inputs.size(); ++i) data[p.inputs[i]] = inputs[i];
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    if (p.tensors[t].kind == Kind::kConstant) data[t] = p.tensors[t].data.data();
  }
  for (const Op& op : p.ops) {
    std::vector<float>& out = scratch[op.out];
    out.resize(p.tensors[op.out].elements());
    const Tensor& ta = p.tensors[op.a];
    switch (op.code) {
      case OpCode::kRelu:
        for (size_t i = 0; i < out.size(); ++i) out[i] = data[op.a][i] > 0 ? data[op.a][i] : 0.0f;
        break;
      case OpCode::kMatMul:
        matmul(ta, data[op.a], p.tensors[op.b], data[op.b], out.data());
        break;
      case OpCode::kAdd:
      case OpCode::kMul:
        binary(op.code, ta, data[op.a], p.tensors[op.b], data[op.b], p.tensors[op.out], out.data());
        break;
    }
    data[op.out] = out.data();
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const size_t n = p.tensors[p.outputs[i]].elements();
    if (n != 0) std::memcpy(outputs[i], data[p.outputs[i]], n * sizeof(float));
  }
}

}  // namespace tiny_accel
