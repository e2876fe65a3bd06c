// The host steps of a staged function that are not calls or control flow:
// the sequence operators, and reference kernels whose outputs their operands'
// values size (NonMaxSuppression, NonZero, Compress, Unique).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/kernel.hpp"
#include "lowering/staged.hpp"
#include "runtime/program_state.hpp"
#include "runtime/session_state.hpp"
#include "runtime/staged_function.hpp"
#include "runtime/staged_tensors.hpp"

namespace loom::runtime {

Result<const Tensor*> StagedSession::tensor_value(uint32_t v) const {
  if (is_sequence_[v] || is_none_[v]) {
    return invalid_argument("value '" + staged_.values[v].name + "' is " + describe_value(value_of(v)) +
                            ", not a tensor");
  }
  return &values_[v];
}

Result<std::vector<Tensor>*> StagedSession::sequence_value(uint32_t v) {
  if (!is_sequence_[v]) {
    return invalid_argument("value '" + staged_.values[v].name + "' is " + describe_value(value_of(v)) +
                            ", not a sequence");
  }
  return &sequences_[v];
}

namespace {

// A position of a sequence of `size` elements, negative from the end;
// `insert` allows size itself (after the last).
Result<size_t> sequence_position(const Tensor& t, size_t size, bool insert) {
  LOOM_ASSIGN_OR_RETURN(int64_t p, staged::scalar_of(t, "the position"));
  const int64_t n = static_cast<int64_t>(size);
  const int64_t hi = insert ? n : n - 1;
  if (p < -n || p > hi) {
    return out_of_range("sequence index " + std::to_string(p) + " is out of range for a sequence of " +
                        std::to_string(size) + " tensors (" + std::to_string(-n) + " to " + std::to_string(hi) + ")");
  }
  return static_cast<size_t>(p < 0 ? p + n : p);
}

Result<Tensor> concat_along(const std::vector<Tensor>& parts, int64_t axis, bool new_axis) {
  if (parts.empty()) return invalid_argument("ConcatFromSequence of an empty sequence");
  const Tensor& first = parts.front();
  const int64_t rank = static_cast<int64_t>(first.shape().size()) + (new_axis ? 1 : 0);
  if (axis < -rank || axis >= rank) {
    return invalid_argument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  if (new_axis) return staged::stack(parts, static_cast<int64_t>(a), false, "ConcatFromSequence");
  Shape shape = first.shape();
  int64_t total = 0;
  for (const Tensor& p : parts) {
    Shape other = p.shape();
    if (p.dtype() != first.dtype() || other.size() != shape.size()) {
      return invalid_argument("ConcatFromSequence: element " + std::string(dtype_name(p.dtype())) + " " +
                              shape_to_string(p.shape()) + " does not match " + std::string(dtype_name(first.dtype())) +
                              " " + shape_to_string(first.shape()));
    }
    other[a] = shape[a];
    if (other != shape) {
      return invalid_argument("ConcatFromSequence: shapes " + shape_to_string(first.shape()) + " and " +
                              shape_to_string(p.shape()) + " differ outside axis " + std::to_string(a));
    }
    total += p.shape()[a];
  }
  shape[a] = total;
  LOOM_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(first.dtype(), shape));
  uint64_t outer = 1;
  for (size_t d = 0; d < a; ++d) outer *= static_cast<uint64_t>(shape[d]);
  auto* dst = static_cast<std::byte*>(out.data());
  const uint64_t out_row = out.byte_size() / std::max<uint64_t>(outer, 1);
  uint64_t offset = 0;
  for (const Tensor& p : parts) {
    const uint64_t row = p.byte_size() / std::max<uint64_t>(outer, 1);
    for (uint64_t o = 0; o < outer && row != 0; ++o) {
      std::memcpy(dst + o * out_row + offset, static_cast<const std::byte*>(p.data()) + o * row, row);
    }
    offset += row;
  }
  return out;
}

// Rows [begin, end) of `t` along `axis`, keeping the axis.
Result<Tensor> rows_of(const Tensor& t, size_t axis, int64_t begin, int64_t end) {
  Shape shape = t.shape();
  shape[axis] = end - begin;
  LOOM_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(t.dtype(), shape));
  uint64_t outer = 1, inner = dtype_size(t.dtype());
  for (size_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(t.shape()[d]);
  for (size_t d = axis + 1; d < t.shape().size(); ++d) inner *= static_cast<uint64_t>(t.shape()[d]);
  const uint64_t in_row = static_cast<uint64_t>(t.shape()[axis]) * inner;
  const uint64_t out_row = static_cast<uint64_t>(end - begin) * inner;
  for (uint64_t o = 0; o < outer && out_row != 0; ++o) {
    std::memcpy(static_cast<std::byte*>(out.data()) + o * out_row,
                static_cast<const std::byte*>(t.data()) + o * in_row + static_cast<uint64_t>(begin) * inner, out_row);
  }
  return out;
}

}  // namespace

Status StagedSession::run_sequence_op(size_t s) {
  const StagedStep& step = staged_.steps[s];
  const std::string& op = step.kernel;
  auto input = [&](size_t i) -> const Tensor* {
    return i < step.inputs.size() && step.inputs[i] != kAbsentValue && !is_sequence_[step.inputs[i]]
               ? &values_[step.inputs[i]]
               : nullptr;
  };
  auto set_sequence = [&](std::vector<Tensor> seq) { put_value(step.outputs.at(0), Value::sequence(std::move(seq))); };
  auto set_tensor = [&](size_t k, Tensor t) { put_value(step.outputs.at(k), Value::of(std::move(t))); };
  if (step.outputs.empty()) return invalid_argument(op + " has no output");
  if (op == "SequenceEmpty") {
    set_sequence({});
    return Status();
  }
  if (op == "SequenceConstruct") {
    std::vector<Tensor> seq;
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      LOOM_ASSIGN_OR_RETURN(const Tensor* t, tensor_value(step.inputs[i]));
      if (!seq.empty() && t->dtype() != seq.front().dtype()) {
        return invalid_argument("SequenceConstruct: input " + std::to_string(i) + " is " +
                                std::string(dtype_name(t->dtype())) + ", input 0 " +
                                std::string(dtype_name(seq.front().dtype())) + ": a sequence has one dtype");
      }
      seq.push_back(*t);
    }
    set_sequence(std::move(seq));
    return Status();
  }
  if (step.inputs.empty() || step.inputs[0] == kAbsentValue) return invalid_argument(op + " has no first input");
  if (op == "SplitToSequence") {
    LOOM_ASSIGN_OR_RETURN(const Tensor* x, tensor_value(step.inputs[0]));
    const int64_t rank = static_cast<int64_t>(x->shape().size());
    int64_t axis = staged::int_attribute(step, "axis", 0);
    if (axis < -rank || axis >= rank) {
      return invalid_argument("SplitToSequence: axis " + std::to_string(axis) + " is out of range for rank " +
                              std::to_string(rank));
    }
    const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    const int64_t length = x->shape()[a];
    std::vector<int64_t> sizes;
    const Tensor* split = input(1);
    const bool keep = staged::int_attribute(step, "keepdims", 1) != 0;
    if (split == nullptr) {
      sizes.assign(static_cast<size_t>(length), 1);
    } else if (split->dtype() != DType::kI64 && split->dtype() != DType::kI32) {
      return invalid_argument("SplitToSequence: split must be int32 or int64");
    } else if (split->shape().empty()) {
      LOOM_ASSIGN_OR_RETURN(int64_t chunk, staged::scalar_of(*split, "split"));
      if (chunk <= 0) return invalid_argument("SplitToSequence: split " + std::to_string(chunk) + " is not positive");
      for (int64_t at = 0; at < length; at += chunk) sizes.push_back(std::min(chunk, length - at));
    } else {
      int64_t sum = 0;
      for (uint64_t i = 0; i < split->element_count(); ++i) {
        const int64_t v = split->dtype() == DType::kI64 ? split->data_as<int64_t>()[i] : split->data_as<int32_t>()[i];
        if (v < 0) return invalid_argument("SplitToSequence: split has a negative size " + std::to_string(v));
        sizes.push_back(v);
        sum += v;
      }
      if (sum != length) {
        return invalid_argument("SplitToSequence: the sizes in split add up to " + std::to_string(sum) +
                                ", axis " + std::to_string(a) + " has " + std::to_string(length));
      }
    }
    std::vector<Tensor> seq;
    int64_t at = 0;
    for (int64_t size : sizes) {
      LOOM_ASSIGN_OR_RETURN(Tensor part, rows_of(*x, a, at, at + size));
      if (split == nullptr && !keep) {
        Shape squeezed = part.shape();
        squeezed.erase(squeezed.begin() + static_cast<std::ptrdiff_t>(a));
        LOOM_ASSIGN_OR_RETURN(part, Tensor::copy_of(part.dtype(), squeezed, part.bytes()));
      }
      seq.push_back(std::move(part));
      at += size;
    }
    set_sequence(std::move(seq));
    return Status();
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<Tensor> * seq, sequence_value(step.inputs[0]));
  if (op == "SequenceLength") {
    LOOM_ASSIGN_OR_RETURN(Tensor n, Tensor::zeros(DType::kI64, {}));
    *n.data_as<int64_t>() = static_cast<int64_t>(seq->size());
    set_tensor(0, std::move(n));
    return Status();
  }
  if (op == "SequenceAt") {
    const Tensor* position = input(1);
    if (position == nullptr) return invalid_argument("SequenceAt needs a position");
    LOOM_ASSIGN_OR_RETURN(size_t p, sequence_position(*position, seq->size(), false));
    set_tensor(0, (*seq)[p]);
    return Status();
  }
  if (op == "SequenceInsert") {
    const Tensor* t = input(1);
    if (t == nullptr) return invalid_argument("SequenceInsert needs a tensor to insert");
    if (!seq->empty() && t->dtype() != seq->front().dtype()) {
      return invalid_argument("SequenceInsert: the tensor is " + std::string(dtype_name(t->dtype())) +
                              ", the sequence holds " + std::string(dtype_name(seq->front().dtype())));
    }
    size_t p = seq->size();
    if (const Tensor* position = input(2)) {
      LOOM_ASSIGN_OR_RETURN(p, sequence_position(*position, seq->size(), true));
    }
    std::vector<Tensor> out = *seq;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(p), *t);
    set_sequence(std::move(out));
    return Status();
  }
  if (op == "SequenceErase") {
    if (seq->empty()) return out_of_range("SequenceErase of an empty sequence");
    size_t p = seq->size() - 1;
    if (const Tensor* position = input(1)) {
      LOOM_ASSIGN_OR_RETURN(p, sequence_position(*position, seq->size(), false));
    }
    std::vector<Tensor> out = *seq;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(p));
    set_sequence(std::move(out));
    return Status();
  }
  if (op == "ConcatFromSequence") {
    LOOM_ASSIGN_OR_RETURN(Tensor out, concat_along(*seq, staged::int_attribute(step, "axis", 0),
                                                   staged::int_attribute(step, "new_axis", 0) != 0));
    set_tensor(0, std::move(out));
    return Status();
  }
  return unimplemented("sequence operator '" + op + "' is not supported");
}

}  // namespace loom::runtime

namespace loom::runtime {

Status StagedSession::run_host_kernel(size_t s) {
  const StagedStep& step = staged_.steps[s];
  const kernels::KernelInfo* kernel = program_->kernels.find(step.kernel);
  if (kernel == nullptr) return unimplemented("no reference kernel for operator '" + step.kernel + "'");
  const kernels::Attributes attributes(step.attributes, step.opset);
  std::vector<kernels::TensorRef> in(step.inputs.size());
  std::vector<kernels::TensorType> types(step.inputs.size());
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (step.inputs[i] == kAbsentValue) continue;
    LOOM_ASSIGN_OR_RETURN(const Tensor* t, tensor_value(step.inputs[i]));
    in[i] = {t->dtype(), t->shape(), const_cast<void*>(t->data()), t->byte_size()};
    types[i] = {t->dtype(), t->shape(), &in[i]};
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<kernels::TensorType> out_types, kernel->infer(types, attributes));
  if (out_types.size() < step.outputs.size()) {
    return internal_error(step.kernel + " infers " + std::to_string(out_types.size()) + " outputs for " +
                          std::to_string(step.outputs.size()));
  }
  std::vector<kernels::TensorRef> out(step.outputs.size());
  for (size_t k = 0; k < step.outputs.size(); ++k) {
    const uint64_t limit = program_->max_tensor_bytes;
    auto count = element_count(out_types[k].shape);
    if (!count.ok() || *count * dtype_size(out_types[k].dtype) > limit) {
      return resource_exhausted("output " + std::to_string(k) + " would be " + shape_to_string(out_types[k].shape) +
                                ", over max_tensor_bytes (" + std::to_string(limit) + ")");
    }
    LOOM_ASSIGN_OR_RETURN(values_[step.outputs[k]], Tensor::zeros(out_types[k].dtype, out_types[k].shape));
    Tensor& t = values_[step.outputs[k]];
    is_sequence_[step.outputs[k]] = false;
    is_none_[step.outputs[k]] = false;
    out[k] = {t.dtype(), t.shape(), t.data(), t.byte_size()};
  }
  return kernel->run(in, out, attributes);
}

}  // namespace loom::runtime
