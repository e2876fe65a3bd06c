// The parts of `loom test-onnx` that need no compiler: finding ONNX backend
// test cases, reading their .pb tensors, comparing results, the list of known
// failures, the rule for UNSUPPORTED cases and the report.
//
// A test case is a folder holding model.onnx and test_data_set_<N>/ folders,
// each with input_<K>.pb and output_<K>.pb (serialized onnx::TensorProto),
// the layout of ONNX's backend tests (libonnx-testdata).
//
// Library: loom_onnx_conformance (links loom_onnx, never the runtime or the
// compiler), so that all of this is unit-tested on its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"
#include "loom/runtime.hpp"  // NamedTensor
#include "loom/tensor.hpp"

namespace loom::conformance {

namespace fs = std::filesystem;

struct TestCase {
  std::string name;              // the folder's name, e.g. "test_abs"
  fs::path dir;
  std::vector<fs::path> data_sets;  // test_data_set_<N>, by N
};

// Each root is one case (it holds model.onnx) or a folder of cases (its
// subfolders that hold model.onnx, sorted by name). `filter`, when not empty,
// keeps the cases whose name contains it. A root that is neither, or a case
// without a data set, is an error naming the folder.
Result<std::vector<TestCase>> discover_cases(std::span<const fs::path> roots,
                                             std::string_view filter = {});

// Reads a whole regular file of at most `max_bytes` (larger ones are
// refused before anything is allocated). Errors name the file.
Result<std::vector<std::byte>> read_bounded(const fs::path& file, uint64_t max_bytes);

// Reads one serialized onnx::TensorProto (bounded: larger files are refused
// before anything is allocated for them). Errors name the file.
Result<NamedTensor> read_tensor_pb(const fs::path& file, uint64_t max_bytes = uint64_t{1} << 30);
// The same from bytes; `what` names the source in errors.
Result<NamedTensor> parse_tensor_pb(std::span<const std::byte> bytes, std::string_view what);

// One serialized onnx::SequenceProto (of tensors) or onnx::OptionalProto
// (empty, or holding a tensor or a sequence of tensors), as a Value and its
// name; `optional` says which. Errors name `what`.
Result<std::pair<std::string, Value>> parse_value_pb(std::span<const std::byte> bytes, bool optional,
                                                     std::string_view what);

struct DataSet {
  std::vector<NamedTensor> inputs;   // named, in input_<K> order
  std::vector<NamedTensor> outputs;  // named, in output_<K> order
  // The inputs and outputs that are sequences or optionals (ModelSummary::
  // values): their files hold a SequenceProto or an OptionalProto.
  std::vector<std::pair<std::string, Value>> input_values;
  std::vector<std::pair<std::string, Value>> output_values;
};

// Reads input_0.pb, input_1.pb, ... and output_0.pb, ... of `dir` (numbering
// must be contiguous). A tensor without a name takes the model's input or
// output name at its position; one the model lacks is an error. The file at
// the position of a name in `values` (a sequence or optional, as `summary`
// says) is read with parse_value_pb.
struct ValueArgument {
  std::string name;
  bool optional = false;  // an OptionalProto; else a SequenceProto
};
Result<DataSet> read_data_set(const fs::path& dir, std::span<const std::string> input_names,
                              std::span<const std::string> output_names,
                              std::span<const ValueArgument> values = {});

// What a model declares: its graph inputs that are not initializers, its
// outputs, and the op types of its nodes (default domain as "Relu", others
// as "domain:Op"; nested graphs included), sorted and unique.
struct ModelSummary {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> op_types;
  // The first input or output that is neither a tensor, a sequence of
  // tensors nor an optional tensor or sequence (a map, which Loom lacks), as
  // "input 'x' is a map"; empty if none.
  std::string non_tensor;
  // The inputs and outputs that are sequences or optionals.
  std::vector<ValueArgument> values;
  // Set when the model imports an opset of the default domain outside the
  // 1-21 that Loom supports (the importer refuses it): the op-list rule
  // does not apply to such a case.
  std::string out_of_scope;
};
Result<ModelSummary> summarize_model(const fs::path& model);

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// How far a result is from the expected tensor (the measure behind
// compare_tensors, for tools that report how close each value came).
struct TensorDifference {
  // Set when dtypes or shapes differ ("shape [2], expected [3]"); nothing
  // else is then measured.
  std::string mismatch;
  uint64_t elements = 0;
  uint64_t outside = 0;     // elements outside the tolerance
  double max_abs_diff = 0;  // largest |got - expected| (inf for a NaN or infinity mismatch)
  uint64_t worst = 0;       // the element furthest outside the tolerance (when outside > 0)
  bool within() const { return mismatch.empty() && outside == 0; }
};
TensorDifference measure_difference(const Tensor& got, const Tensor& expected,
                                    const Tolerance& tolerance = {});
// "element [0, 3]: got 0.5, expected 0.4375 (12 of 16 elements differ)", the
// mismatch, or "within tolerance".
std::string describe_difference(const TensorDifference& difference, const Tensor& got,
                                const Tensor& expected);

// Compares a result with the expected tensor: dtypes and shapes must match;
// floating types within |got - expected| <= atol + rtol * |expected| (NaN
// equals NaN, infinities must match exactly); integers and bools exactly.
// The error names the output, the worst element by index, both values and
// how many elements differ.
Status compare_tensors(std::string_view output, const Tensor& got, const Tensor& expected,
                       const Tolerance& tolerance = {});
// The same for any value: the kinds must match (none, a tensor, a sequence
// of as many tensors), then each element as compare_tensors ("y[2]").
Status compare_values(std::string_view output, const Value& got, const Value& expected,
                      const Tolerance& tolerance = {});

// The operators every Loom build must run (sorted): the op list of the
// reference kernels' original scope. A case that uses only these may not
// be UNSUPPORTED; the tool counts it as a failure unless it is a known one.
std::span<const std::string_view> required_ops();
bool is_required_op(std::string_view op_type);
// The op types of `op_types` outside that list (in order).
std::vector<std::string> ops_outside_required(std::span<const std::string> op_types);

// tests/onnx/known_failures.txt: one case a line,
//   <case folder name> <reference|cpu-simd|*> <reason...>
// '#' starts a comment; blank lines are ignored. A line without a reason, a
// duplicate (case, device) pair or a device other than those is an error
// naming the file and line.
struct KnownFailure {
  std::string name;
  std::string device;  // "reference", a plugin name, or "*"
  std::string reason;
  int line = 0;
};

class KnownFailures {
 public:
  static Result<KnownFailures> parse(std::string_view text, std::string_view source);
  static Result<KnownFailures> load(const fs::path& file);

  // The entry for `name` on `device` ("reference" or a plugin name); null if
  // none. An entry for "*" matches every device.
  const KnownFailure* find(std::string_view name, std::string_view device) const;
  const std::vector<KnownFailure>& entries() const { return entries_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<KnownFailure> entries_;
  std::string source_;
};

// The device a known-failure entry names for a --device URI: the plugin's
// name, which is the URI's scheme ("cpu-simd://0" -> "cpu-simd"), or
// "reference" without a URI.
std::string device_key(std::string_view device_uri);

enum class Outcome { kPass, kFail, kUnsupported, kError };
std::string_view outcome_name(Outcome outcome);  // "PASS", "FAIL", ...

struct CaseResult {
  std::string name;
  fs::path dir;
  Outcome outcome = Outcome::kError;
  std::string message;  // why it did not pass; for a PASS, a note (often empty)
  double ms = 0;
  std::vector<std::string> op_types;  // from summarize_model; may be empty
  // With a device: where the nodes ran ("2 nodes on the device, 0 on
  // reference kernels"), so that a plugin claiming nothing shows.
  std::string placement;
  // Filled by classify(): the known-failure entry's reason when the case is
  // one, and a note on why the outcome was changed.
  bool known_failure = false;
  std::string known_reason;
};

// Applies the rules: an UNSUPPORTED case whose ops are all required ones
// becomes a FAIL; a FAIL or ERROR listed as a known failure on `device` is
// marked known_failure. Returns the problems that make the run fail besides
// unexpected failures: a listed case that passed ("known failure 'x' passed:
// remove it from FILE").
std::vector<std::string> classify(std::vector<CaseResult>& results, const KnownFailures* known,
                                  std::string_view device);

// "PASS name", "FAIL name: message", ... (a PASS with a note: "PASS name:
// note") with " [known failure: reason]" and " [placement]" when there is
// one.
std::string format_case(const CaseResult& result);

struct Totals {
  size_t cases = 0, passed = 0, failed = 0, unsupported = 0, errors = 0, known = 0;
};
Totals count(std::span<const CaseResult> results);
// "test-onnx: N cases: P passed, F failed, U unsupported, E errors,
//  K known failures (device D)" with D the URI or "reference".
std::string format_totals(const Totals& totals, std::string_view device);

// The --report JSON: {"device", "totals": {...}, "cases": [{name, dir,
// status, message, ms, known_failure, known_reason, placement}],
// "problems": [...]}.
std::string report_json(std::span<const CaseResult> results, std::string_view device,
                        std::span<const std::string> problems);

}  // namespace loom::conformance
