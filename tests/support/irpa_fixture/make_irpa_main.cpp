// loom-test-make-irpa DIR writes, for tests/integration/params_cli_test.sh:
//   DIR/ext.bin    64 junk bytes, then 8 floats
//   DIR/ext.irpa   entries: "inner" data f32[4]; "outer" external f32[8]
//                  (ext.bin at 64); "ones" splat 0x3f800000 f32[4];
//                  "odd" data of 6 bytes, no metadata; "liar" data of 8
//                  bytes whose metadata claims f32[7]
//   DIR/inner.npy, DIR/outer.npy, DIR/ones.npy   what extract must write
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "loom/irpa.hpp"
#include "loom/npy.hpp"

namespace irpa = loom::io::irpa;

namespace {

loom::Status write_npy(const std::filesystem::path& path, const std::vector<float>& v) {
  LOOM_ASSIGN_OR_RETURN(
      loom::Tensor t, loom::Tensor::copy_of(loom::DType::kF32, {static_cast<int64_t>(v.size())},
                                            std::as_bytes(std::span(v))));
  return loom::io::write_npy(path, t);
}

loom::Status make(const std::filesystem::path& dir) {
  std::vector<float> inner = {1.5f, -2.0f, 0.0f, 8.0f};
  std::vector<float> outer = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> ones(4, 1.0f);
  auto ob = std::as_bytes(std::span(outer));
  std::vector<std::byte> bin(64 + ob.size(), std::byte{0x5a});
  std::memcpy(bin.data() + 64, ob.data(), ob.size());
  {
    std::ofstream out(dir / "ext.bin", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(bin.size()));
    if (!out) return loom::unavailable("cannot write ext.bin");
  }
  const std::byte one_f32[4] = {std::byte{0x00}, std::byte{0x00}, std::byte{0x80}, std::byte{0x3f}};
  const std::byte odd[6] = {std::byte{1}, std::byte{2}, std::byte{3},
                            std::byte{4}, std::byte{5}, std::byte{6}};
  const std::byte liar[8] = {};
  irpa::ArchiveBuilder b;
  LOOM_RETURN_IF_ERROR(b.add_data("inner", std::as_bytes(std::span(inner)),
                                  R"({"dtype":"f32","shape":[4]})"));
  LOOM_RETURN_IF_ERROR(b.add_external("outer", "ext.bin", 64, ob.size(),
                                      R"({"dtype":"f32","shape":[8]})"));
  LOOM_RETURN_IF_ERROR(b.add_splat("ones", 16, one_f32, R"({"dtype":"f32","shape":[4]})"));
  LOOM_RETURN_IF_ERROR(b.add_data("odd", odd));
  LOOM_RETURN_IF_ERROR(b.add_data("liar", liar, R"({"dtype":"f32","shape":[7]})"));
  LOOM_RETURN_IF_ERROR(b.write_file(dir / "ext.irpa"));
  LOOM_RETURN_IF_ERROR(write_npy(dir / "inner.npy", inner));
  LOOM_RETURN_IF_ERROR(write_npy(dir / "outer.npy", outer));
  return write_npy(dir / "ones.npy", ones);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: loom-test-make-irpa DIR\n");
    return 2;
  }
  loom::Status st = make(argv[1]);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("wrote %s/ext.irpa\n", argv[1]);
  return 0;
}
