// The execution schedule of a cpu-simd executable: what runs, in which order,
// on which memory. Built once when a blob is loaded, from the validated graph:
//
//  - Fusion. Conv (2-D) with its BatchNormalization, an activation, a
//    residual Add and a second activation becomes one oneDNN convolution with
//    post-ops; MatMul / Gemm with constant weights, a bias Add and an
//    activation becomes one oneDNN matmul. A node is fused only into a
//    producer whose output nothing else reads. MatMul's fusions include the
//    exporters' Erf GELU (a gelu_erf post-op), and the exporters' LayerNorm
//    (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add over the
//    last axis) becomes one step of the plain kernels.
//  - Layout. Activations that convolutions produce and read stay channels-
//    last (NHWC) inside the executable, which is what oneDNN's convolutions,
//    depthwise included, run fastest on; elementwise, Concat (channels),
//    pooling and GlobalAveragePool work on either layout. A reorder is
//    planned only where a tensor meets an operator that needs the other
//    layout, and graph inputs and outputs are always plain (row-major).
//  - Weights. Conv and MatMul weights that are blob constants or parameters
//    (format 3's flag: the same bytes on every execute) are reordered once
//    into the layout oneDNN chose, with BatchNormalization folded in, the
//    first time an execute binds them, and again only if a later execute
//    binds a parameter at a different address.
//  - Memory. Intermediates share one scratch arena, placed by lifetime.
//  - Quantized operators (format 6) are one kInt8 step each
//    (schedule_int8.hpp), on plain layouts.
//
// Every other node runs the plain kernels of ops.cpp / ops_nn.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.hpp"
#include "ops.hpp"
#include "thread_pool.hpp"

namespace loom::cpu_simd {

enum class Layout : uint8_t { kPlain, kNhwc };

// One piece of memory a step reads or writes: a blob tensor in one layout,
// or a scratch tensor of the schedule's own.
struct Slot {
  std::vector<int64_t> shape;  // logical (ONNX) shape
  Layout layout = Layout::kPlain;
  uint64_t bytes = 0;
  // Bound per execute (graph input or output) or a blob constant: not in
  // the arena.
  bool external = false;
  int64_t offset = -1;  // arena offset of an internal slot; -1 if unused
};

struct DnnlStep;  // schedule.cpp: the oneDNN primitive of a step
struct DnnlArena;

enum class StepKind : uint8_t {
  kNode, kConv, kMatMul, kPool, kReorder, kGlobalAverageNhwc, kLayerNorm,
  kInt8,  // a quantized operator (schedule_int8.hpp)
  kRnn,   // a recurrent operator (schedule_rnn.hpp)
  kTable,    // 8-bit values through a table of 256 (plan::QuantTable)
  kQuantAdd  // two 8-bit tensors added and quantized in one pass (plan::QuantAdd)
};

struct Int8Step;
struct RnnStep;

struct Step {
  StepKind kind = StepKind::kNode;
  NodePlan plan;               // kNode: slot ids in inputs / output
  std::vector<uint32_t> ins;   // slot ids read (for lifetimes and the oneDNN steps)
  uint32_t out = 0;            // slot id written
  std::vector<size_t> nodes;   // blob nodes this step computes
  std::shared_ptr<DnnlStep> dnnl;
  std::shared_ptr<Int8Step> int8;  // kInt8
  std::shared_ptr<RnnStep> rnn;    // kRnn
  std::vector<uint8_t> table;      // kTable: the output byte of each input byte
  // kTable of a Concat (plan.op): per input, its table, or empty: copied.
  std::vector<std::vector<uint8_t>> concat_tables;
  QuantAddParams quant_add;        // kQuantAdd: the scales and zero points
  // kLayerNorm: rows x n, epsilon, and whether ins[1] / ins[2] hold gamma
  // and beta.
  int64_t rows = 0, n = 0;
  float epsilon = 0;
  bool has_gamma = false, has_beta = false;
};

// Per-execution state: the oneDNN stream, memory objects and scratchpad.
class ScheduleArena;
struct ScheduleArenaDeleter {
  void operator()(ScheduleArena* a) const;
};
using ScheduleArenaPtr = std::unique_ptr<ScheduleArena, ScheduleArenaDeleter>;

// Weights packed into oneDNN's layouts, shared by the schedules of one
// open-shape executable (one schedule per binding): a schedule packing a
// weight from the same source tensors, into the same layout, with the same
// folding, reuses the packed bytes instead of reordering again. Entries live
// as long as the store. Thread-safe.
class PackedWeights;
std::shared_ptr<PackedWeights> make_packed_weights();
// Packs done and packs reused so far (for tests and logs).
void packed_weights_counts(const PackedWeights& store, size_t* out_packed, size_t* out_reused);

class Schedule {
 public:
  // `graph` passed decode(); `threads` bounds oneDNN's parallelism;
  // `onednn` false plans every node on the plain kernels, in plain layout.
  // `kernels` runs the nodes left to the plain kernels.
  // `shared`, when not null, holds the packed weights (see PackedWeights).
  static sdk::Status build(const BlobGraph& graph, size_t threads, bool onednn, Kernels kernels,
                           std::unique_ptr<Schedule>* out,
                           std::shared_ptr<PackedWeights> shared = nullptr);
  ~Schedule();

  size_t slot_count() const { return slots_.size(); }
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Step>& steps() const { return steps_; }
  uint64_t scratch_bytes() const { return scratch_bytes_; }
  // Weights held in oneDNN's layouts once packed: how many tensors, their
  // bytes, and the bytes of the program's tensors they were packed from
  // (weights, bias and folded BatchNormalization), which runs then no
  // longer read.
  size_t packed_count() const;
  uint64_t packed_bytes() const;
  uint64_t packed_source_bytes() const;

  // A fresh per-execution state.
  ScheduleArenaPtr make_arena() const;

  // Runs every step. `slots[i]` points at slot i's memory: internal slots
  // are set by make_arena, external ones by the caller before each run.
  sdk::Status run(ScheduleArena& arena, float* const* slots, ThreadPool& pool);

  // One line per step ("conv+bn+relu nodes 3,4,5 nhwc"), for tests and logs.
  std::string describe() const;

 private:
  Schedule() = default;
  sdk::Status pack_weights(Step& step, float* const* slots);

  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  uint64_t scratch_bytes_ = 0;
  size_t threads_ = 1;
  Kernels kernels_;
  std::mutex pack_mutex_;
  std::shared_ptr<PackedWeights> shared_;
};

// OpenMP's worker threads, which run oneDNN's kernels, live until the
// process ends and keep thread-local data of libdnnl: unloading libdnnl (or
// libgomp) with the plugin would leave them pointing into unmapped memory.
// Called when the plugin is created, this keeps both loaded for the rest of
// the process (RTLD_NODELETE); the plugin itself may still be unloaded.
void keep_runtime_resident();

// The instruction set oneDNN's kernels use in this process ("avx512_core",
// "avx2", ...).
std::string onednn_isa();

// Caps the instruction set: `name` is one of avx512_core, avx2, avx, sse41,
// baseline or all. oneDNN's cap is for the process and is accepted only
// before its first kernel is made ("baseline" is sse41 there, oneDNN's
// lowest); `kernels` gets the cap for the plain kernels (plain x86-64 for
// avx, sse41 and baseline).
sdk::Status limit_isa(const std::string& name, KernelIsa* kernels);

}  // namespace loom::cpu_simd
