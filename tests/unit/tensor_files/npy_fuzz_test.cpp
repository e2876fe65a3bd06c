// Corrupted inputs must give a status, never a crash, an out-of-bounds read
// or a runaway allocation (run under ASan/UBSan via the "sanitize" label).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/npy.hpp"
#include "npy_test_util.hpp"

namespace loom::io {
namespace {

using testing::to_bytes;

std::vector<std::vector<std::byte>> seeds() {
  std::vector<std::vector<std::byte>> out;
  auto add = [&out](DType dtype, Shape shape) {
    Tensor t = *Tensor::zeros(dtype, std::move(shape));
    out.push_back(encode_npy(t));
  };
  add(DType::kF32, {2, 3});
  add(DType::kF64, {});
  add(DType::kI16, {3});
  add(DType::kBool, {2, 2, 2});
  add(DType::kU8, {0});
  out.push_back(to_bytes(testing::npy_file(
      "{'descr': '>i8', 'fortran_order': False, 'shape': (2L,), }",
      std::string(16, '\x7f'), 3)));
  return out;
}

// Whatever parse_npy accepts must be self-consistent.
void check(std::span<const std::byte> bytes) {
  auto t = parse_npy(bytes, "fuzz");
  if (!t.ok()) {
    EXPECT_FALSE(t.status().message().empty());
    return;
  }
  EXPECT_EQ(t->byte_size(), t->element_count() * dtype_size(t->dtype()));
  EXPECT_LE(t->byte_size(), bytes.size());
}

TEST(NpyFuzz, RandomByteFlipsNeverCrash) {
  std::mt19937 rng(20240611);
  for (const auto& seed : seeds()) {
    std::uniform_int_distribution<size_t> pos(0, seed.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> flips(1, 4);
    for (int round = 0; round < 3000; ++round) {
      std::vector<std::byte> bytes = seed;
      for (int f = flips(rng); f > 0; --f) {
        bytes[pos(rng)] = static_cast<std::byte>(byte(rng));
      }
      check(bytes);
    }
  }
}

TEST(NpyFuzz, HeaderCharactersReplacedBySyntaxNeverCrash) {
  // Flipping to syntax characters reaches deeper parser states than random
  // bytes, which mostly fail at the first bad character.
  const char kSyntax[] = "(){}[],:'\" -0123456789LTrueFalseNone\n\\";
  std::mt19937 rng(7);
  for (const auto& seed : seeds()) {
    std::uniform_int_distribution<size_t> pos(10, 80);
    std::uniform_int_distribution<size_t> pick(0, sizeof kSyntax - 2);
    for (int round = 0; round < 3000; ++round) {
      std::vector<std::byte> bytes = seed;
      for (int f = 0; f < 2; ++f) {
        bytes[pos(rng)] = static_cast<std::byte>(kSyntax[pick(rng)]);
      }
      check(bytes);
    }
  }
}

TEST(NpyFuzz, EveryTruncationFailsCleanly) {
  for (const auto& seed : seeds()) {
    for (size_t n = 0; n < seed.size(); ++n) {
      auto t = parse_npy(std::span(seed).first(n), "cut");
      // Only a cut inside trailing data of a zero-size array could pass, and
      // the seeds have no such data; every shorter prefix must fail.
      EXPECT_FALSE(t.ok()) << "prefix of " << n << " bytes parsed";
    }
    EXPECT_TRUE(parse_npy(seed).ok());
  }
}

TEST(NpyFuzz, FlippedFilesFailTheSameWayOnDisk) {
  testing::TempDir dir;
  std::mt19937 rng(99);
  auto seed = seeds().front();
  std::uniform_int_distribution<size_t> pos(0, seed.size() - 1);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::byte> bytes = seed;
    bytes[pos(rng)] = static_cast<std::byte>(rng() & 0xff);
    auto path = dir.write("f.npy", testing::to_string(bytes));
    auto from_file = read_npy(path);
    auto from_bytes = parse_npy(bytes);
    ASSERT_EQ(from_file.ok(), from_bytes.ok());
    if (!from_file.ok()) {
      EXPECT_EQ(from_file.status().code(), from_bytes.status().code());
    }
  }
}

}  // namespace
}  // namespace loom::io
