// The compile side of a plugin: what its optional Plugin members
// compile_supported and compile answer with.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp). It
// needs no flatbuffers; the graph those members read is a loom::sdk::GraphView
// from loom/sdk/graph.hpp, which a compiling plugin includes itself.
//
// A plugin that compiles gives its Plugin class these two members (detected
// at compile time; without them the table's compile entries stay NULL):
//
//   // Which nodes of `graph` this plugin can run exactly as ONNX specifies.
//   Status compile_supported(const loom::sdk::GraphView& graph, loom::sdk::Claims* claims);
//   // One blob that runs all of `graph`.
//   Status compile(const loom::sdk::GraphView& graph, const loom::sdk::Options& options,
//                  loom::sdk::CompiledBlob* out);
//
// The thunks (loom/sdk/thunks.hpp) check the ABI structs, zero every output,
// verify the graph buffer (GraphView::open) and validate the options before
// calling them, and afterwards copy the blob into memory from the host's
// allocator and fill in its loader key and format version. The compiler calls
// both from any thread, also concurrently on one plugin: they must be
// thread-safe (usually they only read the graph and the plugin's settings).
#ifndef LOOM_SDK_COMPILE_HPP_
#define LOOM_SDK_COMPILE_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loom/sdk/status.hpp"

namespace loom::sdk {

// The answer of compile_supported: one flag per node of the graph, all
// unclaimed at the start. Claim a node only if compile will accept every
// subgraph of claimed nodes the compiler may cut around it: the compiler
// groups claimed neighbours into one subgraph and hands it to compile, whose
// failure fails the whole compilation. Borrows the host's array for the call;
// not thread-safe (one call, one Claims).
class Claims {
 public:
  Claims(bool* flags, size_t node_count) : flags_(flags), count_(node_count) {}

  size_t node_count() const { return count_; }

  // Takes node `node`; OUT_OF_RANGE naming the index and the node count
  // when there is no such node.
  Status claim(size_t node) {
    if (node >= count_) return out_of_range_error(node, "claim");
    flags_[node] = true;
    return Status();
  }
  // Gives node `node` back (after a later check finds it unsupported).
  Status release(size_t node) {
    if (node >= count_) return out_of_range_error(node, "release");
    flags_[node] = false;
    return Status();
  }
  // Takes every node.
  void claim_all() {
    for (size_t i = 0; i < count_; ++i) flags_[i] = true;
  }
  // Whether node `node` is claimed (false for an index out of range).
  bool claimed(size_t node) const { return node < count_ && flags_[node]; }
  size_t claimed_count() const {
    size_t n = 0;
    for (size_t i = 0; i < count_; ++i) n += flags_[i] ? 1 : 0;
    return n;
  }

 private:
  Status out_of_range_error(size_t node, const char* what) const {
    return out_of_range(std::string("compile_supported: cannot ") + what + " node " +
                        std::to_string(node) + ": the graph has " + std::to_string(count_) +
                        " nodes");
  }

  bool* flags_;
  size_t count_;
};

// Whether `op` (an ONNX op type) is one of the quantized operators, whose
// declines DeclineNotes reports: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, ConvInteger, MatMulInteger and the QLinear* ones.
inline bool is_quantized_op(const std::string& op) {
  return op == "QuantizeLinear" || op == "DequantizeLinear" || op == "DynamicQuantizeLinear" ||
         op == "ConvInteger" || op == "MatMulInteger" || op.rfind("QLinear", 0) == 0;
}

// Why compile_supported declined the nodes it did, as the info lines
// `loom compile` prints under "notes from the plugins" ("declined: node q0
// (QuantizeLinear): the scale is not an inline constant"): one line per
// distinct reason, naming the first node and how many more it declined for
// it, so that a plugin that runs no quantized node at all says so once.
// Not thread-safe (one compile_supported call, one DeclineNotes).
class DeclineNotes {
 public:
  void add(const std::string& label, const std::string& why) {
    for (Reason& r : reasons_) {
      if (r.why == why) {
        ++r.more;
        return;
      }
    }
    reasons_.push_back({label, why, 0});
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const Reason& r : reasons_) {
      out.push_back("declined: " + r.first + (r.more == 0 ? "" : " and " + std::to_string(r.more) + " more") + ": " +
                    r.why);
    }
    return out;
  }

 private:
  struct Reason {
    std::string first, why;
    size_t more;
  };
  std::vector<Reason> reasons_;
};

// What compile produces. The plugin fills `bytes` (for example with
// BlobWriter::finish from loom/sdk/blob.hpp), names the loader key (one of
// those its info() lists) and the blob's format version (inside that key's
// range); the thunk checks both, copies the bytes into memory from the
// host's allocator (so the host can free it) and returns that key's string
// from info(). An empty blob is refused.
struct CompiledBlob {
  std::vector<uint8_t> bytes;
  std::string loader_key;
  uint32_t format_version = 0;
  // Alignment of the copy the host receives (a power of two). The program
  // writer aligns blob segments itself; this only matters for the compile
  // result in memory.
  size_t alignment = 16;
};

}  // namespace loom::sdk

#endif  // LOOM_SDK_COMPILE_HPP_
