// The portable reference kernels: the fallback for nodes no plugin takes, and
// the oracle that plugin results are compared against.
//
// A kernel runs on host memory. Its outputs are allocated by the caller with
// the shapes the program states; the kernel checks that inputs and outputs
// agree with each other and with the operator's ONNX semantics and returns an
// error naming the operator, the operand and the mismatch otherwise.
// Kernels are stateless and thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/program.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::kernels {

// A borrowed host tensor. An optional operand that the node leaves out (an
// empty input name in ONNX) is a TensorRef with dtype kInvalid and no data;
// use present() to tell.
struct TensorRef {
  DType dtype = DType::kInvalid;
  std::span<const int64_t> shape;
  void* data = nullptr;
  size_t byte_size = 0;

  bool present() const { return dtype != DType::kInvalid; }
};

// Read access to a node's attributes (ONNX names), with defaults, and the
// ONNX opset the node was written for: kernels whose operator changed across
// opsets (an attribute that became an input, a new default) look at opset().
class Attributes {
 public:
  Attributes() = default;
  // `opset` 0 means the newest opset the kernel knows.
  explicit Attributes(std::span<const AttributeDef> attrs, int32_t opset = 0)
      : attrs_(attrs), opset_(opset) {}
  int32_t opset() const { return opset_; }
  // True when the node was written for an opset before `version` (and the
  // opset is known): `if (a.opset_before(13)) { old semantics }`.
  bool opset_before(int32_t version) const { return opset_ != 0 && opset_ < version; }
  const AttributeDef* find(std::string_view name) const;
  int64_t get_int(std::string_view name, int64_t fallback) const;
  float get_float(std::string_view name, float fallback) const;
  std::vector<int64_t> get_ints(std::string_view name) const;
  std::string_view get_string(std::string_view name, std::string_view fallback) const;
  std::vector<float> get_floats(std::string_view name) const;
  // A tensor attribute (kind kTensor) as a TensorRef viewing the attribute's
  // bytes; a TensorRef that is not present() when there is none.
  TensorRef get_tensor(std::string_view name) const;

 private:
  std::span<const AttributeDef> attrs_;
  int32_t opset_ = 0;
};

using KernelFn = Status (*)(std::span<const TensorRef> inputs,
                            std::span<const TensorRef> outputs,
                            const Attributes& attributes);

// Infers output shapes and dtypes from input shapes and attributes; used by
// the compiler's shape inference and to validate a program at load time.
//
// An operand whose contents are known (a constant: an initializer, a folded
// value, a parameter of the program) carries them in `value`; otherwise
// `value` is null. Operators whose output shape depends on an operand's
// contents (Reshape's shape, Slice's starts, Expand's shape, ...) read them
// there, and when the operand is not constant return needs_constant(), so
// the compiler can tell the user which model input must be given a value.
// An optional operand left out has dtype kInvalid.
struct TensorType {
  DType dtype = DType::kInvalid;
  Shape shape;
  const TensorRef* value = nullptr;  // borrowed for the call
};

// The error an infer function returns when the output shape depends on the
// contents of operand `index` (named `name` in the ONNX spec) and they are not
// known: code kFailedPrecondition, message "<op>: operand <index> ('<name>')
// must be a constant: its values decide the output shape".
Status needs_constant(std::string_view op, size_t index, std::string_view name);
using InferFn = Result<std::vector<TensorType>> (*)(std::span<const TensorType> inputs,
                                                    const Attributes& attributes);

struct KernelInfo {
  std::string_view op;  // ONNX operator name
  KernelFn run = nullptr;
  InferFn infer = nullptr;
};

// The table of reference kernels. Built explicitly (no static registration);
// cheap to construct; immutable and thread-safe afterwards.
class KernelRegistry {
 public:
  // Every reference kernel of the core.
  static KernelRegistry reference();

  // nullptr when no kernel implements `op`.
  const KernelInfo* find(std::string_view op) const;
  // Names of every operator, sorted.
  std::vector<std::string_view> ops() const;

  void add(KernelInfo info);

 private:
  std::vector<KernelInfo> kernels_;
};

}  // namespace loom::kernels
