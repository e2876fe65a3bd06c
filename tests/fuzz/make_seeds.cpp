// Writes the binary seeds of tests/fuzz/corpus with the project's own
// writers: `fuzz_make_seeds <corpus dir>` (re)writes
//   irpa/         archives from ArchiveBuilder (data, splat, external entries)
//   graph_codec/  graph.fbs from encode_graph
//   cpu_simd_blob/, vulkan_blob/, fpga_blob/  blobs from each plugin's encoder
// The other corpora are copied from fixtures (programs, ONNX test data) or
// written by hand; tests/fuzz/corpus/README.md says which.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bitstream.hpp"
#include "graph/graph_codec.hpp"
#include "loom/irpa.hpp"
#include "loom/tensor_metadata.hpp"
#include "loom/cpu_simd/blob_format.hpp"
#include "loom/vulkan_compute/blob_format.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "blob_test_util.hpp"

namespace fs = std::filesystem;

namespace {

template <typename Bytes>
void write(const fs::path& dir, const std::string& name, const Bytes& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
}

void irpa_seeds(const fs::path& dir) {
  using namespace loom::io::irpa;
  std::vector<std::byte> data(48);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
  const std::byte pattern[4] = {std::byte{0}, std::byte{0}, std::byte{0x80}, std::byte{0x3f}};
  {
    // The builder aligns data to 64 and pads the file to 4096; an alignment
    // of 16 keeps the seeds small enough to mutate well.
    ArchiveBuilder b(16);
    (void)b.add_data("w", data, loom::io::encode_tensor_metadata(loom::DType::kF32, std::vector<int64_t>{3, 4}));
    (void)b.add_splat("b", 16, std::span(pattern));
    auto bytes = b.write_buffer();
    if (bytes.ok()) write(dir, "data_splat.irpa", *bytes);
  }
  {
    ArchiveBuilder b(16);
    (void)b.add_external("ext", "shard0.bin", 16, 32, R"({"dtype":"i8","shape":[32]})");
    (void)b.add_zero_data("z", 8);
    auto bytes = b.write_buffer();
    if (bytes.ok()) write(dir, "external_zero.irpa", *bytes);
  }
  {
    ArchiveBuilder b(16);
    (void)b.add_data("a", std::span(data).first(8));
    (void)b.add_data("a.b", std::span(data).subspan(8, 8), "opaque");
    auto bytes = b.write_buffer();
    if (bytes.ok()) write(dir, "two_data.irpa", *bytes);
  }
}

std::vector<std::byte> f32_bytes(std::initializer_list<float> values) {
  std::vector<std::byte> out(values.size() * 4);
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

void graph_seeds(const fs::path& dir) {
  using namespace loom::graph;
  using loom::DType;
  auto tensor = [](Graph& g, std::string name, loom::Shape shape, loom::graph::ConstantBytes data = nullptr,
                   DType dtype = DType::kF32) {
    return g.add_tensor(Tensor{std::move(name), dtype, std::move(shape), std::move(data)});
  };
  {
    Graph g;
    g.name = "mlp";
    const int32_t x = tensor(g, "x", {1, 2});
    const int32_t w = tensor(g, "w", {2, 2},
                             std::make_shared<std::vector<std::byte>>(f32_bytes({1, 2, 3, 4})));
    const int32_t h = tensor(g, "h", {1, 2});
    const int32_t y = tensor(g, "y", {1, 2});
    g.inputs = {x};
    g.outputs = {y};
    g.nodes.push_back(Node{"mm", "MatMul", "", 13, {}, {x, w}, {h}});
    g.nodes.push_back(Node{"relu", "Relu", "", 13, {}, {h}, {y}});
    auto bytes = encode_graph(g);
    if (bytes.ok()) write(dir, "matmul_relu.fb", *bytes);
  }
  {
    Graph g;
    g.name = "conv";
    const int32_t x = tensor(g, "x", {1, 1, 3, 3});
    const int32_t w = tensor(g, "w", {1, 1, 2, 2},
                             std::make_shared<std::vector<std::byte>>(f32_bytes({1, 0, 0, 1})));
    const int32_t shape = tensor(g, "shape", {2},
                                 std::make_shared<std::vector<std::byte>>(std::vector<std::byte>(16)),
                                 DType::kI64);
    const int32_t c = tensor(g, "c", {1, 1, 2, 2});
    const int32_t y = tensor(g, "y", {1, 4});
    g.inputs = {x};
    g.outputs = {y};
    loom::AttributeDef pads;
    pads.name = "pads";
    pads.kind = loom::AttributeKind::kInts;
    pads.ints = {0, 0, 0, 0};
    loom::AttributeDef group;
    group.name = "group";
    group.i = 1;
    g.nodes.push_back(Node{"conv", "Conv", "", 13, {pads, group}, {x, w}, {c}});
    // Reshape's shape holds zeros; the encoded bytes are a seed, not a model.
    g.nodes.push_back(Node{"reshape", "Reshape", "", 13, {}, {c, shape}, {y}});
    auto bytes = encode_graph(g);
    if (bytes.ok()) write(dir, "conv_reshape.fb", *bytes);
    else std::fprintf(stderr, "graph seed conv_reshape: %s\n", bytes.status().message().c_str());
  }
}

// Appends a cpu-simd node reading `in` and writing `out` to `g`.
loom::cpu_simd::BlobNode& add_node(loom::cpu_simd::BlobGraph& g, loom::cpu_simd::Op op, std::vector<uint32_t> in,
                                   uint32_t out) {
  loom::cpu_simd::BlobNode n;
  n.op = op;
  n.inputs = std::move(in);
  n.outputs = {out};
  return g.nodes.emplace_back(std::move(n));
}

void cpu_simd_seeds(const fs::path& dir) {
  using namespace loom::cpu_simd;
  auto t = [](BlobGraph& g, std::vector<int64_t> shape, loom_dtype_t dtype = LOOM_DTYPE_F32) {
    BlobTensor bt;
    bt.dtype = dtype;
    bt.shape = std::move(shape);
    g.tensors.push_back(std::move(bt));
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  // Constants: u8 / i8 / i32 bytes, or f32 values.
  auto bytes = [&t](BlobGraph& g, std::vector<int64_t> shape, loom_dtype_t dtype, std::vector<uint8_t> v) {
    const uint32_t i = t(g, std::move(shape), dtype);
    g.tensors[i].constant = true;
    g.tensors[i].bytes = std::move(v);
    return i;
  };
  auto f32 = [&t](BlobGraph& g, std::vector<int64_t> shape, std::vector<float> v) {
    const uint32_t i = t(g, std::move(shape));
    g.tensors[i].constant = true;
    g.tensors[i].data = std::move(v);
    return i;
  };
  {
    BlobGraph g;
    const uint32_t x = t(g, {2, 3}), w = t(g, {3, 2}), b = t(g, {2}), h = t(g, {2, 2}), y = t(g, {2, 2});
    g.tensors[w].constant = true;
    g.tensors[w].data = {1, 2, 3, 4, 5, 6};
    g.inputs = {x, b};
    g.outputs = {y};
    BlobNode gemm{Op::kGemm, {x, w, b}, {h}};
    BlobNode relu{Op::kRelu, {h}, {y}};
    g.nodes = {gemm, relu};
    write(dir, "gemm_relu_v4.blob", encode(g));
    write(dir, "gemm_relu_v2.blob", encode(g, 2));
  }
  {
    BlobGraph g;
    const uint32_t a = t(g, {2, 1, 3}), b = t(g, {4, 1}), c = t(g, {2, 4, 3}), y = t(g, {2, 4, 3});
    g.inputs = {a, b};
    g.outputs = {y};
    BlobNode add{Op::kAdd, {a, b}, {c}};
    BlobNode sm{Op::kSoftmax, {c}, {y}};
    sm.axis = 2;
    g.nodes = {add, sm};
    write(dir, "add_softmax_v4.blob", encode(g));
  }
  {
    // Format 5: an open batch through MatMul, Relu and a Copy with a shape spec.
    BlobGraph g;
    const uint32_t x = t(g, {-1, 3}), w = t(g, {3, 4}), h = t(g, {-1, 4}), r = t(g, {-1, 4});
    const uint32_t y = t(g, {-1, 2, 2});
    g.tensors[w].parameter = true;
    g.inputs = {x, w};
    g.outputs = {y};
    add_node(g, Op::kMatMul, {x, w}, h);
    add_node(g, Op::kRelu, {h}, r);
    add_node(g, Op::kCopy, {r}, y).ints = {-2, 2, -1};
    write(dir, "open_matmul_copy_v5.blob", encode(g));
  }
  {
    // Format 6: Quantize -> QLinearConv (per-channel i8 weights, i32 bias,
    // u8 / i8 / i32 constants) -> Dequantize, and a MatMulInteger with one
    // zero point (present mask 2).
    BlobGraph g;
    const uint32_t x = t(g, {1, 2, 3, 3}), w = t(g, {2, 2, 1, 1}, LOOM_DTYPE_I8);
    const uint32_t a = t(g, {2, 3}, LOOM_DTYPE_U8), bm = t(g, {3, 2}, LOOM_DTYPE_I8);
    const uint32_t s = f32(g, {}, {0.1f}), z = bytes(g, {}, LOOM_DTYPE_U8, {128});
    const uint32_t ws = f32(g, {2}, {0.01f, 0.02f}), wz = bytes(g, {2}, LOOM_DTYPE_I8, {0, 1});
    const uint32_t bias = bytes(g, {2}, LOOM_DTYPE_I32, {1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff});
    const uint32_t bz = bytes(g, {}, LOOM_DTYPE_I8, {3});
    const uint32_t q = t(g, {1, 2, 3, 3}, LOOM_DTYPE_U8), c = t(g, {1, 2, 3, 3}, LOOM_DTYPE_U8);
    const uint32_t y = t(g, {1, 2, 3, 3}), m = t(g, {2, 2}, LOOM_DTYPE_I32);
    g.tensors[w].parameter = true;
    g.inputs = {x, w, a, bm};
    g.outputs = {y, m};
    add_node(g, Op::kQuantizeLinear, {x, s, z}, q);
    add_node(g, Op::kQLinearConv, {q, s, z, w, ws, wz, s, z, bias}, c).ints = {2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    add_node(g, Op::kDequantizeLinear, {c, s, z}, y);
    add_node(g, Op::kMatMulInteger, {a, bm, bz}, m).trans_a = 2;
    write(dir, "qlinear_conv_matmul_integer_v6.blob", encode(g));
  }
  {
    // Format 12: QLinearConvTranspose (stride 2, pads 1, a clamp) between a
    // QuantizeLinear and a DequantizeLinear, its operands constants.
    BlobGraph g;
    const uint32_t x = t(g, {1, 2, 3, 3}), q = t(g, {1, 2, 3, 3}, LOOM_DTYPE_U8);
    const uint32_t s = f32(g, {}, {0.1f}), z = bytes(g, {}, LOOM_DTYPE_U8, {128});
    const uint32_t w = bytes(g, {2, 3, 2, 2}, LOOM_DTYPE_I8, std::vector<uint8_t>(24, 0xfd));
    const uint32_t ws = f32(g, {3}, {0.01f, 0.02f, 0.03f}), wz = bytes(g, {3}, LOOM_DTYPE_I8, {0, 0, 0});
    const uint32_t bias = bytes(g, {3}, LOOM_DTYPE_I32, std::vector<uint8_t>(12, 1));
    const uint32_t c = t(g, {1, 3, 4, 4}, LOOM_DTYPE_U8), y = t(g, {1, 3, 4, 4});
    g.inputs = {x};
    g.outputs = {y};
    add_node(g, Op::kQuantizeLinear, {x, s, z}, q);
    BlobNode& d = add_node(g, Op::kQLinearConvTranspose, {q, s, z, w, ws, wz, s, z, bias}, c);
    d.ints = {2, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0};
    d.trans_a = 1;
    d.floats = {10, 250};
    add_node(g, Op::kDequantizeLinear, {c, s, z}, y);
    write(dir, "qlinear_conv_transpose_v12.blob", encode(g));
  }
  {
    // Format 8: the open form of Resize (nearest asymmetric/floor 2x and
    // linear half_pixel 1.5x over an open map), taps made per binding.
    BlobGraph g;
    const uint32_t x = t(g, {-1, 2, -1, -1}), up = t(g, {-1, 2, -1, -1}), lin = t(g, {-1, 2, -1, -1});
    g.inputs = {x};
    g.outputs = {up, lin};
    BlobNode& a = add_node(g, Op::kResize, {x}, up);
    a.ints = {2, static_cast<int64_t>(ResizeCoordMode::kAsymmetric), static_cast<int64_t>(ResizeRounding::kFloor)};
    a.floats = {1, 1, 2, 2};
    BlobNode& b = add_node(g, Op::kResize, {x}, lin);
    b.ints = {3, static_cast<int64_t>(ResizeCoordMode::kHalfPixel), 0};
    b.floats = {1, 1, 1.5f, 1.5f};
    write(dir, "open_resize_v8.blob", encode(g));
  }
  {
    // Format 9: a bidirectional LSTM with every optional input and clip
    // (X [3, 2, 4], hidden 2), its packed output read by the Slice (Y) and
    // Slice + Copy (Y_h) nodes that compile writes.
    BlobGraph g;
    const uint32_t x = t(g, {3, 2, 4}), w = t(g, {2, 8, 4}), r = t(g, {2, 8, 2}), b = t(g, {2, 16});
    const uint32_t lens = t(g, {2}, LOOM_DTYPE_I32), h0 = t(g, {2, 2, 2}), c0 = t(g, {2, 2, 2}), p = t(g, {2, 6});
    const uint32_t packed = t(g, {5, 2, 2, 2}), y = t(g, {3, 2, 2, 2}), hs = t(g, {1, 2, 2, 2}), yh = t(g, {2, 2, 2});
    g.inputs = {x, w, r, b, lens, h0, c0, p};
    g.outputs = {y, yh};
    BlobNode& l = add_node(g, Op::kLstm, {x, w, r, b, lens, h0, c0, p}, packed);
    l.trans_a = 31;
    l.ints = {2, 0, 2, 0};
    l.floats = {3.0f};
    add_node(g, Op::kSlice, {packed}, y).ints = {0, 0, 0, 0, 1, 1, 1, 1, 3, 2, 2, 2};
    add_node(g, Op::kSlice, {packed}, hs).ints = {3, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2};
    add_node(g, Op::kCopy, {hs}, yh);
    write(dir, "lstm_bidirectional_v9.blob", encode(g));
  }
  {
    // Format 9: a reverse GRU (linear_before_reset 1, layout 1, B and
    // initial_h; X [2, 3, 4], hidden 2) and an RNN on its Y_h.
    BlobGraph g;
    const uint32_t x = t(g, {2, 3, 4}), w = t(g, {1, 6, 4}), r = t(g, {1, 6, 2}), b = t(g, {1, 12}), h0 = t(g, {2, 1, 2});
    const uint32_t packed = t(g, {2, 4, 1, 2}), hs = t(g, {2, 1, 1, 2}), yh = t(g, {2, 1, 2});
    const uint32_t w2 = t(g, {1, 2, 2}), r2 = t(g, {1, 2, 2}), packed2 = t(g, {3, 1, 1, 2});
    g.inputs = {x, w, r, b, h0, w2, r2};
    g.outputs = {packed2};
    BlobNode& gru = add_node(g, Op::kGru, {x, w, r, b, h0}, packed);
    gru.trans_a = 5;
    gru.ints = {1, 1, 2, 1};
    add_node(g, Op::kSlice, {packed}, hs).ints = {0, 3, 0, 0, 1, 1, 1, 1, 2, 1, 1, 2};
    add_node(g, Op::kCopy, {hs}, yh);
    add_node(g, Op::kRnn, {yh, w2, r2}, packed2).ints = {0, 0, 2, 0};
    write(dir, "gru_rnn_v9.blob", encode(g));
  }
}

void vulkan_seeds(const fs::path& dir) {
  using namespace loom::vulkan;
  auto add = [](BlobProgram& p, TensorKind kind, std::vector<int64_t> shape) {
    BlobTensor t;
    t.kind = kind;
    t.shape = std::move(shape);
    p.tensors.push_back(t);
    return static_cast<uint32_t>(p.tensors.size() - 1);
  };
  {
    BlobProgram p;
    const uint32_t x = add(p, TensorKind::kInput, {3, 4});
    const uint32_t w = add(p, TensorKind::kConstant, {4, 2});
    p.data.assign(32, 0);
    const uint32_t h = add(p, TensorKind::kIntermediate, {3, 2});
    const uint32_t y = add(p, TensorKind::kOutput, {3, 2});
    p.inputs = {x};
    p.outputs = {y};
    MatMulParams mp;
    mp.m = 3; mp.n = 2; mp.k = 4; mp.a_stride = 12;
    p.dispatches.push_back(make_matmul(mp, x, w, 0, h));
    p.dispatches.push_back(make_unary(UnaryOp::kSigmoid, h, y, 6));
    write(dir, "matmul_sigmoid.blob", encode(p));
  }
  {
    BlobProgram p;
    const uint32_t a = add(p, TensorKind::kInput, {2, 3});
    const uint32_t b = add(p, TensorKind::kInput, {2, 3});
    const uint32_t s = add(p, TensorKind::kIntermediate, {2, 3});
    const uint32_t y = add(p, TensorKind::kOutput, {2, 3});
    p.inputs = {a, b};
    p.outputs = {y};
    p.dispatches.push_back(make_binary(BinaryOp::kAdd, a, b, s, {2, 3}, {3, 1}, {3, 1}));
    p.dispatches.push_back(make_softmax(s, y, 2, 3, 1, false));
    write(dir, "add_softmax.blob", encode(p));
  }
  {
    // Format 4: dtypes and the int8 kernels (f32 -> quantize u8 -> qconv
    // u8 x i8 -> i8 -> dequantize f32), its tables filled with ones.
    BlobProgram p = loom::vulkan::test_util::int8_program();
    p.data.assign(p.data.size(), 1);
    write(dir, "int8_qconv_v4.blob", encode(p));
  }
  {
    // Format 3: an open graph (batch and spatial size open), Conv, Relu,
    // MaxPool, Reshape [0, -1] and Softmax, as compile writes it.
    using namespace loom::graph;
    using loom::DType;
    Graph g;
    g.name = "open_cnn";
    auto tensor = [&](std::string name, loom::Shape shape, loom::graph::ConstantBytes data = nullptr,
                      DType dtype = DType::kF32) {
      return g.add_tensor(Tensor{std::move(name), dtype, std::move(shape), std::move(data)});
    };
    auto bytes_of = [](const auto& v) {
      auto b = std::make_shared<std::vector<std::byte>>(v.size() * sizeof(v[0]));
      std::memcpy(b->data(), v.data(), b->size());
      return b;
    };
    const int32_t x = tensor("x", {-1, 1, -1, -1});
    const int32_t w = tensor("w", {2, 1, 3, 3}, bytes_of(std::vector<float>(18, 0.5f)));
    const int32_t target = tensor("target", {2}, bytes_of(std::vector<int64_t>{0, -1}), DType::kI64);
    const int32_t c = tensor("c", {-1, 2, -1, -1}), r = tensor("r", {-1, 2, -1, -1});
    const int32_t m = tensor("m", {-1, 2, -1, -1}), f = tensor("f", {-1, -1}), y = tensor("y", {-1, -1});
    g.inputs = {x};
    g.outputs = {y};
    loom::AttributeDef pads;
    pads.name = "pads";
    pads.kind = loom::AttributeKind::kInts;
    pads.ints = {1, 1, 1, 1};
    loom::AttributeDef kernel;
    kernel.name = "kernel_shape";
    kernel.kind = loom::AttributeKind::kInts;
    kernel.ints = {2, 2};
    loom::AttributeDef strides = kernel;
    strides.name = "strides";
    g.nodes.push_back(Node{"conv", "Conv", "", 13, {pads}, {x, w}, {c}});
    g.nodes.push_back(Node{"relu", "Relu", "", 13, {}, {c}, {r}});
    g.nodes.push_back(Node{"pool", "MaxPool", "", 13, {kernel, strides}, {r}, {m}});
    g.nodes.push_back(Node{"flat", "Reshape", "", 13, {}, {m, target}, {f}});
    g.nodes.push_back(Node{"softmax", "Softmax", "", 13, {}, {f}, {y}});
    EncodeOptions open;
    open.open = true;  // open dimensions (-1), as plugins serving open shapes get them
    auto bytes = encode_graph(g, open);
    if (bytes.ok()) {
      write(dir, "open_cnn_v3.blob", encode_open(bytes->data(), bytes->size()));
    } else {
      std::fprintf(stderr, "vulkan seed open_cnn_v3: %s\n", bytes.status().message().c_str());
    }
  }
}

void fpga_seeds(const fs::path& dir) {
  using namespace loom::fpga_stub;
  struct Builder {
    Bitstream bs;
    uint32_t add(loom_dtype_t dtype, std::vector<int64_t> shape, Storage storage) {
      BsTensor t;
      t.dtype = dtype;
      t.storage = storage;
      t.bytes = is_open(shape) ? 0 : element_count(shape) * dtype_size(dtype);
      t.shape = std::move(shape);
      if (is_open(t.shape)) {
        // Format 2: an open tensor records 0 bytes at offset 0.
      } else if (storage == Storage::kConst) {
        t.offset = bs.weights.size();
        bs.weights.resize((bs.weights.size() + t.bytes + 63) / 64 * 64, std::byte{1});
      } else if (storage == Storage::kScratch) {
        t.offset = bs.activation_bytes;
        bs.activation_bytes += (t.bytes + 63) / 64 * 64;
      }
      bs.tensors.push_back(std::move(t));
      return static_cast<uint32_t>(bs.tensors.size() - 1);
    }
  };
  {
    Builder b;
    const uint32_t x = b.add(LOOM_DTYPE_F32, {4}, Storage::kIo);
    const uint32_t y = b.add(LOOM_DTYPE_F32, {4}, Storage::kIo);
    b.bs.inputs = {x};
    b.bs.outputs = {y};
    b.bs.nodes.push_back({Op::kRelu, {static_cast<int32_t>(x)}, static_cast<int32_t>(y), {}});
    write(dir, "relu.bin", encode(b.bs));
  }
  {
    Builder b;
    const uint32_t x = b.add(LOOM_DTYPE_F32, {1, 1, 4, 4}, Storage::kIo);
    const uint32_t w = b.add(LOOM_DTYPE_F32, {2, 1, 3, 3}, Storage::kConst);
    const uint32_t c = b.add(LOOM_DTYPE_F32, {1, 2, 4, 4}, Storage::kScratch);
    const uint32_t p = b.add(LOOM_DTYPE_F32, {1, 2, 2, 2}, Storage::kScratch);
    const uint32_t y = b.add(LOOM_DTYPE_F32, {1, 8}, Storage::kIo);
    b.bs.inputs = {x};
    b.bs.outputs = {y};
    auto i = [](uint32_t t) { return static_cast<int32_t>(t); };
    b.bs.nodes.push_back({Op::kConv, {i(x), i(w), -1}, i(c), {1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}});
    b.bs.nodes.push_back({Op::kMaxPool, {i(c)}, i(p), {1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0}});
    b.bs.nodes.push_back({Op::kFlatten, {i(p)}, i(y), {}});
    const auto bytes = encode(b.bs);
    Bitstream check;
    Status s = decode(bytes.data(), bytes.size(), &check);
    if (!s.ok()) std::fprintf(stderr, "fpga seed conv_pool_flatten: %s\n", s.message().c_str());
    write(dir, "conv_pool_flatten.bin", bytes);
  }
  {
    // Format 2 (open shapes): N, H and W open, bound per execution.
    Builder b;
    const uint32_t x = b.add(LOOM_DTYPE_F32, {-1, 1, -1, -1}, Storage::kIo);
    const uint32_t w = b.add(LOOM_DTYPE_F32, {2, 1, 3, 3}, Storage::kConst);
    const uint32_t c = b.add(LOOM_DTYPE_F32, {-1, 2, -1, -1}, Storage::kScratch);
    const uint32_t y = b.add(LOOM_DTYPE_F32, {-1, 2, -1, -1}, Storage::kIo);
    b.bs.inputs = {x};
    b.bs.outputs = {y};
    auto i = [](uint32_t t) { return static_cast<int32_t>(t); };
    b.bs.nodes.push_back({Op::kConv, {i(x), i(w), -1}, i(c), {1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}});
    b.bs.nodes.push_back({Op::kMaxPool, {i(c)}, i(y), {1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0}});
    const auto bytes = encode(b.bs);
    Bitstream check;
    Status s = decode(bytes.data(), bytes.size(), &check);
    if (!s.ok()) std::fprintf(stderr, "fpga seed open_conv_pool: %s\n", s.message().c_str());
    write(dir, "open_conv_pool.bin", bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  irpa_seeds(root / "irpa");
  graph_seeds(root / "graph_codec");
  cpu_simd_seeds(root / "cpu_simd_blob");
  vulkan_seeds(root / "vulkan_blob");
  fpga_seeds(root / "fpga_blob");
  return 0;
}
