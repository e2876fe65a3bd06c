// The recurrent steps (blob format 9): one kRnn step per LSTM node, on
// plain layouts, computed as an input projection over all time steps (one
// product with W), then per step a small product with R and the gates in
// one vectorized pass (schedule_rnn.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.hpp"

namespace loom::cpu_simd {

struct RnnOnednn;  // schedule_rnn.cpp: oneDNN's lstm_forward and its packed weights

struct RnnStep {
  std::string where;  // "node 3 (LSTM)", for run-time errors
  RnnForm form;
  bool avx2 = false;  // the AVX2+FMA build of the loops (CPUID)
  // oneDNN's lstm_forward, where the node's form allows it (see
  // make_rnn_step); the plugin's own loops otherwise.
  std::shared_ptr<RnnOnednn> onednn;
};

// Plans node `index` (a kLstm node validate() accepted). With `onednn` (the
// plugin's cpu.onednn), a node whose W and R are fixed (`fixed[t]`: tensor t
// is a constant or a parameter), forward or reverse, layout 0, without
// clip, input_forget, sequence_lens or peepholes, and with at least one step
// runs on oneDNN's lstm_forward (faster on the development machine:
// benchmarks/README.md); its weights are reordered into oneDNN's gate order
// and layout once (again when bound at another address). `wide`: the plugin's
// kernels may use more than baseline x86-64 (cpu.isa), so the own loops take
// their AVX2+FMA build where the CPU has it.
sdk::Status make_rnn_step(const BlobGraph& graph, size_t index, bool onednn, bool wide,
                          const std::vector<bool>& fixed, std::shared_ptr<RnnStep>* out);

// Runs it: `ins` are the node's inputs in blob order, `out` the packed
// output. INVALID_ARGUMENT naming the node when sequence_lens holds a length
// outside [0, seq].
sdk::Status run_rnn_step(const RnnStep& step, const std::vector<const void*>& ins, float* out);

}  // namespace loom::cpu_simd
