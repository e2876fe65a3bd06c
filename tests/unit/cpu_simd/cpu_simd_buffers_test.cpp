// The cpu-simd plugin's buffers (allocated and imported) and fences through
// its C ABI.
#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

// The shared fixture under a suite name of its own (gtest wants one fixture
// type per suite, and the fixture header's types are per translation unit).
class CpuSimdBuffers : public CpuSimdPlugin {};

// ---------------------------------------------------------------- buffers and fences

// y = Relu(x) on f32[3, 4].
BlobGraph relu_3x4() {
  BlobGraph g;
  g.tensors = {{LOOM_DTYPE_F32, {3, 4}}, {LOOM_DTYPE_F32, {3, 4}}};
  g.inputs = {0};
  g.outputs = {1};
  BlobNode relu;
  relu.op = Op::kRelu;
  relu.inputs = {0};
  relu.outputs = {1};
  g.nodes = {relu};
  return g;
}

TEST_F(CpuSimdBuffers, ExecutesOnBuffersAndSignalsTheFence) {
  std::mt19937 rng(8);
  Tensor x = random_tensor({3, 4}, rng);
  loom_executable_t* exe = load(encode(relu_3x4()));
  ASSERT_NE(exe, nullptr);

  loom_buffer_allocate_args_t alloc{};
  alloc.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
  alloc.device = device_;
  alloc.size = 64 + 48;
  alloc.flags = LOOM_BUFFER_HOST_VISIBLE;
  ASSERT_EQ(take(api_, api_->buffer_allocate(&alloc)), "ok");
  loom_buffer_t* buf = alloc.out_buffer;
  loom_buffer_copy_args_t copy{};
  copy.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  copy.buffer = buf;
  copy.buffer_offset = 64;
  copy.host_pointer = x.data.data();
  copy.size = 48;
  ASSERT_EQ(take(api_, api_->buffer_copy_from_host(&copy)), "ok");

  Tensor in = x;
  in.desc.host_data = nullptr;
  in.desc.buffer = buf;
  in.desc.offset = 64;
  Tensor out = zero_tensor({3, 4});
  out.desc.host_data = nullptr;
  out.desc.buffer = buf;  // in place: Relu reads and writes the same slot
  out.desc.offset = 64;

  loom_fence_t* fence = nullptr;
  ASSERT_EQ(take(api_, api_->fence_create(device_, &fence)), "ok");
  bool signaled = true;
  ASSERT_EQ(take(api_, api_->fence_query(fence, &signaled)), "ok");
  EXPECT_FALSE(signaled);
  EXPECT_EQ(take(api_, api_->fence_wait(fence, 1000)),
            code_prefix(LOOM_STATUS_DEADLINE_EXCEEDED) + "fence not signaled within 1000 ns");
  ASSERT_EQ(execute(exe, {&in.desc}, {&out.desc}, fence), "ok");
  ASSERT_EQ(take(api_, api_->fence_query(fence, &signaled)), "ok");
  EXPECT_TRUE(signaled);
  EXPECT_EQ(take(api_, api_->fence_wait(fence, UINT64_MAX)), "ok");

  void* mapped = nullptr;
  ASSERT_EQ(take(api_, api_->buffer_map(buf, &mapped)), "ok");
  const float* y = reinterpret_cast<const float*>(static_cast<const char*>(mapped) + 64);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(y[i], x.data[i] < 0 ? 0.0f : x.data[i]);
  api_->buffer_unmap(buf);

  Tensor past_end = x;
  past_end.desc.host_data = nullptr;
  past_end.desc.buffer = buf;
  past_end.desc.offset = 80;
  EXPECT_EQ(execute(exe, {&past_end.desc}, {&out.desc}),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) +
                "execute: input 0 range [80, +48) exceeds its buffer of 112 bytes");

  copy.buffer_offset = 100;
  EXPECT_EQ(take(api_, api_->buffer_copy_to_host(&copy)),
            code_prefix(LOOM_STATUS_OUT_OF_RANGE) +
                "buffer_copy_to_host: range [100, +48) exceeds the buffer's 112 bytes");

  api_->fence_destroy(fence);
  api_->buffer_free(buf);
  api_->executable_destroy(exe);
  api_->fence_destroy(nullptr);
  api_->buffer_free(nullptr);
  api_->executable_destroy(nullptr);
}

TEST_F(CpuSimdBuffers, ImportedHostMemoryIsUsedInPlace) {
  ASSERT_NE(api_->buffer_import_host, nullptr);
  std::mt19937 rng(9);
  Tensor x = random_tensor({3, 4}, rng);
  loom_executable_t* exe = load(encode(relu_3x4()));
  ASSERT_NE(exe, nullptr);

  // The caller's memory: the input at byte 4 (an odd, unaligned place), the
  // output after it.
  std::vector<float> memory(1 + 12 + 12, -1.0f);
  std::memcpy(memory.data() + 1, x.data.data(), 48);
  loom_buffer_import_args_t import{};
  import.struct_size = LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE;
  import.device = device_;
  import.host_pointer = memory.data();
  import.size = memory.size() * sizeof(float);
  ASSERT_EQ(take(api_, api_->buffer_import_host(&import)), "ok");
  loom_buffer_t* buf = import.out_buffer;
  ASSERT_NE(buf, nullptr);

  Tensor in = x;
  in.desc.host_data = nullptr;
  in.desc.buffer = buf;
  in.desc.offset = 4;
  Tensor out = zero_tensor({3, 4});
  out.desc.host_data = nullptr;
  out.desc.buffer = buf;
  out.desc.offset = 52;
  ASSERT_EQ(execute(exe, {&in.desc}, {&out.desc}), "ok");
  // The results are in the caller's memory, no copy asked for.
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(memory[13 + i], x.data[i] < 0 ? 0.0f : x.data[i]);
  // Mapping gives the caller's address back; copies read and write it.
  void* mapped = nullptr;
  ASSERT_EQ(take(api_, api_->buffer_map(buf, &mapped)), "ok");
  EXPECT_EQ(mapped, static_cast<void*>(memory.data()));
  api_->buffer_unmap(buf);
  const float seven = 7.0f;
  loom_buffer_copy_args_t copy{};
  copy.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  copy.buffer = buf;
  copy.host_pointer = const_cast<float*>(&seven);
  copy.size = sizeof seven;
  ASSERT_EQ(take(api_, api_->buffer_copy_from_host(&copy)), "ok");
  EXPECT_EQ(memory[0], 7.0f);
  copy.buffer_offset = 100;
  EXPECT_EQ(take(api_, api_->buffer_copy_from_host(&copy)),
            code_prefix(LOOM_STATUS_OUT_OF_RANGE) +
                "buffer_copy_from_host: range [100, +4) exceeds the buffer's 100 bytes");
  // Freeing the buffer leaves the caller's memory alone (ASan would see a
  // free of memory the plugin does not own).
  api_->buffer_free(buf);
  EXPECT_EQ(memory[0], 7.0f);

  import.host_pointer = nullptr;
  EXPECT_EQ(take(api_, api_->buffer_import_host(&import)),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) + "buffer_import_host: host_pointer is NULL");
  EXPECT_EQ(import.out_buffer, nullptr);
  import.struct_size = 8;
  EXPECT_TRUE(starts_with(take(api_, api_->buffer_import_host(&import)),
                          code_prefix(LOOM_STATUS_INVALID_ARGUMENT)));
  api_->executable_destroy(exe);
}

TEST_F(CpuSimdBuffers, HostSignaledFenceWakesAWaiter) {
  loom_fence_t* fence = nullptr;
  ASSERT_EQ(take(api_, api_->fence_create(device_, &fence)), "ok");
  std::thread waiter([&] { EXPECT_EQ(take(api_, api_->fence_wait(fence, UINT64_MAX)), "ok"); });
  EXPECT_EQ(take(api_, api_->fence_signal(fence)), "ok");
  waiter.join();
  api_->fence_destroy(fence);
}

TEST_F(CpuSimdBuffers, BadBufferRequestsAreRejected) {
  loom_buffer_allocate_args_t alloc{};
  alloc.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
  alloc.device = device_;
  alloc.size = 16;
  alloc.alignment = 48;
  EXPECT_EQ(take(api_, api_->buffer_allocate(&alloc)),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) +
                "buffer_allocate: alignment 48 is not a power of two");
  alloc.alignment = 0;
  alloc.flags = 8;
  EXPECT_EQ(take(api_, api_->buffer_allocate(&alloc)),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) + "buffer_allocate: unknown flags 8");
  alloc.flags = 0;
  alloc.size = UINT64_MAX;
  std::string s = take(api_, api_->buffer_allocate(&alloc));
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_RESOURCE_EXHAUSTED))) << s;
  EXPECT_EQ(alloc.out_buffer, nullptr);
}

}  // namespace
}  // namespace loom::cpu_simd
