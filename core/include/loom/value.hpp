// A value a function takes or returns: a tensor, a sequence of tensors, or
// nothing (an empty optional). Most functions take and return tensors only
// (Session::set_input, Session::output); a staged function (control flow,
// docs/control-flow.md) may declare an argument a sequence or an optional
// (ArgumentInfo::kind), which Session::set_input_value and
// Session::output_value carry.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loom/tensor.hpp"

namespace loom {

struct Value {
  enum class Kind : uint8_t { kNone = 0, kTensor = 1, kSequence = 2 };

  Kind kind = Kind::kNone;
  Tensor tensor;                 // kTensor
  std::vector<Tensor> elements;  // kSequence (possibly none)

  static Value none() { return Value{}; }
  static Value of(Tensor t) {
    Value v;
    v.kind = Kind::kTensor;
    v.tensor = std::move(t);
    return v;
  }
  static Value sequence(std::vector<Tensor> elements) {
    Value v;
    v.kind = Kind::kSequence;
    v.elements = std::move(elements);
    return v;
  }

  bool is_none() const { return kind == Kind::kNone; }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_sequence() const { return kind == Kind::kSequence; }
};

// For messages: "a tensor (f32 [2, 3])", "a sequence of 3 tensors", "none".
std::string describe_value(const Value& value);

}  // namespace loom
