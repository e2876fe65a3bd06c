// loom-test-compare GOT EXPECTED [--rtol R] [--atol A]: compares two tensor
// files (.npy or ONNX TensorProto .pb, by extension) with test-onnx's rule
// (conformance::compare_tensors): dtypes and shapes equal, floats within
// atol + rtol * |expected|. Prints "same: ..." and exits 0, or prints the
// first difference and exits 1; unreadable input exits 2. The CLI tests use
// it to check `loom run` results against an independent oracle (the ONNX
// test data's expected outputs).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "loom/npy.hpp"
#include "loom/conformance/onnx_cases.hpp"

namespace cf = loom::conformance;

namespace {

loom::Result<loom::Tensor> read_any(const std::filesystem::path& path) {
  if (path.extension() == ".npy") return loom::io::read_npy(path);
  auto named = cf::read_tensor_pb(path);
  if (!named.ok()) return named.status();
  return std::move(named->tensor);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 5 && argc != 7) {
    std::fprintf(stderr, "usage: loom-test-compare GOT EXPECTED [--rtol R] [--atol A]\n");
    return 2;
  }
  cf::Tolerance tolerance;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    char* end = nullptr;
    double v = std::strtod(argv[i + 1], &end);
    if (end == argv[i + 1] || *end != '\0' || !(v >= 0)) {
      std::fprintf(stderr, "loom-test-compare: bad value '%s' for %s\n", argv[i + 1], argv[i]);
      return 2;
    }
    if (flag == "--rtol") {
      tolerance.rtol = v;
    } else if (flag == "--atol") {
      tolerance.atol = v;
    } else {
      std::fprintf(stderr, "loom-test-compare: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  auto got = read_any(argv[1]);
  auto expected = read_any(argv[2]);
  for (const auto* r : {&got, &expected}) {
    if (!r->ok()) {
      std::fprintf(stderr, "loom-test-compare: %s\n", r->status().to_string().c_str());
      return 2;
    }
  }
  loom::Status st = cf::compare_tensors("tensor", *got, *expected, tolerance);
  if (!st.ok()) {
    std::printf("differ: %s vs %s: %s\n", argv[1], argv[2], st.message().c_str());
    return 1;
  }
  std::printf("same: %s matches %s (%zu elements)\n", argv[1], argv[2],
              static_cast<size_t>(got->element_count()));
  return 0;
}
