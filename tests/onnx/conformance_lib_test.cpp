// The compiler-free half of `loom test-onnx` (tools/loom/onnx_conformance).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "onnx/onnx_pb.h"
#include "onnx/onnx-data.pb.h"
#include "loom/conformance/baseline.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "onnx_fixtures.hpp"

namespace loom::conformance {
namespace {

namespace fx = loom::testing::onnx_fixtures;
using TP = ::onnx::TensorProto;

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("loom-conformance-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_pb(const fs::path& path, const TP& t) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << t.SerializeAsString();
  }
  // A case with a one-node model (x -> Relu -> y) and `sets` data sets.
  fs::path make_case(const fs::path& parent, const std::string& name, int sets = 1) {
    fs::path dir = parent / name;
    fs::create_directories(dir);
    ::onnx::ModelProto m = fx::empty_model();
    auto* g = m.mutable_graph();
    g->add_input()->set_name("x");
    g->add_output()->set_name("y");
    auto* n = g->add_node();
    n->set_op_type("Relu");
    n->add_input("x");
    n->add_output("y");
    EXPECT_TRUE(fx::write_model(m, dir / "model.onnx").ok());
    for (int s = 0; s < sets; ++s) {
      fs::path set = dir / ("test_data_set_" + std::to_string(s));
      write_pb(set / "input_0.pb", f32_tensor("", {2}, {-1, 2}));
      write_pb(set / "output_0.pb", f32_tensor("", {2}, {0, 2}));
    }
    return dir;
  }
  static TP f32_tensor(const std::string& name, std::vector<int64_t> dims,
                       std::vector<float> values) {
    TP t;
    t.set_name(name);
    t.set_data_type(TP::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    for (float v : values) t.add_float_data(v);
    return t;
  }
  fs::path dir_;
};

Tensor f32(Shape shape, std::vector<float> v) {
  return Tensor::copy_of(DType::kF32, std::move(shape), std::as_bytes(std::span(v))).value();
}
Tensor i64(Shape shape, std::vector<int64_t> v) {
  return Tensor::copy_of(DType::kI64, std::move(shape), std::as_bytes(std::span(v))).value();
}

TEST_F(Scratch, DiscoversOneCaseOrAFolderSorted) {
  make_case(dir_, "test_b", 2);
  make_case(dir_, "test_a");
  fs::create_directories(dir_ / "not_a_case");
  std::vector<fs::path> roots = {dir_};
  auto cases = discover_cases(roots);
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  ASSERT_EQ(cases->size(), 2u);
  EXPECT_EQ((*cases)[0].name, "test_a");
  EXPECT_EQ((*cases)[1].name, "test_b");
  EXPECT_EQ((*cases)[1].data_sets.size(), 2u);

  std::vector<fs::path> one = {dir_ / "test_b"};
  auto single = discover_cases(one);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->size(), 1u);

  auto filtered = discover_cases(roots, "_b");
  ASSERT_TRUE(filtered.ok());
  ASSERT_EQ(filtered->size(), 1u);
  EXPECT_EQ((*filtered)[0].name, "test_b");
}

TEST_F(Scratch, DiscoveryErrorsNameTheFolder) {
  std::vector<fs::path> missing = {dir_ / "nope"};
  auto r = discover_cases(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);

  fs::create_directories(dir_ / "empty");
  std::vector<fs::path> empty = {dir_ / "empty"};
  r = discover_cases(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no test case"), std::string::npos);

  fs::create_directories(dir_ / "nodata");
  ASSERT_TRUE(fx::write_model(fx::empty_model(), dir_ / "nodata" / "model.onnx").ok());
  std::vector<fs::path> nodata = {dir_ / "nodata"};
  r = discover_cases(nodata);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("test_data_set"), std::string::npos);
}

TEST_F(Scratch, ReadsPbTensorsAndNamesThemByPosition) {
  fs::path c = make_case(dir_, "test_relu");
  auto summary = summarize_model(c / "model.onnx");
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(summary->op_types, std::vector<std::string>{"Relu"});
  auto set = read_data_set(c / "test_data_set_0", summary->inputs, summary->outputs);
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->inputs.size(), 1u);
  EXPECT_EQ(set->inputs[0].name, "x");
  EXPECT_EQ(set->outputs[0].name, "y");
  EXPECT_EQ(set->inputs[0].tensor.shape(), Shape{2});
  EXPECT_EQ(set->inputs[0].tensor.data_as<float>()[0], -1.0f);
}

TEST_F(Scratch, PbErrors) {
  std::ofstream(dir_ / "junk.pb") << "\xff\xff\xff garbage";
  auto r = read_tensor_pb(dir_ / "junk.pb");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("junk.pb"), std::string::npos);

  // Declares 1000 floats but holds two: refused, nothing large allocated.
  write_pb(dir_ / "short.pb", f32_tensor("t", {1000}, {1, 2}));
  r = read_tensor_pb(dir_ / "short.pb");
  EXPECT_FALSE(r.ok());

  // Not regular files: refused for what they are, before any open (a FIFO
  // would block it), not reported as missing.
  ASSERT_EQ(::mkfifo((dir_ / "fifo.pb").c_str(), 0600), 0);
  r = read_tensor_pb(dir_ / "fifo.pb");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), (dir_ / "fifo.pb").string() + " is a FIFO, not a regular file");
  r = read_tensor_pb("/dev/zero");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "/dev/zero is a character device, not a regular file");
  r = read_tensor_pb(dir_ / "none.pb");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);

  write_pb(dir_ / "big.pb", f32_tensor("t", {4}, {1, 2, 3, 4}));
  r = read_tensor_pb(dir_ / "big.pb", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);

  // A name the model lacks, and a gap in the numbering.
  write_pb(dir_ / "set" / "input_0.pb", f32_tensor("q", {1}, {1}));
  write_pb(dir_ / "set" / "output_0.pb", f32_tensor("y", {1}, {1}));
  std::vector<std::string> in = {"x"}, out = {"y"};
  auto set = read_data_set(dir_ / "set", in, out);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("'q'"), std::string::npos);
  fs::remove(dir_ / "set" / "input_0.pb");
  write_pb(dir_ / "set" / "input_1.pb", f32_tensor("x", {1}, {1}));
  set = read_data_set(dir_ / "set", in, out);
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("input_0.pb is missing"), std::string::npos);
}

// SequenceProto and OptionalProto test data (sequences and optionals as
// model inputs and outputs, docs/control-flow.md).
TEST(Values, SequenceAndOptionalProtosAndTheirComparison) {
  ::onnx::SequenceProto seq;
  seq.set_name("s");
  seq.set_elem_type(::onnx::SequenceProto::TENSOR);
  for (float v : {1.0f, 2.0f}) {
    TP* t = seq.add_tensor_values();
    t->set_data_type(TP::FLOAT);
    t->add_dims(1);
    t->add_float_data(v);
  }
  const std::string bytes = seq.SerializeAsString();
  auto read = parse_value_pb(std::as_bytes(std::span(bytes.data(), bytes.size())), false, "s.pb");
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->first, "s");
  ASSERT_TRUE(read->second.is_sequence());
  ASSERT_EQ(read->second.elements.size(), 2u);
  EXPECT_EQ(*read->second.elements[1].data_as<float>(), 2.0f);
  ::onnx::OptionalProto empty;
  empty.set_name("o");
  const std::string none_bytes = empty.SerializeAsString();
  auto none = parse_value_pb(std::as_bytes(std::span(none_bytes.data(), none_bytes.size())), true, "o.pb");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->second.is_none());
  const std::string junk = "\xff\xff\xff";
  auto bad = parse_value_pb(std::as_bytes(std::span(junk.data(), junk.size())), false, "junk.pb");
  EXPECT_EQ(bad.status().message(), "junk.pb: not an ONNX SequenceProto");
  // Element by element: one fewer, or one that differs, fails naming it.
  Value shorter = Value::sequence({read->second.elements[0]});
  EXPECT_EQ(compare_values("y", shorter, read->second).message(),
            "output 'y': got a sequence of 1 tensor, expected a sequence of 2 tensors");
  Value swapped = Value::sequence({read->second.elements[1], read->second.elements[0]});
  EXPECT_NE(compare_values("y", swapped, read->second).message().find("output 'y[0]'"), std::string::npos);
  EXPECT_TRUE(compare_values("y", read->second, read->second).ok());
  EXPECT_FALSE(compare_values("y", none->second, read->second).ok());
}

TEST(Compare, TolerancesAndWorstElement) {
  Tensor e = f32({2, 2}, {1, 100, 0.25f, 0});
  EXPECT_TRUE(compare_tensors("y", f32({2, 2}, {1.0005f, 100.09f, 0.25f, 5e-8f}), e).ok());
  Status st = compare_tensors("y", f32({2, 2}, {1.01f, 100, 0.5f, 0}), e);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "output 'y' element [1, 0]: got 0.5, expected 0.25 "
                          "(2 of 4 elements differ)");
  // Just beyond atol at zero.
  EXPECT_FALSE(compare_tensors("y", f32({2, 2}, {1, 100, 0.25f, 2e-7f}), e).ok());
}

TEST(Compare, NanInfinityShapeDtype) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(compare_tensors("y", f32({2}, {nan, inf}), f32({2}, {nan, inf})).ok());
  Status st = compare_tensors("y", f32({2}, {1, inf}), f32({2}, {nan, inf}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("element [0]: got 1, expected nan"), std::string::npos);
  EXPECT_FALSE(compare_tensors("y", f32({2}, {nan, -inf}), f32({2}, {nan, inf})).ok());
  st = compare_tensors("y", f32({1, 2}, {1, 2}), f32({2}, {1, 2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("shape"), std::string::npos);
  st = compare_tensors("y", i64({2}, {1, 2}), f32({2}, {1, 2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("dtype i64, expected f32"), std::string::npos);
}

TEST(Compare, IntegersExactly) {
  int64_t big = int64_t{1} << 60;
  EXPECT_TRUE(compare_tensors("i", i64({2}, {big, -3}), i64({2}, {big, -3})).ok());
  Status st = compare_tensors("i", i64({3}, {big + 1, -3, 7}), i64({3}, {big, -3, 9}));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "output 'i' element [2]: got 7, expected 9 (2 of 3 elements differ)");
  std::vector<uint8_t> a = {1, 0}, b = {2, 1};  // bool: any nonzero is true
  auto ta = Tensor::copy_of(DType::kBool, {2}, std::as_bytes(std::span(a))).value();
  auto tb = Tensor::copy_of(DType::kBool, {2}, std::as_bytes(std::span(b))).value();
  st = compare_tensors("b", ta, tb);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("element [1]: got false, expected true"), std::string::npos);
}

TEST(Compare, HalfPrecision) {
  std::vector<uint16_t> one = {0x3c00}, onep = {0x3c01}, two = {0x4000};  // 1, 1+2^-10, 2
  auto t = [](std::vector<uint16_t>& v) {
    return Tensor::copy_of(DType::kF16, {1}, std::as_bytes(std::span(v))).value();
  };
  EXPECT_TRUE(compare_tensors("h", t(onep), t(one)).ok());
  Status st = compare_tensors("h", t(two), t(one));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("got 2, expected 1"), std::string::npos);
}

TEST(Ops, Issue3ListAndRule) {
  auto ops = required_ops();
  EXPECT_EQ(ops.size(), 107u);
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_TRUE(is_required_op("Conv"));
  EXPECT_TRUE(is_required_op("Where"));
  EXPECT_FALSE(is_required_op("Loop"));
  EXPECT_FALSE(is_required_op("com.microsoft:Gelu"));
  std::vector<std::string> model_ops = {"Add", "Loop", "Relu"};
  EXPECT_EQ(ops_outside_required(model_ops), std::vector<std::string>{"Loop"});
}

TEST(KnownFailuresTest, ParsesAndFinds) {
  auto list = KnownFailures::parse("# header\n\n"
                                   "test_a reference   f16 rounding differs  # trailing\n"
                                   "test_b * needs Loop\n"
                                   "test_c cpu-simd blocked by plugin bug\n",
                                   "kf.txt");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->entries().size(), 3u);
  EXPECT_EQ(list->entries()[0].reason, "f16 rounding differs");
  EXPECT_NE(list->find("test_a", "reference"), nullptr);
  EXPECT_EQ(list->find("test_a", "cpu-simd"), nullptr);
  EXPECT_NE(list->find("test_b", "cpu-simd"), nullptr);
  EXPECT_EQ(list->find("test_c", "reference"), nullptr);
  EXPECT_EQ(list->find("test_c", "cpu-simd")->line, 5);
}

TEST(KnownFailuresTest, Errors) {
  auto r = KnownFailures::parse("test_a reference\n", "kf.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kf.txt:1"), std::string::npos);
  EXPECT_NE(r.status().message().find("reason"), std::string::npos);
  r = KnownFailures::parse("test_a\n", "kf.txt");
  EXPECT_FALSE(r.ok());
  r = KnownFailures::parse("test_a reference x\n# c\ntest_a * y\n", "kf.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kf.txt:3"), std::string::npos);
  EXPECT_NE(r.status().message().find("line 1"), std::string::npos);
  r = KnownFailures::parse("test_a cpu://0 x\n", "kf.txt");
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(KnownFailures::load("/nonexistent/kf.txt").ok());
}

TEST(Report, ClassifyCountAndFormat) {
  auto known = KnownFailures::parse("test_known reference broken kernel\n"
                                    "test_pass reference stale entry\n",
                                    "kf.txt").value();
  auto make = [](std::string name, Outcome outcome, std::string message, double ms,
                 std::vector<std::string> ops) {
    CaseResult r;
    r.name = name;
    r.dir = "/d/" + name;
    r.outcome = outcome;
    r.message = std::move(message);
    r.ms = ms;
    r.op_types = std::move(ops);
    return r;
  };
  std::vector<CaseResult> results(5);
  results[0] = make("test_pass", Outcome::kPass, "", 1.5, {"Relu"});
  results[1] = make("test_known", Outcome::kFail, "output 'y' bad", 2, {"Relu"});
  results[2] = make("test_loop", Outcome::kUnsupported, "no Loop", 1, {"Loop"});
  results[3] = make("test_relu", Outcome::kUnsupported, "no f16 Relu", 1, {"Relu"});
  results[4] = make("test_err", Outcome::kError, "boom", 1, {});
  std::vector<std::string> problems = classify(results, &known, "reference");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "known failure 'test_pass' passed: remove it from kf.txt (line 2)");
  EXPECT_EQ(results[2].outcome, Outcome::kUnsupported);
  EXPECT_EQ(results[3].outcome, Outcome::kFail);
  EXPECT_TRUE(results[1].known_failure);

  EXPECT_EQ(format_case(results[0]), "PASS test_pass");
  CaseResult noted = make("test_noted", Outcome::kPass, "shapes from the data set", 1, {"Relu"});
  EXPECT_EQ(format_case(noted), "PASS test_noted: shapes from the data set");
  EXPECT_EQ(format_case(results[1]),
            "FAIL test_known: output 'y' bad [known failure: broken kernel]");
  EXPECT_EQ(format_case(results[2]), "UNSUPPORTED test_loop: no Loop");
  EXPECT_EQ(format_case(results[3]), "FAIL test_relu: unsupported, but every op of the model "
                                      "is one Loom must support: no f16 Relu");
  Totals t = count(results);
  EXPECT_EQ(format_totals(t, ""), "test-onnx: 5 cases: 1 passed, 1 failed, 1 unsupported, "
                                  "1 errors, 1 known failures (device reference)");
  EXPECT_EQ(device_key(""), "reference");
  EXPECT_EQ(device_key("cpu-simd://0"), "cpu-simd");

  auto doc = nlohmann::json::parse(report_json(results, "cpu-simd://0", problems));
  EXPECT_EQ(doc["device"], "cpu-simd://0");
  EXPECT_EQ(doc["totals"]["known_failures"], 1);
  ASSERT_EQ(doc["cases"].size(), 5u);
  EXPECT_EQ(doc["cases"][1]["status"], "FAIL");
  EXPECT_EQ(doc["cases"][1]["known_reason"], "broken kernel");
  EXPECT_EQ(doc["cases"][0]["ms"], 1.5);
  EXPECT_EQ(doc["problems"].size(), 1u);
}

CaseResult result_of(std::string name, Outcome outcome, std::string message = "") {
  CaseResult r;
  r.name = std::move(name);
  r.outcome = outcome;
  r.message = std::move(message);
  return r;
}

TEST(BaselineTest, ParsesSortsAndFinds) {
  auto b = Baseline::parse("# header\n\ntest_relu\n  test_abs  # trailing comment\r\n"
                           "test_Conv2d\n",
                           "base.txt");
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->entries().size(), 3u);
  EXPECT_EQ(b->entries()[0].name, "test_Conv2d");
  ASSERT_NE(b->find("test_abs"), nullptr);
  EXPECT_EQ(b->find("test_abs")->line, 4);
  EXPECT_EQ(b->find("test_ab"), nullptr);
  EXPECT_EQ(b->find("test_relu2"), nullptr);
}

TEST(BaselineTest, ErrorsNameFileAndLine) {
  auto r = Baseline::parse("test_a\ntest_b reference\n", "base.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("base.txt:2: one case name a line"), std::string::npos)
      << r.status().message();
  r = Baseline::parse("test_a\n# x\ntest_a\n", "base.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("base.txt:3: 'test_a' is already listed on line 1"),
            std::string::npos)
      << r.status().message();
  r = Baseline::parse("test_$x\n", "base.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("base.txt:1:"), std::string::npos);
  auto missing = Baseline::load("/nonexistent/base.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/base.txt"), std::string::npos);
}

TEST(BaselineTest, RegressionsNewPassesAndMissingCasesAreProblems) {
  auto b = Baseline::parse("test_pass\ntest_gone_unsupported\ntest_known\ntest_absent\n",
                           "base.txt")
               .value();
  std::vector<CaseResult> results;
  results.push_back(result_of("test_pass", Outcome::kPass));
  results.push_back(result_of("test_gone_unsupported", Outcome::kUnsupported, "no Trilu"));
  results.push_back(result_of("test_known", Outcome::kFail, "bad"));
  results.back().known_failure = true;
  results.push_back(result_of("test_new", Outcome::kPass));
  results.push_back(result_of("test_lstm", Outcome::kUnsupported, "no LSTM"));

  BaselineCheck c = check_baseline(results, b, /*complete=*/true);
  EXPECT_EQ(c.listed, 4u);
  EXPECT_EQ(c.regressed, 2u);
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.missing, 1u);
  ASSERT_EQ(c.problems.size(), 4u);
  EXPECT_EQ(c.problems[0],
            "baseline case 'test_gone_unsupported' (base.txt:2) did not pass: "
            "UNSUPPORTED: no Trilu");
  EXPECT_EQ(c.problems[1], "baseline case 'test_known' (base.txt:3) did not pass: FAIL: bad");
  EXPECT_EQ(c.problems[2], "case 'test_new' passed but is not in the baseline base.txt: add it "
                           "(--write-baseline writes the list)");
  EXPECT_EQ(c.problems[3],
            "baseline case 'test_absent' (base.txt:4) was not run: it is not in the test data "
            "given");
  EXPECT_EQ(format_baseline(c, b),
            "baseline base.txt: 4 listed, 2 regressed, 1 newly passing, 1 missing");

  // A filtered run checks only the cases it ran.
  BaselineCheck partial = check_baseline(std::span(results).first(1), b, /*complete=*/false);
  EXPECT_TRUE(partial.problems.empty());
  EXPECT_EQ(partial.regressed + partial.added + partial.missing, 0u);
}

TEST(BaselineTest, WrittenTextIsTheExactPassingSet) {
  std::vector<CaseResult> results;
  results.push_back(result_of("test_b", Outcome::kPass));
  results.push_back(result_of("test_a", Outcome::kPass));
  results.push_back(result_of("test_c", Outcome::kFail, "x"));
  results.push_back(result_of("test_d", Outcome::kUnsupported, "y"));
  std::string text = baseline_text(results, "cpu-simd://0");
  EXPECT_NE(text.find("cpu-simd://0"), std::string::npos);
  auto b = Baseline::parse(text, "written");
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(b->entries().size(), 2u);
  EXPECT_EQ(b->entries()[0].name, "test_a");
  EXPECT_EQ(b->entries()[1].name, "test_b");
  EXPECT_TRUE(check_baseline(results, *b, true).problems.empty());
}

}  // namespace
}  // namespace loom::conformance
