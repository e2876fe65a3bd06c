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

// A borrowed host tensor.
struct TensorRef {
  DType dtype = DType::kInvalid;
  std::span<const int64_t> shape;
  void* data = nullptr;
  size_t byte_size = 0;
};

// Read access to a node's attributes (ONNX names), with defaults.
class Attributes {
 public:
  Attributes() = default;
  explicit Attributes(std::span<const AttributeDef> attrs) : attrs_(attrs) {}
  const AttributeDef* find(std::string_view name) const;
  int64_t get_int(std::string_view name, int64_t fallback) const;
  float get_float(std::string_view name, float fallback) const;
  std::vector<int64_t> get_ints(std::string_view name) const;
  std::string_view get_string(std::string_view name, std::string_view fallback) const;

 private:
  std::span<const AttributeDef> attrs_;
};

using KernelFn = Status (*)(std::span<const TensorRef> inputs,
                            std::span<const TensorRef> outputs,
                            const Attributes& attributes);

// Infers output shapes and dtypes from input shapes and attributes; used by
// program builders and to validate a program at load time.
struct TensorType {
  DType dtype = DType::kInvalid;
  Shape shape;
};
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
