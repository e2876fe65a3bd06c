// The fpga-stub "bitstream": what compile writes and executable_load reads.
// A versioned, checksummed container of a small operator graph whose tensors
// live in three places on the device: I/O buffers bound at execute, the
// weights region (constants, copied to the device at load) and the
// activation region (intermediates). The byte layout is in README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/plugin.hpp"

namespace loom::fpga_stub {

using sdk::Status;

inline constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'F', 'P', 'G', 'A'};
// Format 1: static shapes only. Format 2 (open-shape executables, ABI 1.2)
// adds open dimensions: -1 in the shape of an I/O or activation tensor,
// whose recorded byte size and offset are then 0 (the sizes and the
// activation layout of such tensors are computed per binding, bind.hpp).
// encode writes format 1 whenever no tensor is open, so static bitstreams
// stay readable by older devices; decode reads both.
inline constexpr uint32_t kStaticFormatVersion = 1;
inline constexpr uint32_t kOpenFormatVersion = 2;
inline constexpr uint32_t kMinFormatVersion = kStaticFormatVersion;
inline constexpr uint32_t kFormatVersion = kOpenFormatVersion;
inline constexpr size_t kHeaderSize = 64;
inline constexpr const char* kLoaderKey = "fpga-stub";
// Bounds on what a blob may declare, so decoding does bounded work.
inline constexpr uint32_t kMaxTensors = 1u << 20;
inline constexpr uint32_t kMaxNodes = 1u << 20;
inline constexpr uint32_t kMaxNodeInputs = 16;
inline constexpr uint32_t kMaxParams = 16;
inline constexpr uint64_t kMaxElements = uint64_t{1} << 40;

enum class Op : uint16_t {
  kConv = 1, kMatMul, kGemm, kAdd, kMul, kRelu, kClip, kMaxPool, kAveragePool,
  kGlobalAveragePool, kConcat, kReshape, kFlatten, kQLinearConv, kQLinearMatMul,
  kMatMulInteger, kConvInteger, kQuantizeLinear, kDequantizeLinear,
  kLast = kDequantizeLinear,
};
const char* op_name(Op op);

enum class Storage : uint8_t { kIo = 0, kConst = 1, kScratch = 2 };

struct BsTensor {
  loom_dtype_t dtype = LOOM_DTYPE_F32;
  Storage storage = Storage::kIo;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // kConst: into the weights; kScratch: into the activations
  uint64_t bytes = 0;   // elements * element size
};

// Conv-like and pool nodes keep their window in `params`:
//   [group, kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right,
//    count_include_pad (pools), ceil_mode (pools)]
// Gemm: [transA, transB, alpha bits, beta bits]; Clip: [min bits, max bits];
// Concat / QuantizeLinear / DequantizeLinear: [axis]. Float parameters are
// stored as the bit pattern of an f32.
enum WindowParam { kGroup, kKh, kKw, kSh, kSw, kDh, kDw, kPadT, kPadL, kPadB, kPadR,
                   kCountIncludePad, kCeilMode, kWindowParams };

struct BsNode {
  Op op = Op::kRelu;
  std::vector<int32_t> inputs;  // tensor indices; -1 = optional operand absent
  int32_t output = 0;
  std::vector<int64_t> params;
};

struct Bitstream {
  std::vector<BsTensor> tensors;
  std::vector<BsNode> nodes;
  std::vector<uint32_t> inputs;   // kIo tensors, in execute order
  std::vector<uint32_t> outputs;  // kIo tensors, in execute order
  std::vector<std::byte> weights;
  uint64_t activation_bytes = 0;

  // Device memory the program needs besides its I/O buffers (for an open
  // bitstream: besides its I/O buffers and its open activations).
  uint64_t footprint() const { return weights.size() + activation_bytes; }
  // True when some tensor has an open dimension (format 2).
  bool has_open_dims() const;
  // The format encode writes for this bitstream.
  uint32_t format_version() const { return has_open_dims() ? kOpenFormatVersion : kStaticFormatVersion; }
};

// True when `shape` has an open (-1) dimension.
bool is_open(const std::vector<int64_t>& shape);

size_t dtype_size(loom_dtype_t dtype);  // 0 for dtypes the device lacks
const char* dtype_label(loom_dtype_t dtype);
std::string shape_label(const std::vector<int64_t>& shape);
uint64_t element_count(const std::vector<int64_t>& shape);

// Everything decode checks beyond the byte layout: indices, storage ranges,
// I/O lists, producers before consumers, and check_node (node_check.hpp)
// for every node. Open dimensions (-1) are allowed in I/O and activation
// tensors only; a node that touches an open tensor is checked when a
// binding makes its shapes concrete (bind_shapes), not here.
Status validate(const Bitstream& bs);

std::vector<std::byte> encode(const Bitstream& bs);
// Parses and validates a blob. INCOMPATIBLE naming the first problem (and its
// byte offset where there is one).
Status decode(const void* data, size_t size, Bitstream* out);

}  // namespace loom::fpga_stub
