#include "container_test_support.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>

#include "common/hash.hpp"
#include "program_file/checksum.hpp"

namespace loom::testing {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::byte> pattern(size_t size, uint8_t seed) {
  std::vector<std::byte> out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>(seed + i * 7);
  return out;
}

namespace {

std::vector<std::byte> floats_bytes(std::initializer_list<float> values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

AttributeDef attribute(std::string name, AttributeKind kind) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = kind;
  return a;
}

}  // namespace

ProgramWriter make_full_program() {
  ProgramWriter w;
  ProgramDef& p = w.program();
  p.producer = "loom-container-test 1.0";
  p.metadata = {{"model", "mlp"}, {"empty-value", ""}};

  uint32_t cpu_blob = w.add_segment(bytes_of("cpu-simd blob v3"));
  uint32_t vk_blob = w.add_segment(pattern(300, 9), 64);
  std::vector<std::byte> weights = floats_bytes({1, 2, 3, 4, 5, 6, 0.5f, -0.25f, 8});
  uint32_t weight_segment = w.add_segment(weights, 256);
  uint32_t zeros = w.add_zero_segment(10000);

  ArtifactDef cpu;
  cpu.codegen_id = "partitioner/subgraph-0";
  cpu.loader_key = "cpu-simd";
  cpu.format_version = 3;
  cpu.file_name = "sub0.cpu";
  cpu.content_segment = static_cast<int32_t>(cpu_blob);
  cpu.metadata = {{"isa", "avx2"}, {"threads", "4"}};
  ArtifactDef vk;
  vk.loader_key = "vulkan-compute";
  vk.format_version = 1;
  vk.file_name = "sub0.spv";
  vk.content_segment = static_cast<int32_t>(vk_blob);
  ArtifactDef doc;
  doc.loader_key = "metadata";
  doc.file_name = "empty.json";
  p.artifacts = {cpu, vk, doc};

  DelegateDef d;
  d.name = "subgraph-0";
  d.variants = {1, 0};
  d.compile_specs = {{"opt-level", "3"}, {"fast-math", "on"}};
  DelegateDef no_specs;
  no_specs.name = "subgraph-1";
  no_specs.variants = {0};
  p.delegates = {d, no_specs};

  ParameterDef w0;
  w0.name = "fc.weight";
  w0.scope = "model";
  w0.dtype = DType::kF32;
  w0.shape = {2, 3};
  w0.segment = static_cast<int32_t>(weight_segment);
  w0.offset = 0;
  w0.size = 24;
  w0.checksum = xxh3_64(std::span(weights).first(24));
  ParameterDef b0;
  b0.name = "fc.bias";
  b0.dtype = DType::kF32;
  b0.shape = {3};
  b0.segment = static_cast<int32_t>(weight_segment);
  b0.offset = 24;
  b0.size = 12;
  ParameterDef zero_param;
  zero_param.name = "zeros";
  zero_param.dtype = DType::kI64;
  zero_param.shape = {10};
  zero_param.segment = static_cast<int32_t>(zeros);
  zero_param.offset = 4096;
  zero_param.size = 80;
  zero_param.checksum = container::zero_bytes_checksum(80);
  ParameterDef external;
  external.name = "embedding";
  external.scope = "shared";
  external.dtype = DType::kBF16;
  external.shape = {1000, 64};
  external.size = 128000;
  external.archive = "weights.irpa";
  p.parameters = {w0, b0, zero_param, external};

  FunctionDef f;
  f.name = "main";
  f.reflection = R"({"a":[["ndarray","f32",2,1,2]],"r":[["ndarray","f32",2,1,3]],"names":["x"]})";
  ValueDef x;
  x.name = "x";
  x.kind = ValueKind::kTensor;
  x.dtype = DType::kF32;
  x.shape = {1, 2};
  x.dim_order = {1, 0};
  ValueDef n;
  n.name = "n";
  n.kind = ValueKind::kScalarInt;
  n.dtype = DType::kI64;
  n.int_value = -7;
  ValueDef alpha;
  alpha.name = "alpha";
  alpha.kind = ValueKind::kScalarFloat;
  alpha.dtype = DType::kF64;
  alpha.float_value = 2.5;
  ValueDef axes;
  axes.name = "axes";
  axes.kind = ValueKind::kIntList;
  axes.dtype = DType::kI64;
  axes.ints = {1, -2, 3};
  ValueDef weight;
  weight.name = "fc.weight";
  weight.shape = {2, 3};
  weight.parameter = 0;
  ValueDef hidden;
  hidden.name = "hidden";
  hidden.dtype = DType::kF16;
  hidden.shape = {1, 3};
  ValueDef y;
  y.name = "y";
  y.shape = {1, 3};
  f.values = {x, n, alpha, axes, weight, hidden, y};
  f.inputs = {0, 1};
  f.outputs = {6};

  InstructionDef call;
  call.op = OpCode::kDelegateCall;
  call.delegate = 0;
  call.inputs = {0};
  call.outputs = {5};
  InstructionDef gemm;
  gemm.op = OpCode::kKernelCall;
  gemm.kernel = "Gemm";
  AttributeDef ai = attribute("transB", AttributeKind::kInt);
  ai.i = -3;
  AttributeDef af = attribute("alpha", AttributeKind::kFloat);
  af.f = 0.5f;
  AttributeDef ais = attribute("perm", AttributeKind::kInts);
  ais.ints = {0, 2, 1, -1};
  AttributeDef afs = attribute("scales", AttributeKind::kFloats);
  afs.floats = {1.5f, -2.0f};
  AttributeDef as = attribute("mode", AttributeKind::kString);
  as.s = "nearest";
  AttributeDef at = attribute("value", AttributeKind::kTensor);
  at.t_dtype = DType::kI64;
  at.t_shape = {1};
  at.t_data = std::vector<std::byte>(8, std::byte{7});
  AttributeDef ass = attribute("names", AttributeKind::kStrings);
  ass.strings = {"a", "", "bc"};
  gemm.attributes = {ai, af, ais, afs, as, at, ass};
  gemm.opset = 11;
  gemm.inputs = {5, 4, kAbsentValue};
  gemm.outputs = {6};
  InstructionDef mv;
  mv.op = OpCode::kMove;
  mv.inputs = {6};
  mv.outputs = {5};
  InstructionDef fr;
  fr.op = OpCode::kFree;
  fr.inputs = {5};
  f.instructions = {call, gemm, mv, fr};
  f.memory_plan.arena_size = 4096;
  f.memory_plan.alignment = 128;
  f.memory_plan.slots = {{5, 0, 6}, {6, 128, 12}};

  FunctionDef empty;
  empty.name = "nothing";
  p.functions = {f, empty};
  return w;
}

ProgramWriter make_small_program() {
  ProgramWriter w;
  ProgramDef& p = w.program();
  p.producer = "small";
  for (uint8_t i = 0; i < 3; ++i) {
    uint32_t segment = w.add_segment(pattern(100, static_cast<uint8_t>(i * 50)));
    ArtifactDef a;
    a.loader_key = "cpu-simd";
    a.file_name = "blob" + std::to_string(i);
    a.content_segment = static_cast<int32_t>(segment);
    p.artifacts.push_back(a);
  }
  DelegateDef d;
  d.name = "sub";
  d.variants = {0, 1};
  p.delegates = {d};
  ParameterDef w0;
  w0.name = "w";
  w0.shape = {5};
  w0.segment = 0;
  w0.offset = 16;
  w0.size = 20;
  p.parameters = {w0};
  FunctionDef f;
  f.name = "main";
  ValueDef in;
  in.name = "in";
  in.shape = {5};
  ValueDef out = in;
  out.name = "out";
  ValueDef c;
  c.name = "w";
  c.shape = {5};
  c.parameter = 0;
  f.values = {in, out, c};
  f.inputs = {0};
  f.outputs = {1};
  InstructionDef add;
  add.kernel = "Add";
  add.inputs = {0, 2};
  add.outputs = {1};
  f.instructions = {add};
  f.memory_plan.arena_size = 256;
  f.memory_plan.slots = {{1, 64, 20}};
  p.functions = {f};
  return w;
}

std::vector<std::byte> craft_unvalidated(const ProgramDef& program,
                                         const std::vector<std::vector<std::byte>>& segments) {
  std::vector<container::SegmentSource> sources;
  for (const auto& s : segments) {
    container::SegmentSource src;
    src.bytes = s;
    sources.push_back(src);
  }
  container::FileContents contents;
  contents.program = &program;
  contents.segments = sources;
  contents.validate = false;
  auto out = container::write_buffer(contents);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? std::move(out).value() : std::vector<std::byte>();
}

ProgramHead FileBytes::head() const {
  return container::decode_head(
      std::span<const std::byte, kProgramHeadSize>(bytes.data(), kProgramHeadSize));
}

size_t FileBytes::entry_at(size_t segment) const {
  return static_cast<size_t>(head().segment_table_offset) + segment * kSegmentTableEntrySize;
}

SegmentInfo FileBytes::segment(size_t index) const {
  return container::decode_segment_entry(std::span<const std::byte, kSegmentTableEntrySize>(
      bytes.data() + entry_at(index), kSegmentTableEntrySize));
}

void FileBytes::put_u16(size_t at, uint16_t v) { container::store_u16(bytes.data() + at, v); }
void FileBytes::put_u32(size_t at, uint32_t v) { container::store_u32(bytes.data() + at, v); }
void FileBytes::put_u64(size_t at, uint64_t v) { container::store_u64(bytes.data() + at, v); }

void FileBytes::reseal() {
  std::span<const std::byte, kProgramHeadSize> raw(bytes.data(), kProgramHeadSize);
  put_u64(container::kHeadChecksumAt, container::compute_head_checksum(raw));
}

::testing::AssertionResult fails_with(const Status& status, StatusCode code,
                                      std::string_view part) {
  if (status.ok()) return ::testing::AssertionFailure() << "unexpectedly succeeded";
  if (status.code() != code || status.message().find(part) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "got '" << status.to_string() << "', expected code " << status_code_name(code)
           << " and a message containing '" << part << "'";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult open_fails_with(std::span<const std::byte> bytes, StatusCode code,
                                           std::string_view part) {
  return fails_with(ProgramReader::open_buffer(bytes), code, part);
}

TempPath::TempPath(std::string_view name) {
  static std::atomic<int> counter{0};  // unique names within this process only
  path_ = std::filesystem::path(::testing::TempDir()) /
          ("loom-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
           std::string(name));
}

TempPath::~TempPath() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

bool supports_sparse_files() {
  TempPath probe("sparse-probe");
  int fd = ::open(probe.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  constexpr off_t kSize = off_t{64} << 20;
  bool ok = ::ftruncate(fd, kSize) == 0;
  struct stat st {};
  ok = ok && ::fstat(fd, &st) == 0 && static_cast<off_t>(st.st_blocks) * 512 < kSize / 2;
  ::close(fd);
  return ok;
}

}  // namespace loom::testing
