#include "open_graph.hpp"

#include <utility>

#include "compile.hpp"

namespace loom::vulkan {

Status OpenGraph::make(const void* blob, size_t size, const std::string& int8_unavailable,
                       std::unique_ptr<OpenGraph>* out) {
  const uint8_t* graph = nullptr;
  size_t graph_size = 0;
  std::string error;
  if (!decode_open(blob, size, &graph, &graph_size, &error)) {
    return sdk::incompatible("vulkan-compute open blob rejected: " + error);
  }
  std::unique_ptr<OpenGraph> g(new OpenGraph());
  // A copy: the flatbuffer is read at its own alignment, whatever the blob's.
  g->bytes_.assign(graph, graph + graph_size);
  Status s = sdk::GraphView::open(g->bytes_.data(), g->bytes_.size(), &g->graph_, true);
  if (!s.ok()) return sdk::incompatible("vulkan-compute open blob rejected: " + s.message());
  g->int8_unavailable_ = int8_unavailable;
  s = check_open_graph(g->graph_, int8_unavailable);
  if (!s.ok()) return sdk::incompatible("vulkan-compute open blob rejected: " + s.message());
  *out = std::move(g);
  return Status();
}

Status OpenGraph::input_shapes(const loom_tensor_t* const* inputs, size_t count, std::vector<Shape>* out) const {
  if (count != graph_.input_count()) {
    return sdk::invalid_argument("execute: the executable takes " + std::to_string(graph_.input_count()) +
                                 " inputs, got " + std::to_string(count));
  }
  out->resize(count);
  for (size_t i = 0; i < count; ++i) {
    const loom_tensor_t& t = *inputs[i];
    Shape& s = (*out)[i];
    s.assign(t.shape, t.shape + t.rank);
    const sdk::TensorView declared = graph_.input(i);
    const Shape want = declared.shape();
    bool fits = s.size() == want.size();
    for (size_t d = 0; fits && d < s.size(); ++d) fits = s[d] >= 0 && (want[d] < 0 || want[d] == s[d]);
    if (!fits) {
      return sdk::invalid_argument("execute: input " + std::to_string(i) + " (" + declared.name() + ") has shape " +
                                   shape_text(s) + ", which does not fit the declared " + shape_text(want) +
                                   " (-1: open)");
    }
  }
  return Status();
}

std::string OpenGraph::binding_text(const std::vector<Shape>& inputs) const {
  std::string text;
  for (size_t i = 0; i < inputs.size() && i < graph_.input_count(); ++i) {
    if (!graph_.input(i).is_open()) continue;  // parameters and fixed inputs say nothing
    text += (text.empty() ? "" : ", ") + graph_.input(i).name() + "=" + shape_text(inputs[i]);
  }
  return text.empty() ? "(no open input)" : text;
}

Status OpenGraph::bind(const std::vector<Shape>& inputs, BlobProgram* program, std::vector<Shape>* outputs) const {
  std::vector<Shape> shapes(graph_.tensor_count());
  for (size_t t = 0; t < shapes.size(); ++t) shapes[t] = graph_.tensor(t).shape();
  for (size_t i = 0; i < inputs.size(); ++i) shapes[static_cast<size_t>(graph_.input(i).index())] = inputs[i];
  Status s = bind_graph(graph_, int8_unavailable_, &shapes, program);
  if (!s.ok()) return {s.code(), "execute: at binding " + binding_text(inputs) + ": " + s.message()};
  outputs->clear();
  for (size_t i = 0; i < graph_.output_count(); ++i) {
    outputs->push_back(shapes[static_cast<size_t>(graph_.output(i).index())]);
  }
  return Status();
}

}  // namespace loom::vulkan
