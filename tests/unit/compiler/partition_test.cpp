// The partitioner on hand-built graphs: which nodes join which subgraph.
#include "lowering/partition.hpp"

#include <gtest/gtest.h>

#include "graph_test_util.hpp"

namespace loom::lowering {
namespace {

using test::add_constant;
using test::add_input;
using test::binary;
using test::unary;

std::vector<std::vector<size_t>> node_sets(const Partition& p) {
  std::vector<std::vector<size_t>> out;
  for (const Group& g : p.groups) out.push_back(g.nodes);
  return out;
}

// Each group's inputs must be produced by an earlier group.
void expect_executable_order(const graph::Graph& g, const Partition& p) {
  std::vector<bool> ready(g.tensors.size(), false);
  for (int32_t t : g.inputs) ready[t] = true;
  for (size_t t = 0; t < g.tensors.size(); ++t) ready[t] = ready[t] || g.tensors[t].is_constant();
  for (const Group& group : p.groups) {
    std::vector<bool> inside(g.tensors.size(), false);
    for (size_t n : group.nodes) {
      for (int32_t t : g.nodes[n].inputs) {
        if (t >= 0) {
          EXPECT_TRUE(ready[t] || inside[t]) << "tensor " << g.tensors[t].name;
        }
      }
      for (int32_t t : g.nodes[n].outputs) inside[t] = true;
    }
    for (size_t n : group.nodes) {
      for (int32_t t : g.nodes[n].outputs) ready[t] = true;
    }
  }
}

// x -> Relu a -> Sig b -> Relu c -> Sig d -> Relu e
graph::Graph chain(int32_t* x_out = nullptr) {
  graph::Graph g;
  int32_t x = add_input(g, "x", {4});
  int32_t a = unary(g, "Relu", x, "a");
  int32_t b = unary(g, "Sigmoid", a, "b");
  int32_t c = unary(g, "Relu", b, "c");
  int32_t d = unary(g, "Sigmoid", c, "d");
  int32_t e = unary(g, "Relu", d, "e");
  g.outputs = {e};
  if (x_out) *x_out = x;
  return g;
}

TEST(Partition, NoTargetsLeavesEveryNodeToTheReference) {
  graph::Graph g = chain();
  auto p = partition_graph(g, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->groups.size(), 5u);
  for (const Group& group : p->groups) EXPECT_EQ(group.target, kReferenceTarget);
  expect_executable_order(g, *p);
}

TEST(Partition, AllSupportedIsOneSubgraph) {
  graph::Graph g = chain();
  auto p = partition_graph(g, {std::vector<bool>(5, true)});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->groups.size(), 1u);
  EXPECT_EQ(p->groups[0].target, 0);
  EXPECT_EQ(p->groups[0].nodes, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(Partition, OneNodePerGroupGivesEveryPluginNodeItsOwnSubgraph) {
  graph::Graph g = chain();
  auto p = partition_graph(g, {std::vector<bool>(5, true)}, /*one_node_per_group=*/true);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(node_sets(*p), (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}, {4}}));
  for (const Group& group : p->groups) EXPECT_EQ(group.target, 0);
  expect_executable_order(g, *p);
}

TEST(Partition, InterleavedNodesCannotJoin) {
  graph::Graph g = chain();
  auto p = partition_graph(g, {{true, false, true, false, true}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(node_sets(*p), (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}, {4}}));
  EXPECT_EQ(p->groups[0].target, 0);
  EXPECT_EQ(p->groups[1].target, kReferenceTarget);
  expect_executable_order(g, *p);
}

TEST(Partition, FirstTargetInPreferenceOrderWins) {
  graph::Graph g = chain();
  auto p = partition_graph(g, {{true, false, false, false, true}, {true, true, true, false, false}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->node_target, (std::vector<int>{0, 1, 1, kReferenceTarget, 0}));
  EXPECT_EQ(node_sets(*p), (std::vector<std::vector<size_t>>{{0}, {1, 2}, {3}, {4}}));
}

TEST(Partition, DiamondThatWouldMakeACycleIsSplit) {
  // a = Relu(x) [plugin]; b = Sig(a) [reference]; c = Relu(a) [plugin];
  // d = Add(b, c) [plugin]. {a, c, d} would need b's result while b needs a.
  graph::Graph g;
  int32_t x = add_input(g, "x", {4});
  int32_t a = unary(g, "Relu", x, "a");
  int32_t b = unary(g, "Sigmoid", a, "b");
  int32_t c = unary(g, "Relu", a, "c");
  int32_t d = binary(g, "Add", b, c, "d");
  g.outputs = {d};
  auto p = partition_graph(g, {{true, false, true, true}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(node_sets(*p), (std::vector<std::vector<size_t>>{{0, 2}, {1}, {3}}));
  expect_executable_order(g, *p);
}

TEST(Partition, IndependentBranchesJoinOneSubgraph) {
  graph::Graph g;
  int32_t x = add_input(g, "x", {4});
  int32_t y = add_input(g, "y", {4});
  int32_t a = unary(g, "Relu", x, "a");
  int32_t b = unary(g, "Relu", y, "b");
  int32_t c = unary(g, "Sigmoid", a, "c");
  g.outputs = {b, c};
  auto p = partition_graph(g, {{true, true, false}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(node_sets(*p), (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
}

TEST(Partition, LongerCycleThroughTwoReferenceNodes) {
  // a [P] -> r1 [ref] -> r2 [ref] -> c [P](a, r2): c must not join a.
  graph::Graph g;
  int32_t x = add_input(g, "x", {4});
  int32_t a = unary(g, "Relu", x, "a");
  int32_t r1 = unary(g, "Sigmoid", a, "r1");
  int32_t r2 = unary(g, "Sigmoid", r1, "r2");
  int32_t c = binary(g, "Add", a, r2, "c");
  g.outputs = {c};
  auto p = partition_graph(g, {{true, false, false, true}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(node_sets(*p), (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}}));
  expect_executable_order(g, *p);
}

TEST(Partition, WrongAnswerSizeIsAnError) {
  graph::Graph g = chain();
  auto p = partition_graph(g, {std::vector<bool>(3, true)});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("3 nodes of 5"), std::string::npos);
}

TEST(Subgraph, InputsOutputsAndParameters) {
  graph::Graph g;
  int32_t x = add_input(g, "x", {32, 64});
  int32_t w = add_constant<float>(g, "W", {32, 64}, DType::kF32, std::vector<float>(32 * 64, 1.f));
  int32_t s = add_constant<float>(g, "s", {1}, DType::kF32, {2.f});
  int32_t a = binary(g, "Add", x, w, "a");
  int32_t b = binary(g, "Mul", a, s, "b");
  int32_t c = unary(g, "Relu", b, "c");
  int32_t d = unary(g, "Sigmoid", a, "d");
  g.outputs = {c, d};
  Group group{0, {0, 1, 2}};
  auto sub = make_subgraph(g, group, graph::EncodeOptions{}, "sub");
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  EXPECT_EQ(sub->graph.name, "sub");
  // x from outside; W travels as a parameter input, s inline.
  EXPECT_EQ(sub->call_inputs, (std::vector<int32_t>{x, w}));
  // a is read by Sigmoid outside the group, c is a graph output; b is internal.
  EXPECT_EQ(sub->call_outputs, (std::vector<int32_t>{a, c}));
  ASSERT_EQ(sub->graph.inputs.size(), 1u);
  EXPECT_EQ(sub->graph.tensors[sub->graph.inputs[0]].name, "x");
  EXPECT_EQ(sub->graph.outputs.size(), 2u);
  EXPECT_EQ(sub->graph.nodes.size(), 3u);
  (void)s;
}

}  // namespace
}  // namespace loom::lowering
