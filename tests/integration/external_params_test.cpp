// Programs with external weights: the demo MLP with its weights in a .irpa
// archive runs on cpu-simd and on the reference kernels with results
// bit-identical to the inline program; splatted, misaligned and EXTERNAL
// entries work; LoadOptions::parameter_archives overrides the default
// lookup; and each way an archive can fail to match is an error that names
// the parameter, the scope and the archive.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "program_builder/demo_program.hpp"
#include "loom/irpa.hpp"
#include "loom/tensor_metadata.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

namespace irpa = io::irpa;
using tools::NamedWeight;

std::string metadata_of(const Tensor& t) { return io::encode_tensor_metadata(t.dtype(), t.shape()); }

Tensor filled(Shape shape, std::span<const float> pattern) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape)).value();
  for (uint64_t i = 0; i < t.element_count(); ++i) {
    t.data_as<float>()[i] = pattern[i % pattern.size()];
  }
  return t;
}

void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

// Success when `status` failed with `code` and its message holds every part.
::testing::AssertionResult fails_with(const Status& status, StatusCode code,
                                      std::initializer_list<std::string> parts) {
  if (status.ok()) return ::testing::AssertionFailure() << "unexpectedly succeeded";
  if (status.code() != code) {
    return ::testing::AssertionFailure() << "code " << status_code_name(status.code())
                                         << ", expected " << status_code_name(code) << ": "
                                         << status.message();
  }
  for (const std::string& part : parts) {
    if (status.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << part
                                           << "': " << status.message();
    }
  }
  return ::testing::AssertionSuccess();
}

class ExternalParams : public ::testing::Test {
 protected:
  void SetUp() override {
    auto runtime = Runtime::create();
    ASSERT_TRUE(runtime.ok()) << runtime.status().to_string();
    runtime_ = std::move(*runtime);
    bool has_cpu = false;
    for (const auto& d : runtime_->devices()) has_cpu |= d.uri == "cpu-simd://0";
    ASSERT_TRUE(has_cpu) << "cpu-simd plugin not found in the build tree";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("loom_extparams_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    weights_ = tools::mlp_weights(shape_);
    x_ = tools::mlp_input(shape_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  tools::MlpOptions external_options(bool checksums = true) {
    tools::MlpOptions options;
    options.external_weights = true;
    options.record_checksums = checksums;
    return options;
  }

  // Writes the external-weights program as dir_/program.loom; the archive
  // the demo builds goes to dir_/weights.irpa unless `archive` replaces it.
  std::filesystem::path write_external(const std::vector<NamedWeight>& weights,
                                       const tools::MlpOptions& options,
                                       const std::vector<std::byte>* archive = nullptr) {
    auto program = tools::build_mlp(*runtime_, shape_, weights, options);
    EXPECT_TRUE(program.ok()) << program.status().to_string();
    std::filesystem::path path = dir_ / "program.loom";
    EXPECT_TRUE(program->writer.write_file(path).ok());
    write_bytes(dir_ / options.archive, archive != nullptr ? *archive : program->archive);
    return path;
  }

  std::filesystem::path write_external() { return write_external(weights_, external_options()); }

  // The demo's program with `weights` inline, in memory (kept by the fixture).
  std::shared_ptr<Program> load_inline(const std::vector<NamedWeight>& weights) {
    auto program = tools::build_mlp(*runtime_, shape_, weights);
    EXPECT_TRUE(program.ok()) << program.status().to_string();
    inline_bytes_.push_back(program->writer.write_buffer().value());
    auto loaded = runtime_->load_program(inline_bytes_.back(), device());
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    return loaded.ok() ? *loaded : nullptr;
  }

  static LoadOptions device() {
    LoadOptions options;
    options.device = "cpu-simd://0";
    return options;
  }

  Tensor run(Program& program, const char* function) {
    NamedTensor in{"x", x_};
    auto out = program.run(function, {&in, 1});
    EXPECT_TRUE(out.ok()) << function << ": " << out.status().to_string();
    return out.ok() ? (*out)[0].tensor : Tensor();
  }

  // Both functions of `program` give exactly what the inline program with
  // `weights` gives.
  void expect_same_as_inline(Program& program, const std::vector<NamedWeight>& weights) {
    auto reference = load_inline(weights);
    ASSERT_NE(reference, nullptr);
    for (const char* function : {"main", "reference"}) {
      Tensor got = run(program, function);
      Tensor want = run(*reference, function);
      EXPECT_TRUE(same_bits(got, want)) << function;
    }
  }

  // An archive holding `weights` as DATA entries with Loom's metadata,
  // except those `edit` changes (it may also drop or add entries).
  std::vector<std::byte> archive_with(
      const std::function<void(irpa::ArchiveBuilder&, const NamedWeight&)>& edit) {
    irpa::ArchiveBuilder builder;
    for (const NamedWeight& w : weights_) edit(builder, w);
    auto bytes = builder.write_buffer();
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    return bytes.ok() ? std::move(*bytes) : std::vector<std::byte>();
  }

  static void add_as_is(irpa::ArchiveBuilder& b, const NamedWeight& w) {
    ASSERT_TRUE(b.add_data(w.name, w.tensor.bytes(), metadata_of(w.tensor)).ok());
  }

  Status load_status(const std::filesystem::path& path, LoadOptions options = device()) {
    auto program = runtime_->load_program(path, options);
    return program.ok() ? Status() : program.status();
  }

  tools::MlpShape shape_;
  std::unique_ptr<Runtime> runtime_;
  std::filesystem::path dir_;
  std::vector<NamedWeight> weights_;
  Tensor x_;
  std::vector<std::vector<std::byte>> inline_bytes_;
};

TEST_F(ExternalParams, ExternalWeightsGiveBitIdenticalResultsOnCpuSimdAndReference) {
  auto program = runtime_->load_program(write_external(), device());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  ASSERT_EQ((*program)->placements().size(), 1u);
  EXPECT_EQ((*program)->placements()[0].device, "cpu-simd://0");
  expect_same_as_inline(**program, weights_);
  // Softmax rows sum to one: the result is not trivially zero.
  Tensor y = run(**program, "main");
  float row = 0;
  for (int64_t j = 0; j < shape_.out; ++j) row += y.data_as<float>()[j];
  EXPECT_NEAR(row, 1.0f, 1e-5f);
}

TEST_F(ExternalParams, ArchiveStaysMappedAfterItsFileIsRemoved) {
  auto path = write_external();
  auto program = runtime_->load_program(path, device());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  // The archive stays mapped by the program: removing the file changes nothing.
  std::filesystem::remove(dir_ / "weights.irpa");
  auto session = (*program)->create_session("main");
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->set_input("x", x_).ok());
  ASSERT_TRUE((*session)->run().ok());
  EXPECT_TRUE(same_bits((*session)->output(0), run(*load_inline(weights_), "main")));
}

TEST_F(ExternalParams, SplattedWeightsRunAndGiveTheExpectedResult) {
  // w1 a 4-byte splat, b1 a 16-byte one, w2 and b2 stored as data.
  const float w1_value[] = {0.03125f};
  const float b1_values[] = {-0.5f, 0.25f, 1.0f, -0.125f};
  std::vector<NamedWeight> weights = weights_;
  weights[0].tensor = filled({shape_.in, shape_.hidden}, w1_value);
  weights[1].tensor = filled({shape_.hidden}, b1_values);
  auto archive = archive_with([&](irpa::ArchiveBuilder& b, const NamedWeight& w) {
    if (w.name == "w1") {
      ASSERT_TRUE(b.add_splat("w1", weights[0].tensor.byte_size(),
                              std::as_bytes(std::span(w1_value)), metadata_of(weights[0].tensor))
                      .ok());
    } else if (w.name == "b1") {
      ASSERT_TRUE(b.add_splat("b1", weights[1].tensor.byte_size(),
                              std::as_bytes(std::span(b1_values)))
                      .ok());
    } else {
      add_as_is(b, w);
    }
  });
  // Checksums recorded over the expanded splats: the loader checks them too.
  auto path = write_external(weights, external_options(), &archive);
  auto program = runtime_->load_program(path, device());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, weights);

  // And by hand: every hidden unit j sees x.rowsum / 32 + b1[j % 4].
  Tensor y = run(**program, "reference");
  for (int64_t r = 0; r < shape_.batch; ++r) {
    double rowsum = 0;
    for (int64_t k = 0; k < shape_.in; ++k) rowsum += x_.data_as<float>()[r * shape_.in + k];
    std::vector<double> z(static_cast<size_t>(shape_.out));
    double zmax = -1e300, denominator = 0;
    for (int64_t o = 0; o < shape_.out; ++o) {
      double acc = weights_[3].tensor.data_as<float>()[o];
      for (int64_t j = 0; j < shape_.hidden; ++j) {
        double h = std::max(0.0, rowsum * w1_value[0] + b1_values[j % 4]);
        acc += h * weights_[2].tensor.data_as<float>()[j * shape_.out + o];
      }
      z[o] = acc;
      zmax = std::max(zmax, acc);
    }
    for (double v : z) denominator += std::exp(v - zmax);
    for (int64_t o = 0; o < shape_.out; ++o) {
      EXPECT_NEAR(y.data_as<float>()[r * shape_.out + o], std::exp(z[o] - zmax) / denominator,
                  1e-5)
          << "row " << r << " column " << o;
    }
  }
}

TEST_F(ExternalParams, MisalignedDataEntriesAreCopiedAndStillExact) {
  // One-byte alignment after a 3-byte entry leaves every weight misaligned
  // for f32; the loader copies them rather than hand kernels unaligned floats.
  auto archive = [&] {
    irpa::ArchiveBuilder b;
    std::byte odd[3] = {};
    EXPECT_TRUE(b.add_data("odd", odd, {}, 1).ok());
    for (const NamedWeight& w : weights_) {
      EXPECT_TRUE(b.add_data(w.name, w.tensor.bytes(), metadata_of(w.tensor), 1).ok());
    }
    return b.write_buffer().value();
  }();
  auto reader = irpa::ArchiveReader::open_buffer(archive).value();
  ASSERT_NE(reader->find("w1")->data_offset % 4, 0u) << "the archive did not misalign w1";
  auto program = runtime_->load_program(write_external(weights_, external_options(), &archive),
                                        device());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, weights_);
}

TEST_F(ExternalParams, ExternalEntriesPointingBesideTheArchiveWork) {
  const NamedWeight& w2 = weights_[2];
  write_bytes(dir_ / "w2.bin", w2.tensor.bytes());
  auto archive = archive_with([&](irpa::ArchiveBuilder& b, const NamedWeight& w) {
    if (w.name == "w2") {
      ASSERT_TRUE(b.add_external("w2", "w2.bin", 0, w2.tensor.byte_size()).ok());
    } else {
      add_as_is(b, w);
    }
  });
  auto program = runtime_->load_program(write_external(weights_, external_options(), &archive),
                                        device());
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, weights_);
}

TEST_F(ExternalParams, LoadOptionsOverrideTheArchiveOfAScope) {
  auto path = write_external();
  std::filesystem::create_directories(dir_ / "elsewhere");
  std::filesystem::rename(dir_ / "weights.irpa", dir_ / "elsewhere" / "other.irpa");
  EXPECT_EQ(load_status(path).code(), StatusCode::kNotFound);
  LoadOptions options = device();
  options.parameter_archives = {{"mlp", dir_ / "elsewhere" / "other.irpa"}};
  auto program = runtime_->load_program(path, options);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, weights_);
}

TEST_F(ExternalParams, OverrideSwapsWeightsWithoutRebuildingTheProgram) {
  // A program that records no checksums takes whatever weights it is given.
  auto path = write_external(weights_, external_options(/*checksums=*/false));
  std::vector<NamedWeight> other = tools::mlp_weights(shape_, 99);
  irpa::ArchiveBuilder b;
  for (const NamedWeight& w : other) ASSERT_TRUE(b.add_data(w.name, w.tensor.bytes()).ok());
  ASSERT_TRUE(b.write_file(dir_ / "other.irpa").ok());
  LoadOptions options = device();
  options.parameter_archives = {{"mlp", dir_ / "other.irpa"}};
  auto program = runtime_->load_program(path, options);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, other);
  EXPECT_FALSE(same_bits(run(**program, "main"), run(*load_inline(weights_), "main")));
}

TEST_F(ExternalParams, ProgramInMemoryNeedsAnOverride) {
  auto program = tools::build_mlp(*runtime_, shape_, weights_, external_options()).value();
  auto bytes = program.writer.write_buffer().value();
  write_bytes(dir_ / "weights.irpa", program.archive);
  auto refused = runtime_->load_program(bytes, device());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(fails_with(refused.status(), StatusCode::kFailedPrecondition,
                         {"parameter 'w1' (scope 'mlp')", "loaded from memory",
                          "archive 'weights.irpa'", "LoadOptions::parameter_archives"}));
  LoadOptions options = device();
  options.parameter_archives = {{"mlp", dir_ / "weights.irpa"}};
  auto loaded = runtime_->load_program(bytes, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_as_inline(**loaded, weights_);
}

TEST_F(ExternalParams, ArchiveInASubfolderIsFoundRelativeToTheProgram) {
  tools::MlpOptions options = external_options();
  options.archive = "weights/mlp.irpa";
  std::filesystem::create_directories(dir_ / "weights");
  auto path = write_external(weights_, options);
  // Loaded through a relative path from another working directory.
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.parent_path());
  auto program = runtime_->load_program(dir_.filename() / "program.loom", device());
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, weights_);
}

// --- errors ---------------------------------------------------------------

TEST_F(ExternalParams, MissingArchiveSaysWhereItLookedAndHowToOverride) {
  auto path = write_external();
  std::filesystem::remove(dir_ / "weights.irpa");
  EXPECT_TRUE(fails_with(load_status(path), StatusCode::kNotFound,
                         {"parameter 'w1' (scope 'mlp')", "archive 'weights.irpa' not found at " +
                          (dir_ / "weights.irpa").string(),
                          "LoadOptions::parameter_archives", "--params mlp=FILE.irpa"}));
}

TEST_F(ExternalParams, MissingOverriddenArchiveNamesTheGivenPath) {
  auto path = write_external();
  LoadOptions options = device();
  options.parameter_archives = {{"mlp", dir_ / "nope.irpa"}};
  EXPECT_TRUE(fails_with(load_status(path, options), StatusCode::kNotFound,
                         {"parameter 'w1' (scope 'mlp')", (dir_ / "nope.irpa").string(),
                          "the path given for scope 'mlp'"}));
}

TEST_F(ExternalParams, UnknownScopeInOverridesIsAnError) {
  auto path = write_external();
  LoadOptions options = device();
  options.parameter_archives = {{"mpl", dir_ / "weights.irpa"}};
  EXPECT_TRUE(fails_with(load_status(path, options), StatusCode::kNotFound,
                         {"no external parameters in scope 'mpl'", "its scopes: 'mlp'"}));
  // A program with inline weights only has no scope to override.
  auto inline_path = dir_ / "inline.loom";
  ASSERT_TRUE(tools::build_mlp_program(*runtime_, shape_).value().write_file(inline_path).ok());
  options.parameter_archives = {{"mlp", dir_ / "weights.irpa"}};
  EXPECT_TRUE(fails_with(load_status(inline_path, options), StatusCode::kNotFound,
                         {"scope 'mlp'", "it has no external parameters"}));
}

TEST_F(ExternalParams, ScopeGivenTwiceIsAnError) {
  auto path = write_external();
  LoadOptions options = device();
  options.parameter_archives = {{"mlp", dir_ / "weights.irpa"}, {"mlp", dir_ / "b.irpa"}};
  EXPECT_TRUE(fails_with(load_status(path, options), StatusCode::kInvalidArgument,
                         {"scope 'mlp' is given twice"}));
}

TEST_F(ExternalParams, MissingKeyListsKeysPresent) {
  auto archive = archive_with([](irpa::ArchiveBuilder& b, const NamedWeight& w) {
    if (w.name != "b2") add_as_is(b, w);
  });
  auto path = write_external(weights_, external_options(), &archive);
  EXPECT_TRUE(fails_with(load_status(path), StatusCode::kNotFound,
                         {"parameter 'b2' (scope 'mlp')", (dir_ / "weights.irpa").string(),
                          "has no entry 'b2'", "it has 3 entries: 'w1', 'b1', 'w2'"}));
}

TEST_F(ExternalParams, SizeMismatchNamesBothSizes) {
  auto archive = archive_with([](irpa::ArchiveBuilder& b, const NamedWeight& w) {
    if (w.name == "b2") {
      ASSERT_TRUE(b.add_data("b2", w.tensor.bytes().first(36)).ok());
    } else {
      add_as_is(b, w);
    }
  });
  auto path = write_external(weights_, external_options(), &archive);
  EXPECT_TRUE(fails_with(load_status(path), StatusCode::kInvalidArgument,
                         {"parameter 'b2' (scope 'mlp') in archive " +
                              (dir_ / "weights.irpa").string(),
                          "the entry holds 36 bytes, the program expects 40 (f32 [10])"}));
}

TEST_F(ExternalParams, DtypeOrShapeRecordedInMetadataMustMatch) {
  for (auto [metadata, part] : std::vector<std::pair<std::string, std::string>>{
           {R"({"dtype":"i32","shape":[10]})", "archive records dtype 'i32', expected f32"},
           {R"({"dtype":"f32","shape":[2,5]})", "archive records shape [2, 5], expected [10]"},
           {R"({"shape":"ten"})", "archive records shape a value that is not a shape"},
           {R"({"dtype":7})", "archive records a dtype that is not a string"}}) {
    auto archive = archive_with([&](irpa::ArchiveBuilder& b, const NamedWeight& w) {
      if (w.name == "b2") {
        ASSERT_TRUE(b.add_data("b2", w.tensor.bytes(), metadata).ok());
      } else {
        add_as_is(b, w);
      }
    });
    auto path = write_external(weights_, external_options(), &archive);
    EXPECT_TRUE(fails_with(load_status(path), StatusCode::kInvalidArgument,
                           {"parameter 'b2' (scope 'mlp') in archive", part}))
        << metadata;
  }
}

TEST_F(ExternalParams, MetadataOfOtherToolsIsIgnored) {
  for (std::string metadata : {"", "not json", "{\"quant\":\"none\"}", "[1,2]", "{\"dtype\":"}) {
    auto archive = archive_with([&](irpa::ArchiveBuilder& b, const NamedWeight& w) {
      ASSERT_TRUE(b.add_data(w.name, w.tensor.bytes(), metadata).ok());
    });
    auto path = write_external(weights_, external_options(), &archive);
    EXPECT_TRUE(load_status(path).ok()) << metadata << ": " << load_status(path).to_string();
  }
}

TEST_F(ExternalParams, ChecksumMismatchIsDataLoss) {
  std::vector<NamedWeight> other = tools::mlp_weights(shape_, 99);
  auto archive = archive_with([&](irpa::ArchiveBuilder& b, const NamedWeight& w) {
    if (w.name == "w2") {
      add_as_is(b, other[2]);
    } else {
      add_as_is(b, w);
    }
  });
  auto path = write_external(weights_, external_options(), &archive);
  EXPECT_TRUE(fails_with(load_status(path), StatusCode::kDataLoss,
                         {"parameter 'w2' (scope 'mlp') in archive", "checksum mismatch",
                          "the program records xxh3 0x"}));
  // Without recorded checksums the same archive loads.
  path = write_external(weights_, external_options(/*checksums=*/false), &archive);
  EXPECT_TRUE(load_status(path).ok());
}

TEST_F(ExternalParams, ChecksumCheckCanBeTurnedOffToSwapWeights) {
  // The program records checksums of weights_; the archive holds other
  // weights of the same names and shapes.
  std::vector<NamedWeight> other = tools::mlp_weights(shape_, 99);
  auto archive = archive_with([&](irpa::ArchiveBuilder& b, const NamedWeight& w) {
    for (const NamedWeight& o : other) {
      if (o.name == w.name) add_as_is(b, o);
    }
  });
  auto path = write_external(weights_, external_options(), &archive);
  EXPECT_EQ(load_status(path).code(), StatusCode::kDataLoss);
  LoadOptions options = device();
  options.check_parameter_checksums = false;
  auto program = runtime_->load_program(path, options);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  expect_same_as_inline(**program, other);
}

TEST_F(ExternalParams, DamagedArchiveIsAnErrorNamingTheParameterAndArchive) {
  auto path = write_external();
  std::vector<std::byte> garbage(4096, std::byte{0x5a});
  write_bytes(dir_ / "weights.irpa", garbage);
  EXPECT_TRUE(fails_with(load_status(path), StatusCode::kInvalidArgument,
                         {"parameter 'w1' (scope 'mlp'): " + (dir_ / "weights.irpa").string(),
                          "not a parameter archive"}));
  write_bytes(dir_ / "weights.irpa", {});
  EXPECT_FALSE(load_status(path).ok());
  // Truncations of a valid archive never crash.
  auto good = tools::build_mlp(*runtime_, shape_, weights_, external_options()).value().archive;
  // (The file's trailing padding is not needed, so cuts stay inside the data.)
  for (size_t size : {size_t{0}, size_t{31}, size_t{88}, size_t{200}, good.size() / 2}) {
    write_bytes(dir_ / "weights.irpa", std::span(good).first(size));
    EXPECT_FALSE(load_status(path).ok()) << size;
  }
}

TEST_F(ExternalParams, ArchivePathThatIsAFolderIsAnError) {
  auto path = write_external();
  std::filesystem::remove(dir_ / "weights.irpa");
  std::filesystem::create_directories(dir_ / "weights.irpa");
  EXPECT_TRUE(fails_with(load_status(path), StatusCode::kInvalidArgument,
                         {"parameter 'w1' (scope 'mlp'): " + (dir_ / "weights.irpa").string(),
                          "is a directory, not a regular file"}));
}

}  // namespace
}  // namespace loom
