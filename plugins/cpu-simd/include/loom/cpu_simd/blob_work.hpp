// The work of a cpu-simd blob, node by node: floating-point operations and
// bytes moved, which executable_estimate turns into time with the device's
// measured rates (see the plugin's README, "Estimates"). Header-only so that
// tests check the counts without the plugin.
//
// The counts are those of the operators as the graph states them, before the
// plugin's fusions:
//   MatMul, Gemm, QLinearMatMul, MatMulInteger  2 * output elements * K
//                                               (Gemm adds one per output for C)
//   Conv, QLinearConv, ConvInteger              2 * output elements * (C/group * kernel)
//                                               (= W's elements per output channel)
//   ConvTranspose                               2 * input elements * W's elements per
//                                               input channel
//   MaxPool, AveragePool                        output elements * kernel size
//   Softmax, LogSoftmax, LayerNormalization     a few per element (5, 5, 8)
//   other arithmetic                            one per output element (reductions and
//                                               GlobalAveragePool: per input element)
//   data movement (Copy, Concat, Transpose, Slice, Gather, Pad, Resize, Cast)  none
// and bytes are every input (constants and weights included) plus every
// output, read or written once.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {

// Which measured rate bounds a node's arithmetic.
enum class WorkKind : uint8_t {
  kMatMul,  // MatMul, Gemm and their int8 forms
  kConv,    // Conv, ConvTranspose and their int8 forms
  kOther,   // elementwise, reductions, pooling, normalization: bound by memory
  kData,    // data movement only: no arithmetic
};

// The work of one node.
struct NodeWork {
  WorkKind kind = WorkKind::kOther;
  double flops = 0;
  double bytes = 0;
  double elements = 0;  // of the first output (how the plain kernels split work)
};

namespace work_detail {

inline double elements(const BlobTensor& t) {
  uint64_t n = 0;
  return element_count(t.shape, &n) ? static_cast<double>(n) : 0.0;
}

inline double bytes(const BlobTensor& t) { return elements(t) * dtype_size(t.dtype); }

// The product of W's dimensions after the first (elements per output or
// input channel).
inline double per_channel(const BlobTensor& w) {
  double n = 1;
  for (size_t d = 1; d < w.shape.size(); ++d) n *= static_cast<double>(w.shape[d]);
  return n;
}

}  // namespace work_detail

// The work of node `index` of `g`, a graph decode() accepted with static
// shapes only.
inline NodeWork node_work(const BlobGraph& g, size_t index) {
  using work_detail::elements;
  const BlobNode& node = g.nodes[index];
  NodeWork w;
  for (uint32_t t : node.inputs) w.bytes += work_detail::bytes(g.tensors[t]);
  for (uint32_t t : node.outputs) w.bytes += work_detail::bytes(g.tensors[t]);
  static const BlobTensor kNone;
  const BlobTensor& in0 = node.inputs.empty() ? kNone : g.tensors[node.inputs[0]];
  const double out = node.outputs.empty() ? 0.0 : elements(g.tensors[node.outputs[0]]);
  w.elements = out;
  switch (node.op) {
    case Op::kMatMul:
    case Op::kQLinearMatMul:
    case Op::kMatMulInteger: {
      const double k = in0.shape.empty() ? 1.0 : static_cast<double>(in0.shape.back());
      w.kind = WorkKind::kMatMul;
      w.flops = 2 * out * k;
      break;
    }
    case Op::kGemm: {
      const double k = in0.shape.size() < 2 ? 1.0
                       : static_cast<double>(node.trans_a ? in0.shape[0] : in0.shape[1]);
      w.kind = WorkKind::kMatMul;
      w.flops = 2 * out * k + (node.inputs.size() > 2 ? out : 0.0);
      break;
    }
    case Op::kConv:
    case Op::kConvInteger:
      w.kind = WorkKind::kConv;
      w.flops = 2 * out * work_detail::per_channel(g.tensors[node.inputs.at(1)]);
      break;
    case Op::kQLinearConv:
      w.kind = WorkKind::kConv;
      w.flops = 2 * out * work_detail::per_channel(g.tensors[node.inputs.at(3)]);
      break;
    case Op::kConvTranspose:
      w.kind = WorkKind::kConv;
      w.flops = 2 * elements(in0) * work_detail::per_channel(g.tensors[node.inputs.at(1)]);
      break;
    case Op::kQLinearConvTranspose:
      w.kind = WorkKind::kConv;
      w.flops = 2 * elements(in0) * work_detail::per_channel(g.tensors[node.inputs.at(3)]);
      break;
    case Op::kMaxPool:
    case Op::kAveragePool: {
      // ints = [k, ceil_mode, count_include_pad, kernel[k], ...]
      double window = 1;
      const int64_t k = node.ints.empty() ? 0 : node.ints[0];
      for (int64_t d = 0; d < k && static_cast<size_t>(3 + d) < node.ints.size(); ++d) {
        window *= static_cast<double>(node.ints[3 + d]);
      }
      w.flops = out * window;
      break;
    }
    case Op::kGlobalAveragePool:
    case Op::kReduceMean:
    case Op::kReduceSum:
    case Op::kReduceMax:
    case Op::kReduceMin:
      w.flops = elements(in0);
      break;
    case Op::kSoftmax:
    case Op::kLogSoftmax:
      w.flops = 5 * out;
      break;
    case Op::kLayerNormalization:
      w.flops = 8 * out;
      break;
    case Op::kLstm:
    case Op::kGru:
    case Op::kRnn: {
      // Per time step and batch row: W's and R's multiply-adds.
      const std::vector<int64_t>& x = in0.shape;
      const double steps = x.size() == 3 ? static_cast<double>(x[0]) * static_cast<double>(x[1]) : 0.0;
      w.flops = 2 * steps * (elements(g.tensors[node.inputs[1]]) + elements(g.tensors[node.inputs[2]]));
      break;
    }
    case Op::kDynamicQuantizeScale:
    case Op::kDynamicQuantizeZeroPoint:
      w.flops = 2 * elements(in0);  // the range: a min and a max per element
      break;
    case Op::kCopy:
    case Op::kConcat:
    case Op::kTranspose:
    case Op::kSlice:
    case Op::kGather:
    case Op::kPad:
    case Op::kResize:
    case Op::kCast:
      w.kind = WorkKind::kData;
      break;
    default:
      w.flops = out;
      break;
  }
  return w;
}

// The work of every node of `g`, in order. False (and `out` empty) when `g`
// has an open dimension: its work follows the binding, unknown before
// execute.
inline bool graph_work(const BlobGraph& g, std::vector<NodeWork>* out) {
  out->clear();
  if (has_open_dims(g)) return false;
  out->reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) out->push_back(node_work(g, i));
  return true;
}

}  // namespace loom::cpu_simd
