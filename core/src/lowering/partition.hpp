// Partitioning: which nodes run on which target plugin, cut into subgraphs.
//
// Input: the imported graph and, per target in order of preference, the
// answer of its compile_supported (one flag per node). A node goes to the
// first target that supports it, otherwise to the reference kernels.
//
// Grouping (greedy, in topological order, with a reachability check): every
// node visited joins an existing group of its target when that creates no
// cycle between groups, otherwise it opens a new one; each reference node is
// a group of its own. Joining v to group G would make a cycle exactly when
// v depends on a group H != G that itself (transitively) depends on G: G
// would then run both before H (H needs G) and after it (v in G needs H).
// We keep, per group, the set of groups it transitively depends on (a
// bitset), so the check is one lookup per predecessor group. Candidates are
// tried in this order: the groups of v's producers (so chains stay
// together), then the other groups of the target, newest first (so
// independent branches join one subgraph). Groups are then ordered
// topologically (Kahn; ties by their first node), which is the program's
// instruction order.
//
// Each plugin group becomes a graph::Graph of its own (see make_subgraph).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/graph.hpp"
#include "graph/graph_codec.hpp"
#include "loom/status.hpp"

namespace loom::lowering {

inline constexpr int kReferenceTarget = -1;

struct Group {
  int target = kReferenceTarget;  // index into the targets, or kReferenceTarget
  std::vector<size_t> nodes;      // node indices, in topological order
};

struct Partition {
  std::vector<int> node_target;  // per node: target index or kReferenceTarget
  std::vector<Group> groups;     // in execution order
};

// `supported[t][n]`: target t can compile node n. Errors when a row's size
// is not the node count. `one_node_per_group`: every plugin node opens a
// group of its own, as reference nodes do (CompileOptions::one_node_per_subgraph).
Result<Partition> partition_graph(const graph::Graph& graph,
                                  const std::vector<std::vector<bool>>& supported,
                                  bool one_node_per_group = false);

// A plugin group cut out as a graph of its own. Its tensors are copies of
// the whole graph's (constants share their bytes); `inputs` are the tensors
// it reads that something outside produces (graph inputs, other groups'
// outputs), in order of first use; constants it reads stay constants (the
// codec writes large ones as parameters); `outputs` are the tensors it
// produces that a node outside the group or the graph's outputs read.
struct Subgraph {
  graph::Graph graph;
  // For each subgraph tensor, the whole graph's tensor index.
  std::vector<int32_t> tensor_origin;
  // The whole graph's tensors the compiled blob takes and gives, in execute
  // order: the subgraph's inputs, then its parameter constants (in tensor
  // order, as encode_graph appends them).
  std::vector<int32_t> call_inputs;
  std::vector<int32_t> call_outputs;
};

Result<Subgraph> make_subgraph(const graph::Graph& graph, const Group& group,
                               const graph::EncodeOptions& encode, const std::string& name);

}  // namespace loom::lowering
