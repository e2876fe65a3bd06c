// The program container (.loom): an in-memory model of its metadata, a writer
// and a verifying reader.
//
// File layout (all integers little-endian):
//   [head, 128 bytes][flatbuffer (schemas/program.fbs)][segment table]
//   [segments, each aligned, page-aligned by default]
// The head says where the flatbuffer and the segment table are; each segment
// table entry gives a segment's 64-bit offset, size, alignment and xxh3-64
// checksum. The generated flatbuffer code is private to the core: this header
// exposes the decoded model (ProgramDef) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom {

inline constexpr uint16_t kProgramMajorVersion = 1;
inline constexpr uint16_t kProgramMinorVersion = 6;
inline constexpr uint32_t kProgramHeadSize = 128;
inline constexpr uint32_t kSegmentTableEntrySize = 32;
inline constexpr uint32_t kDefaultSegmentAlignment = 4096;
// Required feature bit: some kernel call records the ONNX opset of its
// operator (Instruction.opset, format 1.1). A 1.0 reader would ignore the
// field and run the newest semantics, which differ for some operators
// (Softmax before 13, ...), so such files must be refused by it. The writer
// sets the bit by itself when an instruction has a non-zero opset.
inline constexpr uint64_t kRequiredFeatureKernelOpsets = uint64_t{1} << 0;
// Required feature bit: some function is open-shape (FunctionDef::
// graph_artifact, format 1.3): it has no memory plan of its own and runs
// only where the runtime specializes its graph per binding. The writer sets
// it by itself.
inline constexpr uint64_t kRequiredFeatureOpenShapes = uint64_t{1} << 1;
// Required feature bit: some open-shape function has instructions of its
// own (format 1.4, a native open-shape program): values with open
// dimensions, delegate calls on blobs that take each run's shapes (plugin
// ABI 1.2), no memory plan; the runtime binds the shapes per run from the
// graph artifact. A 1.3 reader refuses an open function with instructions,
// so the writer sets this bit by itself.
inline constexpr uint64_t kRequiredFeatureOpenExecutables = uint64_t{1} << 2;
// Required feature bits this reader understands. A file that sets any other
// required bit is rejected; unknown optional bits are ignored.
// Required feature bit: some function is staged (format 1.5,
// docs/control-flow.md): it calls other functions of the program and runs
// control flow (If, Loop, Scan) on the host, with values whose shapes are
// known only when they are computed. A 1.4 reader refuses the new opcodes,
// so the writer sets this bit by itself.
inline constexpr uint64_t kRequiredFeatureStaged = uint64_t{1} << 3;
inline constexpr uint64_t kKnownRequiredFeatures = kRequiredFeatureKernelOpsets | kRequiredFeatureOpenShapes |
                                                   kRequiredFeatureOpenExecutables | kRequiredFeatureStaged;
// The loader key of an open-shape function's graph artifact: graph.fbs bytes
// (schemas/graph.fbs) of the whole function before shapes are bound.
inline constexpr std::string_view kGraphLoaderKey = "loom.graph";

struct KeyValue {
  std::string key;
  std::string value;

  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

struct ArtifactDef {
  std::string codegen_id;
  std::string loader_key;
  uint32_t format_version = 0;
  std::string file_name;
  int32_t content_segment = -1;  // -1: no content
  std::vector<KeyValue> metadata;

  friend bool operator==(const ArtifactDef&, const ArtifactDef&) = default;
};

struct DelegateDef {
  std::string name;
  std::vector<uint32_t> variants;  // artifact indices, preferred first
  std::vector<KeyValue> compile_specs;

  friend bool operator==(const DelegateDef&, const DelegateDef&) = default;
};

// kSequence, kOptionalTensor and kOptionalSequence (format 1.6) appear only
// in staged functions: a sequence of tensors, and an optional value (empty,
// or holding a tensor or a sequence). Their `dtype` is the elements'
// (kInvalid: any).
enum class ValueKind : uint8_t {
  kTensor = 0,
  kScalarInt = 1,
  kScalarFloat = 2,
  kIntList = 3,
  kSequence = 4,
  kOptionalTensor = 5,
  kOptionalSequence = 6,
};

// "tensor", "sequence", "optional tensor", "optional sequence", ...
const char* value_kind_name(ValueKind kind);

struct ValueDef {
  std::string name;
  ValueKind kind = ValueKind::kTensor;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<uint8_t> dim_order;  // empty: row-major
  int64_t int_value = 0;
  double float_value = 0;
  std::vector<int64_t> ints;
  int32_t parameter = -1;  // index into ProgramDef::parameters, -1: none
  // Open-shape functions (FunctionDef::graph_artifact): a -1 in `shape` is an
  // open dimension. Each of these is empty or has one entry per dimension:
  // the dimension's symbol ("" = fixed or anonymous; inputs that share a
  // symbol must agree), and the bounds of its size (0 = unbounded).
  std::vector<std::string> dim_symbols;
  std::vector<int64_t> dim_min;
  std::vector<int64_t> dim_max;
  // A staged function's value whose rank is known only at run time (format
  // 1.5): `shape` is empty and means nothing.
  bool unranked = false;

  friend bool operator==(const ValueDef&, const ValueDef&) = default;
};

// kCall and kControl (format 1.5) appear only in staged functions
// (docs/control-flow.md): a call of another function of the program, and a
// control-flow operator (If, Loop, Scan) that the runtime runs on the host.
enum class OpCode : uint8_t { kDelegateCall = 0, kKernelCall = 1, kMove = 2, kFree = 3, kCall = 4, kControl = 5 };
enum class AttributeKind : uint8_t {
  kInt = 0,
  kFloat = 1,
  kInts = 2,
  kFloats = 3,
  kString = 4,
  kTensor = 5,   // t_dtype, t_shape, t_data
  kStrings = 6,
};

// An instruction operand index that marks an optional operand left out.
inline constexpr uint32_t kAbsentValue = 0xFFFFFFFFu;

struct AttributeDef {
  std::string name;
  AttributeKind kind = AttributeKind::kInt;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
  DType t_dtype = DType::kInvalid;  // kTensor: a small tensor, row-major bytes
  Shape t_shape;
  std::vector<std::byte> t_data;
  std::vector<std::string> strings;  // kStrings

  friend bool operator==(const AttributeDef&, const AttributeDef&) = default;
};

struct InstructionDef {
  OpCode op = OpCode::kKernelCall;
  int32_t delegate = -1;  // kDelegateCall: index into ProgramDef::delegates
  std::string kernel;     // kKernelCall: operator name
  std::vector<AttributeDef> attributes;
  std::vector<uint32_t> inputs;   // value indices; kAbsentValue: optional operand left out
  std::vector<uint32_t> outputs;  // value indices
  int32_t opset = 0;              // kKernelCall: ONNX opset of the operator; 0 = newest
  // kCall: the callee (one index into ProgramDef::functions). kControl: the
  // bodies (If: then, else; Loop and Scan: body), whose inputs are the
  // operator's own body inputs followed by the last `captures` inputs of
  // this instruction (outer-scope values).
  std::vector<uint32_t> functions;
  uint32_t captures = 0;

  friend bool operator==(const InstructionDef&, const InstructionDef&) = default;
};

struct MemorySlotDef {
  uint32_t value = 0;
  uint64_t offset = 0;
  uint64_t size = 0;

  friend bool operator==(const MemorySlotDef&, const MemorySlotDef&) = default;
};

struct MemoryPlanDef {
  uint64_t arena_size = 0;
  uint32_t alignment = 64;
  std::vector<MemorySlotDef> slots;

  friend bool operator==(const MemoryPlanDef&, const MemoryPlanDef&) = default;
};

struct FunctionDef {
  std::string name;
  std::vector<uint32_t> inputs;   // value indices
  std::vector<uint32_t> outputs;  // value indices
  std::string reflection;         // IREE-style ABI JSON
  std::vector<ValueDef> values;
  std::vector<InstructionDef> instructions;
  MemoryPlanDef memory_plan;
  // An open-shape function: the artifact (kGraphLoaderKey) with its graph,
  // bound by the runtime per binding; memory_plan is then empty, and so are
  // instructions unless it was compiled once for every binding (format 1.4,
  // kRequiredFeatureOpenExecutables). -1: an ordinary function.
  int32_t graph_artifact = -1;
  // A staged function (format 1.5, kRequiredFeatureStaged): the runtime runs
  // its instructions one by one on the host (calls, control flow, sequence
  // operators), sizing each value when it is computed; no memory plan.
  bool staged = false;

  friend bool operator==(const FunctionDef&, const FunctionDef&) = default;
};

// A named constant, either inline (bytes in segment `segment` at `offset`) or
// external (entry `name` of scope `scope` in the .irpa archive `archive`,
// a path relative to the program's folder without '..'; segment -1, offset
// 0, and `size` equal to dtype x shape, the bytes the loader expects).
struct ParameterDef {
  std::string name;
  std::string scope;     // external: the archive's scope (may be empty)
  DType dtype = DType::kF32;
  Shape shape;
  int32_t segment = -1;  // inline: segment index
  uint64_t offset = 0;   // inline: offset inside the segment
  uint64_t size = 0;     // bytes
  uint64_t checksum = 0; // xxh3-64 of the bytes, 0: not recorded
  std::string archive;   // external archive (relative path), empty: inline

  friend bool operator==(const ParameterDef&, const ParameterDef&) = default;
};

struct ProgramDef {
  std::string producer;
  std::vector<ArtifactDef> artifacts;
  std::vector<DelegateDef> delegates;
  std::vector<FunctionDef> functions;
  std::vector<ParameterDef> parameters;
  std::vector<KeyValue> metadata;

  friend bool operator==(const ProgramDef&, const ProgramDef&) = default;
};

// The fixed head as read from a file.
struct ProgramHead {
  uint16_t major = 0;
  uint16_t minor = 0;
  uint32_t head_size = 0;
  uint64_t required_features = 0;
  uint64_t optional_features = 0;
  uint64_t flatbuffer_offset = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t segment_table_offset = 0;
  uint64_t segment_count = 0;
  uint64_t file_size = 0;

  friend bool operator==(const ProgramHead&, const ProgramHead&) = default;
};

struct SegmentInfo {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;  // xxh3-64 of the segment's bytes
  uint32_t alignment = 0;
  uint32_t flags = 0;

  friend bool operator==(const SegmentInfo&, const SegmentInfo&) = default;
};

// Builds a program file. Not thread-safe.
class ProgramWriter {
 public:
  ProgramWriter();
  ~ProgramWriter();
  ProgramWriter(ProgramWriter&&) noexcept;
  ProgramWriter& operator=(ProgramWriter&&) noexcept;

  // The metadata to write; fill it in before write_*.
  ProgramDef& program() { return program_; }

  // Adds a segment holding a copy of `bytes`; returns its index. `alignment`
  // is a power of two, 0 meaning kDefaultSegmentAlignment.
  uint32_t add_segment(std::span<const std::byte> bytes, uint32_t alignment = 0);
  // Adds a segment of `size` zero bytes that is written as a hole (sparse).
  uint32_t add_zero_segment(uint64_t size, uint32_t alignment = 0);

  // Sets optional/required feature bits (for tests and future features).
  void set_features(uint64_t required, uint64_t optional);

  // Validates the model (indices in range, ...) and writes the file.
  Status write_file(const std::filesystem::path& path) const;
  // The same, into memory (segments of add_zero_segment are materialized).
  Result<std::vector<std::byte>> write_buffer() const;

 private:
  struct Segment;
  ProgramDef program_;
  std::vector<Segment> segments_;
  uint64_t required_features_ = 0;
  uint64_t optional_features_ = 0;
};

// Reads and verifies a program file. Verification is always on and bounded
// by the file's size: the head, the flatbuffer (with the flatbuffers
// Verifier), every offset, size and index (overflow-safe), and every
// segment's checksum. Once open, the reader is immutable and thread-safe.
class ProgramReader {
 public:
  // Maps the file read-only (no copy of segment bytes).
  static Result<std::unique_ptr<ProgramReader>> open_file(
      const std::filesystem::path& path);
  // Reads from a caller buffer, which must outlive the reader.
  static Result<std::unique_ptr<ProgramReader>> open_buffer(
      std::span<const std::byte> bytes);

  ~ProgramReader();

  const ProgramHead& head() const { return head_; }
  const ProgramDef& program() const { return program_; }
  const std::vector<SegmentInfo>& segments() const { return segments_; }
  // The bytes of segment `index` (checked when the file was opened).
  Result<std::span<const std::byte>> segment_bytes(uint32_t index) const;
  // The content of artifact `index` (empty when it has none).
  Result<std::span<const std::byte>> artifact_content(uint32_t index) const;
  // The bytes of an inline parameter.
  Result<std::span<const std::byte>> parameter_bytes(uint32_t index) const;
  // All bytes of the file.
  std::span<const std::byte> file_bytes() const { return bytes_; }

 private:
  ProgramReader() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;  // null for caller buffers
  std::span<const std::byte> bytes_;
  ProgramHead head_;
  ProgramDef program_;
  std::vector<SegmentInfo> segments_;

  friend class ProgramReaderBuilder;
};

}  // namespace loom
