// tiny-accel's program: what its compiler makes of a graph and what its
// blob holds. A program is a list of float32 tensors (inputs, constants and
// values) and a list of ops reading and writing them, in execution order.
//
// The blob is the SDK's versioned container (loom/sdk/blob.hpp: magic,
// format version, payload size, checksum) around this payload, all
// little-endian:
//   u32 tensor_count, then per tensor:
//     u8 kind (0 input, 1 constant, 2 value), u32 rank, i64 dims[rank],
//     and for a constant: f32 values[element count]
//   u32 input_count,  u32 tensor ids   (execute inputs, in order)
//   u32 output_count, u32 tensor ids   (execute outputs, in order)
//   u32 op_count, then per op: u8 opcode, u32 a, u32 b, u32 out
//     (b is kNoTensor for Relu)
// Format 1 is the only one so far; a change to the payload gets a new
// version, and the plugin lists the range it reads in its loader key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/plugin.hpp"

namespace tiny_accel {

using loom::sdk::Status;

inline constexpr char kLoaderKey[] = "tiny-accel";
inline constexpr char kMagic[] = "TINYACC1";  // 8 characters: the blob's magic
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kNoTensor = UINT32_MAX;
// Bounds that keep a hostile blob from asking for unbounded work or memory.
inline constexpr uint32_t kMaxRank = 8;
inline constexpr uint64_t kMaxElements = uint64_t{1} << 26;  // per tensor: 256 MiB of f32

enum class Kind : uint8_t { kInput = 0, kConstant = 1, kValue = 2 };
enum class OpCode : uint8_t { kAdd = 1, kMul = 2, kRelu = 3, kMatMul = 4 };

struct Tensor {
  Kind kind = Kind::kValue;
  std::vector<int64_t> dims;
  std::vector<float> data;  // constants only

  uint64_t elements() const {
    uint64_t n = 1;
    for (int64_t d : dims) n *= static_cast<uint64_t>(d);
    return n;
  }
};

struct Op {
  OpCode code = OpCode::kAdd;
  uint32_t a = kNoTensor, b = kNoTensor, out = kNoTensor;
};

struct Program {
  std::vector<Tensor> tensors;
  std::vector<uint32_t> inputs, outputs;
  std::vector<Op> ops;
};

// The shape numpy-style broadcasting gives `a` and `b` (Add, Mul); false
// when they do not broadcast.
bool broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>* out);

// Checks everything execute relies on: ids in range, ranks and sizes within
// bounds, each op's shapes, every value written once before it is read, and
// every output written. INCOMPATIBLE naming the first problem.
Status validate(const Program& p);

// The blob (header + payload) of a program.
std::vector<uint8_t> encode(const Program& p);

// Reads and validates a blob: the SDK header first (magic, version,
// checksum), then the payload, then validate().
Status decode(const loom::sdk::Blob& blob, Program* out);

// Runs `p` on float32 buffers: `inputs[i]` holds p.inputs[i]'s elements,
// `outputs[i]` receives p.outputs[i]'s. Thread-safe: scratch is per call.
void run(const Program& p, const float* const* inputs, float* const* outputs);

}  // namespace tiny_accel
