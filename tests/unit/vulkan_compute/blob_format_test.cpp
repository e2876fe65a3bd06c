// The vulkan-compute blob decoder on its own (no Vulkan): every truncation
// and every flipped record byte of a valid blob is rejected with a message
// or decodes into a program that passes every check. Runs under ASan/UBSan.
#include "loom/vulkan_compute/int8_kernels.hpp"
#include "loom/vulkan_compute/kernels.hpp"

#include <gtest/gtest.h>

#include "blob_test_util.hpp"

namespace loom::vulkan {
namespace {

using test_util::add_tensor;
using test_util::int8_program;

BlobProgram small_program() {
  BlobProgram p;
  auto add = [&](TensorKind kind, std::vector<int64_t> shape) { return add_tensor(&p, kind, std::move(shape)); };
  const uint32_t x = add(TensorKind::kInput, {3, 4});
  const uint32_t w = add(TensorKind::kConstant, {4, 2});
  p.data.assign(32, 0);
  const uint32_t h = add(TensorKind::kIntermediate, {3, 2});
  const uint32_t y = add(TensorKind::kOutput, {3, 2});
  p.inputs = {x};
  p.outputs = {y};
  MatMulParams mp;
  mp.m = 3; mp.n = 2; mp.k = 4; mp.a_stride = 12;
  p.dispatches.push_back(make_matmul(mp, x, w, 0, h));
  p.dispatches.push_back(make_unary(UnaryOp::kSigmoid, h, y, 6));
  return p;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  BlobProgram p;
  std::string error;
  EXPECT_FALSE(decode(bytes.data(), bytes.size(), &p, &error));
  return error;
}

TEST(VulkanBlobFormat, ValidBlobRoundTrips) {
  const BlobProgram p = small_program();
  const std::vector<uint8_t> bytes = encode(p);
  BlobProgram q;
  std::string error;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  ASSERT_EQ(q.tensors.size(), 4u);
  EXPECT_EQ(q.tensors[1].shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(q.dispatches.size(), 2u);
  EXPECT_EQ(q.dispatches[1].push, p.dispatches[1].push);
  EXPECT_EQ(q.data_size, 32u);
}

TEST(VulkanBlobFormat, EveryTruncationIsRejected) {
  const std::vector<uint8_t> bytes = encode(small_program());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_FALSE(error_of(cut).empty()) << n;
  }
  EXPECT_NE(error_of({}).find("shorter than"), std::string::npos);
}

TEST(VulkanBlobFormat, FlippedRecordBytesAreRejectedOrStillConsistent) {
  const std::vector<uint8_t> bytes = encode(small_program());
  for (size_t i = 0; i + 32 < bytes.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = bytes;
      bad[i] ^= mask;
      BlobProgram p;
      std::string error;
      if (!decode(bad.data(), bad.size(), &p, &error)) {
        EXPECT_FALSE(error.empty());
        continue;
      }
      // Accepted: then it must be self-consistent.
      for (size_t d = 0; d < p.dispatches.size(); ++d) EXPECT_TRUE(validate_dispatch(p, d, &error));
    }
  }
}

TEST(VulkanBlobFormat, HeadErrorsNameTheField) {
  std::vector<uint8_t> bytes = encode(small_program());
  std::vector<uint8_t> bad = bytes;
  bad[0] = 'X';
  EXPECT_NE(error_of(bad).find("bad magic"), std::string::npos);
  bad = bytes;
  bad[4] = 9;
  EXPECT_NE(error_of(bad).find("format version 9"), std::string::npos);
  bad = bytes;
  bad[8] = 0xff;
  bad[9] = 0xff;
  bad[10] = 0xff;
  EXPECT_NE(error_of(bad).find("counts out of range"), std::string::npos);
  bad = bytes;
  bad.push_back(0);
  EXPECT_NE(error_of(bad).find("its head describes"), std::string::npos);
}

TEST(VulkanBlobFormat, OpenBlobHeadsAreCheckedAndStaticBlobsStayFormatTwo) {
  // encode() writes format 2 whatever the reader's newest format is.
  const std::vector<uint8_t> fixed = encode(small_program());
  EXPECT_EQ(blob_version(fixed.data(), fixed.size()), kStaticFormatVersion);
  // Format 3 wraps a graph buffer (its bytes are checked by the plugin).
  const std::vector<uint8_t> graph = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<uint8_t> open = encode_open(graph.data(), graph.size());
  ASSERT_EQ(open.size(), kOpenHeadBytes + graph.size());
  EXPECT_EQ(blob_version(open.data(), open.size()), kOpenFormatVersion);
  const uint8_t* at = nullptr;
  size_t size = 0;
  std::string error;
  ASSERT_TRUE(decode_open(open.data(), open.size(), &at, &size, &error)) << error;
  EXPECT_EQ(std::vector<uint8_t>(at, at + size), graph);
  BlobProgram p;
  EXPECT_FALSE(decode(open.data(), open.size(), &p, &error));
  EXPECT_EQ(error, "format version 3 carries an open graph, not a program (decode_open reads it)");
  for (size_t n = 0; n < open.size(); ++n) {
    EXPECT_FALSE(decode_open(open.data(), n, &at, &size, &error)) << n;
    EXPECT_FALSE(error.empty());
  }
  std::vector<uint8_t> bad = open;
  bad[8] = 1;
  EXPECT_FALSE(decode_open(bad.data(), bad.size(), &at, &size, &error));
  EXPECT_EQ(error, "format-3 head: reserved field is 1, not 0");
  EXPECT_FALSE(decode_open(fixed.data(), fixed.size(), &at, &size, &error));
  EXPECT_EQ(error, "format version 2 is not format 3 (an open graph)");
  bad = open;
  bad.push_back(0);
  EXPECT_FALSE(decode_open(bad.data(), bad.size(), &at, &size, &error));
  EXPECT_EQ(error, "format-3 blob of 26 bytes: its head names a graph of 9 bytes (want 10, at least 1)");
}

TEST(VulkanBlobFormat, LayerNormDispatchesAreCheckedAgainstTheirTensors) {
  BlobProgram p;
  auto add = [&](TensorKind kind, std::vector<int64_t> shape) { return add_tensor(&p, kind, std::move(shape)); };
  const uint32_t x = add(TensorKind::kInput, {6, 8});
  const uint32_t scale = add(TensorKind::kInput, {8});
  const uint32_t bias = add(TensorKind::kInput, {7});
  const uint32_t y = add(TensorKind::kOutput, {6, 8});
  p.inputs = {x, scale, bias};
  p.outputs = {y};
  p.dispatches.push_back(make_layernorm(x, scale, scale, y, 6, 8, false, 1e-5f));
  BlobProgram q;
  std::string error;
  std::vector<uint8_t> bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  // A bias of 7 elements for rows of 8.
  p.dispatches[0] = make_layernorm(x, scale, bias, y, 6, 8, true, 1e-5f);
  EXPECT_NE(error_of(encode(p)).find("dispatch 0 (layernorm): rows 6 x n 8 does not match"), std::string::npos)
      << error_of(encode(p));
  // Rows that reach past x.
  p.dispatches[0] = make_layernorm(x, scale, scale, y, 7, 8, false, 1e-5f);
  EXPECT_NE(error_of(encode(p)).find("(layernorm)"), std::string::npos);
  // A bias flag other than 0 or 1.
  p.dispatches[0] = make_layernorm(x, scale, scale, y, 6, 8, false, 1e-5f);
  p.dispatches[0].push[2] = 2;
  EXPECT_NE(error_of(encode(p)).find("bias flag 2"), std::string::npos) << error_of(encode(p));
}

TEST(VulkanBlobFormat, CopyDispatchesReachOnlyTheirTensors) {
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {4, 5});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {4, 3});
  p.inputs = {x};
  p.outputs = {y};
  // Columns 4, 2, 0 of every row: a negative x stride that starts at 4.
  p.dispatches.push_back(make_copy(x, y, {4, 3}, {5, -2}, {3, 1}, 4, 0));
  BlobProgram q;
  std::string error;
  const std::vector<uint8_t> bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  // Starting at column 3, the backwards walk reaches element -1.
  p.dispatches[0] = make_copy(x, y, {4, 3}, {5, -2}, {3, 1}, 3, 0);
  EXPECT_NE(error_of(encode(p)).find("dispatch 0 (copy): operand x reaches element -1"), std::string::npos)
      << error_of(encode(p));
  // A y offset that writes past y.
  p.dispatches[0] = make_copy(x, y, {4, 3}, {5, -2}, {3, 1}, 4, 1);
  EXPECT_NE(error_of(encode(p)).find("operand y reaches element 12, the tensor has 12"), std::string::npos)
      << error_of(encode(p));
  // A count that is not the box's.
  p.dispatches[0] = make_copy(x, y, {4, 3}, {5, -2}, {3, 1}, 4, 0);
  p.dispatches[0].push[0] = 11;
  EXPECT_NE(error_of(encode(p)).find("count 11, dims give 12"), std::string::npos) << error_of(encode(p));
}

TEST(VulkanBlobFormat, ResizeDispatchesAreCheckedAgainstTheirTensorsAndTable) {
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {2, 3});
  const uint32_t table = add_tensor(&p, TensorKind::kInput, {3 * (4 + 5)});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {4, 5});
  p.inputs = {x, table};
  p.outputs = {y};
  p.dispatches.push_back(make_resize(x, table, y, {2, 3}, {4, 5}));
  BlobProgram q;
  std::string error;
  const std::vector<uint8_t> bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  // Input dims larger than x: the clamped taps could reach past it.
  p.dispatches[0] = make_resize(x, table, y, {3, 3}, {4, 5});
  EXPECT_NE(error_of(encode(p)).find("dispatch 0 (resize): x, table and y have 6, 27 and 20 elements; "
                                     "the dims need 9, 27 and 20"),
            std::string::npos)
      << error_of(encode(p));
  // A table too short for the output coordinates.
  p.tensors[table].shape = {26};
  p.dispatches[0] = make_resize(x, table, y, {2, 3}, {4, 5});
  EXPECT_NE(error_of(encode(p)).find("(resize)"), std::string::npos);
  // An empty input axis (the taps clamp to dim - 1), and a dimension past
  // the rank.
  p.tensors[table].shape = {27};
  p.dispatches[0].push[2] = 0;
  EXPECT_NE(error_of(encode(p)).find("dimension 0 is empty"), std::string::npos) << error_of(encode(p));
  p.dispatches[0] = make_resize(x, table, y, {2, 3}, {4, 5});
  p.dispatches[0].push[2 + 2] = 1;
  EXPECT_NE(error_of(encode(p)).find("dimension 2 is past the rank"), std::string::npos) << error_of(encode(p));
  // Workgroups that are not the kernel's.
  p.dispatches[0] = make_resize(x, table, y, {2, 3}, {4, 5});
  p.dispatches[0].groups[0] = 2;
  EXPECT_NE(error_of(encode(p)).find("workgroups"), std::string::npos) << error_of(encode(p));
}

TEST(VulkanBlobFormat, ConvTransposeDispatchesAreCheckedAgainstTheirTensors) {
  BlobProgram p;
  ConvParams c;
  c.n = 1; c.c = 4; c.h = 3; c.w = 3; c.m = 6; c.oh = 7; c.ow = 7; c.kh = 3; c.kw = 3;
  c.sh = 2; c.sw = 2; c.group = 2; c.bias = true;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {1, 4, 3, 3});
  const uint32_t w = add_tensor(&p, TensorKind::kInput, {4, 3, 3, 3});
  const uint32_t b = add_tensor(&p, TensorKind::kInput, {6});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {1, 6, 7, 7});
  p.inputs = {x, w, b};
  p.outputs = {y};
  p.dispatches.push_back(make_conv_transpose(c, x, w, b, y));
  BlobProgram q;
  std::string error;
  const std::vector<uint8_t> bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  // W laid out for one group ([C, M, KH, KW]) is larger than the tensor.
  c.group = 1;
  p.dispatches[0] = make_conv_transpose(c, x, w, b, y);
  EXPECT_NE(error_of(encode(p)).find("dispatch 0 (conv_transpose): tensor sizes do not match"), std::string::npos)
      << error_of(encode(p));
  // Channels that do not divide into the groups, a zero stride, an
  // activation flag (the kernel has no epilogue).
  c.group = 4;
  p.dispatches[0] = make_conv_transpose(c, x, w, b, y);
  EXPECT_NE(error_of(encode(p)).find("do not divide into 4 groups"), std::string::npos) << error_of(encode(p));
  c.group = 2;
  p.dispatches[0] = make_conv_transpose(c, x, w, b, y);
  p.dispatches[0].push[9] = 0;
  EXPECT_NE(error_of(encode(p)).find("push constant 9 is 0"), std::string::npos) << error_of(encode(p));
  p.dispatches[0] = make_conv_transpose(c, x, w, b, y);
  p.dispatches[0].push[16] |= 1u << kMatMulActShift;
  EXPECT_NE(error_of(encode(p)).find("unknown flags"), std::string::npos) << error_of(encode(p));
}

// Format 2's split-K convolution: y holds one partial result per slice, the
// slice count is bounded, a split conv takes no activation, and a format-1
// conv (17 push constants) is still read.
TEST(VulkanBlobFormat, SplitConvDispatchesAreCheckedAgainstTheirTensors) {
  BlobProgram p;
  ConvParams c;
  c.n = 1; c.c = 64; c.h = 5; c.w = 5; c.m = 8; c.oh = 5; c.ow = 5; c.kh = 3; c.kw = 3;
  c.pt = 1; c.pl = 1; c.bias = true; c.splits = 3;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {1, 64, 5, 5});
  const uint32_t w = add_tensor(&p, TensorKind::kInput, {8, 64, 3, 3});
  const uint32_t b = add_tensor(&p, TensorKind::kInput, {8});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {3, 8, 5, 5});
  p.inputs = {x, w, b};
  p.outputs = {y};
  p.dispatches.push_back(make_conv(c, x, w, b, y));
  ASSERT_EQ(p.dispatches[0].push.size(), 18u);
  EXPECT_EQ(p.dispatches[0].groups[2], 3u);
  BlobProgram q;
  std::string error;
  std::vector<uint8_t> bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  c.splits = 2;  // y is sized for 3 slices
  p.dispatches[0] = make_conv(c, x, w, b, y);
  EXPECT_NE(error_of(encode(p)).find("dispatch 0 (conv): tensor sizes do not match"), std::string::npos)
      << error_of(encode(p));
  c.splits = 3;
  p.dispatches[0] = make_conv(c, x, w, b, y);
  p.dispatches[0].push[17] = 0;
  EXPECT_NE(error_of(encode(p)).find("splits 0 is outside 1..64"), std::string::npos) << error_of(encode(p));
  p.dispatches[0].push[17] = 65;
  EXPECT_NE(error_of(encode(p)).find("splits 65 is outside 1..64"), std::string::npos) << error_of(encode(p));
  p.dispatches[0] = make_conv(c, x, w, b, y);
  p.dispatches[0].push[16] |= 1u << kMatMulActShift;
  EXPECT_NE(error_of(encode(p)).find("takes no activation"), std::string::npos) << error_of(encode(p));
  // A format-1 conv: 17 push constants, one slice.
  c.splits = 1;
  p.tensors[y].shape = {1, 8, 5, 5};
  p.dispatches[0] = make_conv(c, x, w, b, y);
  EXPECT_EQ(p.dispatches[0].push.size(), 17u);
  bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  // The reduce op that sums the slices and applies Relu; op 4 is unknown.
  const uint32_t partial = add_tensor(&p, TensorKind::kIntermediate, {3, 200});
  p.dispatches.push_back(make_reduce(partial, y, 1, 3, 200, kReduceSumRelu));
  bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  p.dispatches[1].push[3] = 4;
  EXPECT_NE(error_of(encode(p)).find("op 4 is unknown"), std::string::npos) << error_of(encode(p));
}

// direct_conv (format 2): conv's 17 push constants, no splits, one
// invocation per output.
TEST(VulkanBlobFormat, DirectConvDispatchesAreCheckedAgainstTheirTensors) {
  BlobProgram p;
  ConvParams c;
  c.n = 1; c.c = 8; c.h = 6; c.w = 6; c.m = 8; c.oh = 6; c.ow = 6; c.kh = 3; c.kw = 3;
  c.pt = 1; c.pl = 1; c.group = 8; c.bias = true; c.act = 1;
  ASSERT_TRUE(conv_is_direct(c));
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {1, 8, 6, 6});
  const uint32_t w = add_tensor(&p, TensorKind::kInput, {8, 1, 3, 3});
  const uint32_t b = add_tensor(&p, TensorKind::kInput, {8});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {1, 8, 6, 6});
  p.inputs = {x, w, b};
  p.outputs = {y};
  p.dispatches.push_back(make_direct_conv(c, x, w, b, y));
  BlobProgram q;
  std::string error;
  const std::vector<uint8_t> bytes = encode(p);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  p.dispatches[0].push.push_back(2);  // splits are conv's alone
  EXPECT_NE(error_of(encode(p)).find("dispatch 0 (direct_conv): has 4 bindings and 18 push constants"),
            std::string::npos)
      << error_of(encode(p));
  p.dispatches[0] = make_direct_conv(c, x, w, b, y);
  p.dispatches[0].push[4] = 16;  // M: y and w are too small
  EXPECT_NE(error_of(encode(p)).find("tensor sizes do not match"), std::string::npos) << error_of(encode(p));
  c.group = 1;  // one group of 8 channels, 8 outputs each: not direct
  EXPECT_FALSE(conv_is_direct(c));
}

// Format 4: tensor dtypes and the int8 kernels (int8_program, blob_test_util.hpp).

TEST(VulkanBlobFormat, Int8ProgramsAreFormatFourAndRoundTrip) {
  const BlobProgram p = int8_program();
  EXPECT_EQ(program_format(p), kInt8FormatVersion);
  EXPECT_EQ(program_format(small_program()), kStaticFormatVersion);
  const std::vector<uint8_t> bytes = encode(p);
  EXPECT_EQ(blob_version(bytes.data(), bytes.size()), kInt8FormatVersion);
  BlobProgram q;
  std::string error;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &q, &error)) << error;
  ASSERT_EQ(q.tensors.size(), p.tensors.size());
  for (size_t t = 0; t < p.tensors.size(); ++t) EXPECT_EQ(q.tensors[t].dtype, p.tensors[t].dtype) << t;
  EXPECT_EQ(q.tensors[3].bytes(), 54u);  // 3x2x3x3 i8
  EXPECT_EQ(q.dispatches[1].push, p.dispatches[1].push);
  // Every truncation and flipped record byte: rejected or consistent.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_FALSE(error_of(cut).empty()) << n;
  }
  for (size_t i = 0; i + p.data.size() < bytes.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = bytes;
      bad[i] ^= mask;
      BlobProgram r;
      if (!decode(bad.data(), bad.size(), &r, &error)) continue;
      for (size_t d = 0; d < r.dispatches.size(); ++d) EXPECT_TRUE(validate_dispatch(r, d, &error)) << error;
    }
  }
}

TEST(VulkanBlobFormat, DtypesAndInt8KernelsNeedFormatFourAndMatchingTensors) {
  const std::vector<uint8_t> bytes = encode(int8_program());
  // The same records as format 2: a dtype is format 2's reserved field.
  std::vector<uint8_t> bad = bytes;
  bad[4] = 2;
  EXPECT_EQ(error_of(bad), "tensor 2: reserved field is not 0");
  // An int8 kernel in a format-2 blob whose tensors are all f32.
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {4});
  const uint32_t t = add_tensor(&p, TensorKind::kInput, {2});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {4});
  p.inputs = {x, t};
  p.outputs = {y};
  p.dispatches.push_back(make_unary(UnaryOp::kRelu, x, y, 4));
  bad = encode(p);
  ASSERT_EQ(blob_version(bad.data(), bad.size()), kStaticFormatVersion);
  const size_t kernel_at = bad.size() - blob_detail::kDispatchBytes;
  bad[kernel_at] = static_cast<uint8_t>(Kernel::kQuantize);
  EXPECT_EQ(error_of(bad), "dispatch 0: kernel 12 is an int8 kernel of format 4, the blob is format 2");
  // The kernels a load adds on a device with integer dot products (qpack,
  // qconv_dot) are never in a blob, of any format.
  for (Kernel k : {Kernel::kQPack, Kernel::kQConvDot}) {
    BlobProgram own = int8_program();
    own.dispatches.back().kernel = k;
    EXPECT_EQ(error_of(encode(own)), "dispatch " + std::to_string(own.dispatches.size() - 1) + ": unknown kernel " +
                                         std::to_string(static_cast<uint32_t>(k)));
  }
  // A newer format than this reader's.
  bad = bytes;
  bad[4] = static_cast<uint8_t>(kFormatVersion + 1);
  EXPECT_EQ(error_of(bad), "format version 7, this plugin reads 1 to 6");
  // qconv's round-first flag (the fused QDQ form) is format 5: a format-4
  // blob with it is refused; encode writes format 5 for it.
  {
    BlobProgram r = int8_program();
    bool flagged = false;
    for (BlobDispatch& d : r.dispatches) {
      if (d.kernel == Kernel::kQConv) {
        d.push[kQConvTypesPush] |= kQConvRoundFirst;
        flagged = true;
      }
    }
    ASSERT_TRUE(flagged);
    std::vector<uint8_t> five = encode(r);
    ASSERT_EQ(blob_version(five.data(), five.size()), kQdqFormatVersion);
    BlobProgram back;
    std::string why;
    EXPECT_TRUE(decode(five.data(), five.size(), &back, &why)) << why;
    five[4] = static_cast<uint8_t>(kInt8FormatVersion);
    EXPECT_NE(error_of(five).find("qconv's round-first flag is format 5, the blob is format 4"), std::string::npos)
        << error_of(five);
  }
  // An unknown dtype.
  BlobProgram q = int8_program();
  std::vector<uint8_t> unknown = encode(q);
  const size_t dtype_at = blob_detail::kHeadBytes + 2 * blob_detail::kTensorBytes + blob_detail::kTensorBytes - 4;
  ASSERT_EQ(unknown[dtype_at], static_cast<uint8_t>(DType::kU8));
  unknown[dtype_at] = 4;
  EXPECT_EQ(error_of(unknown), "tensor 2: unknown dtype 4");
  // An f32 kernel bound to a u8 tensor.
  q.dispatches.push_back(make_unary(UnaryOp::kRelu, 2, 7, 12));
  q.dispatches.back().push[0] = 32;
  EXPECT_NE(error_of(encode(q)).find("dispatch 3 (unary): binds tensor 2 of u8; the kernel takes f32"),
            std::string::npos)
      << error_of(encode(q));
  // The int8 kernels check their tensors' dtypes, the push constants that
  // name them, zero points and table sizes.
  q = int8_program();
  q.tensors[2].dtype = DType::kI8;  // quantize's y is i8 but the signed flag says u8
  EXPECT_NE(error_of(encode(q)).find("dispatch 0 (quantize): the signed flag does not match y"), std::string::npos)
      << error_of(encode(q));
  q = int8_program();
  q.dispatches[1].push[16] = 300;  // x zero point outside u8
  EXPECT_NE(error_of(encode(q)).find("dispatch 1 (qconv): x zero point 300 is outside x's type"), std::string::npos)
      << error_of(encode(q));
  q = int8_program();
  q.dispatches[1].push[18] = 1 | 1 << 4 | 2 << 8;  // w named u8, but it is i8
  EXPECT_NE(error_of(encode(q)).find("does not match x, w and y"), std::string::npos) << error_of(encode(q));
  q = int8_program();
  q.tensors[4].shape = {6};  // the table of 3 channels has 6 entries
  EXPECT_NE(error_of(encode(q)).find("(table: 3 x M)"), std::string::npos) << error_of(encode(q));
  q = int8_program();
  q.dispatches[1].push[18] |= kQConvBLayout;  // a 3x3 convolution cannot read w as a matmul's B
  EXPECT_NE(error_of(encode(q)).find("a matmul's B layout needs a 1x1 convolution"), std::string::npos)
      << error_of(encode(q));
  q = int8_program();
  q.dispatches[2].push[3] = static_cast<uint32_t>(DType::kU8);  // x is i8
  EXPECT_NE(error_of(encode(q)).find("dispatch 2 (dequantize): the x dtype push constant does not match x"),
            std::string::npos)
      << error_of(encode(q));
}

// qbinary (a quantized Add / Mul, format 5): its op, types and zero points
// are checked against its tensors, and a format-4 blob may not name it.
TEST(VulkanBlobFormat, QBinaryDispatchesAreFormatFiveAndCheckedAgainstTheirTensors) {
  auto program = [](BinaryOp op, DType y_type, int32_t y_zero) {
    BlobProgram p;
    const uint32_t a = add_tensor(&p, TensorKind::kInput, {2, 3});
    const uint32_t b = add_tensor(&p, TensorKind::kInput, {1, 3});
    const uint32_t y = add_tensor(&p, TensorKind::kOutput, {2, 3});
    p.tensors[a].dtype = DType::kU8;
    p.tensors[b].dtype = DType::kI8;
    p.tensors[y].dtype = y_type;
    p.inputs = {a, b};
    p.outputs = {y};
    const float params[3] = {0.5f, 0.25f, 3.0f};
    p.dispatches.push_back(make_qbinary(make_binary(op, a, b, y, {2, 3}, {3, 1}, {0, 1}), a, b, y, DType::kU8,
                                        DType::kI8, DType::kU8, false, 128, -3, y_zero, params));
    return p;
  };
  const std::vector<uint8_t> good = encode(program(BinaryOp::kAdd, DType::kU8, 7));
  ASSERT_EQ(blob_version(good.data(), good.size()), kQdqFormatVersion);
  BlobProgram back;
  std::string why;
  EXPECT_TRUE(decode(good.data(), good.size(), &back, &why)) << why;
  std::vector<uint8_t> four = good;
  four[4] = static_cast<uint8_t>(kInt8FormatVersion);
  EXPECT_EQ(error_of(four), "dispatch 0: kernel 15 (qbinary) is format 5, the blob is format 4");
  EXPECT_EQ(error_of(encode(program(BinaryOp::kSub, DType::kU8, 7))),
            "dispatch 0 (qbinary): qbinary runs Add or Mul, not op 1");
  EXPECT_EQ(error_of(encode(program(BinaryOp::kAdd, DType::kI8, 7))),
            "dispatch 0 (qbinary): the types push constant 289 does not match a, b and y (u8 or i8)");
  EXPECT_EQ(error_of(encode(program(BinaryOp::kMul, DType::kU8, 300))),
            "dispatch 0 (qbinary): zero point 2 (300) is outside its type");
}

// The fused DequantizeLinear -> ConvTranspose -> QuantizeLinear: a qconv
// with the transposed flag, ConvTranspose's geometry and weight layout
// [C, M / group, KH, KW]; format 6, rounding first, u8 / i8 y only.
TEST(VulkanBlobFormat, TransposedQConvDispatchesAreFormatSixAndCheckedAgainstTheirTensors) {
  // x [1, 4, 3, 3] -> y [1, 6, 6, 6]: kernel 4x4, stride 2, pads 1, two groups.
  ConvParams cp;
  cp.n = 1; cp.c = 4; cp.h = 3; cp.w = 3; cp.m = 6; cp.oh = 6; cp.ow = 6;
  cp.kh = 4; cp.kw = 4; cp.sh = 2; cp.sw = 2; cp.dh = 1; cp.dw = 1; cp.pt = 1; cp.pl = 1; cp.group = 2;
  auto program = [&](uint64_t weights, DType y_type, bool b_layout) {
    BlobProgram p;
    const uint32_t x = add_tensor(&p, TensorKind::kInput, {1, 4, 3, 3});
    const uint32_t w = add_tensor(&p, TensorKind::kConstant, {static_cast<int64_t>(weights)});
    const uint32_t t = add_tensor(&p, TensorKind::kConstant, {18});
    const uint32_t y = add_tensor(&p, TensorKind::kOutput, {1, 6, 6, 6});
    p.tensors[x].dtype = DType::kU8;
    p.tensors[w].dtype = DType::kI8;
    p.tensors[t].dtype = DType::kI32;
    p.tensors[y].dtype = y_type;
    p.tensors[t].data_offset = weights;
    p.data.assign(weights + 18 * 4, 0);
    p.inputs = {x};
    p.outputs = {y};
    BlobDispatch d = make_qconv_transpose(cp, x, w, t, y, 3, -2, DType::kU8, DType::kI8, y_type);
    if (b_layout) d.push[kQConvTypesPush] |= kQConvBLayout;
    p.dispatches.push_back(d);
    return p;
  };
  const uint64_t weights = 4 * 3 * 16;  // C x M / group x KH x KW
  const std::vector<uint8_t> good = encode(program(weights, DType::kI8, false));
  ASSERT_EQ(blob_version(good.data(), good.size()), kQDeconvFormatVersion);
  BlobProgram back;
  std::string why;
  ASSERT_TRUE(decode(good.data(), good.size(), &back, &why)) << why;
  EXPECT_TRUE(qconv_transposed(back.dispatches[0]));
  std::vector<uint8_t> five = good;
  five[4] = static_cast<uint8_t>(kQdqFormatVersion);
  EXPECT_EQ(error_of(five), "dispatch 0: qconv's transposed flag is format 6, the blob is format 5");
  EXPECT_NE(error_of(encode(program(weights - 16, DType::kI8, false))).find("dispatch 0 (qconv): tensor sizes do not match"),
            std::string::npos);
  EXPECT_EQ(error_of(encode(program(weights, DType::kI8, true))),
            "dispatch 0 (qconv): a matmul's B layout needs a 1x1 convolution of 1x1 images in one group");
  EXPECT_EQ(error_of(encode(program(weights, DType::kI32, false))),
            "dispatch 0 (qconv): a transposed qconv takes neither the B layout nor an i32 y, and rounds first");
}

TEST(VulkanBlobFormat, Int8FeatureDecisionNamesWhatIsMissing) {
  Int8Features f;
  EXPECT_EQ(int8_missing(f), "shaderInt8, storageBuffer8BitAccess, shaderFloat64");
  f.shader_int8 = f.storage_8bit = true;
  EXPECT_EQ(int8_missing(f), "shaderFloat64");
  f.float64 = true;
  EXPECT_EQ(int8_missing(f), "");  // shaderIntegerDotProduct is not needed
  f.storage_8bit = false;
  EXPECT_EQ(int8_missing(f), "storageBuffer8BitAccess");
}

}  // namespace
}  // namespace loom::vulkan
