#include "compile.hpp"

#include <utility>

#include "lower.hpp"

namespace loom::vulkan {
namespace {

// Builds the blob program node by node.
class Builder {
 public:
  explicit Builder(const Graph& g) : g_(g), map_(g.tensor_count, UINT32_MAX) {}

  Status build(BlobProgram* out) {
    const auto* ins = g_.g->inputs();
    const auto* outs = g_.g->outputs();
    for (uint32_t i = 0; ins != nullptr && i < ins->size(); ++i) {
      const int32_t t = ins->Get(i);
      if (g_.tensor(t).dtype() != gfb::DType::f32) {
        return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " (" +
                                     g_.tensor(t).name()->str() + ") is not f32");
      }
      if (map_[static_cast<size_t>(t)] != UINT32_MAX) {
        return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " is listed twice");
      }
      add(t, TensorKind::kInput);
    }
    for (uint32_t i = 0; outs != nullptr && i < outs->size(); ++i) {
      const int32_t t = outs->Get(i);
      if (map_[static_cast<size_t>(t)] != UINT32_MAX) {
        return sdk::invalid_argument("compile: graph output " + std::to_string(i) + " (" +
                                     g_.tensor(t).name()->str() + ") is a graph input or listed twice");
      }
      add(t, TensorKind::kOutput);
    }
    std::vector<bool> written(g_.tensor_count, false);
    for (size_t n = 0; n < g_.node_count(); ++n) {
      Lowered node;
      std::string why;
      if (!lower_node(g_, n, &node, &why)) {
        return sdk::invalid_argument("compile: " + g_.label(n) + " is not supported by vulkan-compute: " + why);
      }
      std::vector<uint32_t> operands;
      for (int32_t t : node.operands) {
        if (map_[static_cast<size_t>(t)] == UINT32_MAX) {
          const gfb::Tensor& gt = g_.tensor(t);
          if (gt.data() == nullptr || gt.parameter() != nullptr) {
            return sdk::invalid_argument("compile: " + g_.label(n) + " reads tensor " + gt.name()->str() +
                                         ", which is neither a graph input, an inline constant, "
                                         "nor written by an earlier node");
          }
          add(t, TensorKind::kConstant);
        }
        operands.push_back(map_[static_cast<size_t>(t)]);
      }
      const size_t o = static_cast<size_t>(node.output);
      if (written[o]) {
        return sdk::invalid_argument("compile: " + g_.label(n) + " writes tensor " +
                                     g_.tensor(node.output).name()->str() + ", which already has a producer");
      }
      written[o] = true;
      LOOM_SDK_RETURN_IF_ERROR(emit(node, operands));
    }
    for (uint32_t i = 0; outs != nullptr && i < outs->size(); ++i) {
      if (!written[static_cast<size_t>(outs->Get(i))]) {
        return sdk::invalid_argument("compile: graph output " + std::to_string(i) + " (" +
                                     g_.tensor(outs->Get(i)).name()->str() + ") is not written by any node");
      }
    }
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
  uint32_t add(int32_t t, TensorKind kind) {
    BlobTensor bt;
    bt.kind = kind;
    bt.shape = g_.shape(t);
    if (kind == TensorKind::kConstant) {
      bt.data_offset = p_.data.size();
      const auto* d = g_.tensor(t).data();
      p_.data.insert(p_.data.end(), d->begin(), d->end());
    }
    p_.tensors.push_back(bt);
    consumers_.push_back(g_.consumers[static_cast<size_t>(t)]);
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
    if ((d.kernel != Kernel::kMatMul && d.kernel != Kernel::kConv) || d.bindings.back() != operand) {
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
          uint32_t* flags = d == nullptr ? nullptr : &d->push[d->kernel == Kernel::kConv ? 16 : 7];
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
        p_.dispatches.push_back(make_conv(node.conv, in[0], in[1], node.conv.bias ? in[2] : 0, y));
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

  const Graph& g_;
  std::vector<uint32_t> map_;
  BlobProgram p_;
  std::vector<uint32_t> consumers_;  // per blob tensor: node operands reading it
};


}  // namespace

Status compile_supported(const void* data, size_t size, size_t node_count, bool* out) {
  Graph g;
  LOOM_SDK_RETURN_IF_ERROR(open_graph(data, size, &g));
  if (g.node_count() != node_count) {
    return sdk::invalid_argument("compile_supported: node_count is " + std::to_string(node_count) +
                                 ", the graph has " + std::to_string(g.node_count()) + " nodes");
  }
  for (size_t n = 0; n < node_count; ++n) {
    Lowered ignored;
    std::string why;
    out[n] = lower_node(g, n, &ignored, &why);
  }
  return Status();
}

Status compile_graph(const void* data, size_t size, BlobProgram* out) {
  Graph g;
  LOOM_SDK_RETURN_IF_ERROR(open_graph(data, size, &g));
  Builder b(g);
  return b.build(out);
}

}  // namespace loom::vulkan
