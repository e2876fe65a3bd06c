// vulkan-compute's blob loader without a Vulkan device: decode()
// (decode_structure, then validate_dispatch on every dispatch: bindings,
// push constants, every index a kernel computes, workgroup counts), which
// the plugin runs before it creates a buffer or a pipeline; then
// executable_estimate's work count (blob_work.hpp) on what decoded: finite,
// non-negative FLOPs and bytes, executed FLOPs at least the useful ones.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "loom/vulkan_compute/blob_format.hpp"
#include "loom/vulkan_compute/blob_work.hpp"
#include "loom/vulkan_compute/kernels.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom::vulkan;
  BlobProgram program;
  std::string error;
  if (!decode(data, size, &program, &error)) {
    if (error.empty()) loom::fuzz::fail("a refused blob without a message");
    return 0;
  }
  if (program.data_size != 0 && (program.data_view < data || program.data_view + program.data_size > data + size)) {
    loom::fuzz::fail("the data section lies outside the blob");
  }
  for (const DispatchWork& w : program_work(program)) {
    if (!(w.flops >= 0) || !(w.bytes >= 0) || !(w.flops < 1e300) || !(w.bytes < 1e300)) {
      loom::fuzz::fail("a dispatch's work is negative or not finite");
    }
    if (w.kind == WorkKind::kMatMul && w.executed_flops + 1 < w.flops * (1 - 1e-9)) {
      loom::fuzz::fail("a matmul executes fewer flops than it computes");
    }
  }
  program.data.assign(program.data_view, program.data_view + program.data_size);
  const auto bytes = encode(program);
  BlobProgram again;
  if (!decode(bytes.data(), bytes.size(), &again, &error)) {
    loom::fuzz::fail("a decoded blob, encoded again, is refused: " + error);
  }
  return 0;
}
