#include "bind.hpp"

#include <string>

#include "node_check.hpp"

namespace loom::fpga_stub {
namespace {

constexpr uint64_t kActivationAlignment = 64;

std::string binding_label(const std::vector<std::vector<int64_t>>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_label(shapes[i]);
  return s;
}

// The shape the bitstream records for a tensor agrees with `got` in rank and
// in every dimension it fixes.
Status fits(const std::vector<int64_t>& recorded, const std::vector<int64_t>& got, const std::string& what) {
  if (got.size() != recorded.size()) {
    return sdk::invalid_argument(what + " has rank " + std::to_string(got.size()) + " " + shape_label(got) +
                                 ", the bitstream takes rank " + std::to_string(recorded.size()) + " " +
                                 shape_label(recorded));
  }
  for (size_t d = 0; d < got.size(); ++d) {
    if (got[d] < 0) {
      return sdk::invalid_argument(what + " dimension " + std::to_string(d) + " is " + std::to_string(got[d]) +
                                   ", not a size");
    }
    if (recorded[d] != -1 && recorded[d] != got[d]) {
      return sdk::invalid_argument(what + " dimension " + std::to_string(d) + " is " + std::to_string(got[d]) +
                                   ", the bitstream fixes it at " + std::to_string(recorded[d]) + " (" +
                                   shape_label(recorded) + ")");
    }
  }
  return Status();
}

Status settle(BsTensor* t, const std::vector<int64_t>& shape, const std::string& what) {
  const uint64_t n = element_count(shape);
  if (n > kMaxElements) return sdk::invalid_argument(what + " would have shape " + shape_label(shape) + ": too many elements");
  t->shape = shape;
  t->bytes = n * dtype_size(t->dtype);
  return Status();
}

}  // namespace

Status bind_shapes(const Bitstream& open, const std::vector<std::vector<int64_t>>& input_shapes, Bitstream* out) {
  if (input_shapes.size() != open.inputs.size()) {
    return sdk::invalid_argument("the bitstream takes " + std::to_string(open.inputs.size()) + " inputs, the binding has " +
                                 std::to_string(input_shapes.size()));
  }
  Bitstream bs;
  bs.tensors = open.tensors;
  bs.nodes = open.nodes;
  bs.inputs = open.inputs;
  bs.outputs = open.outputs;
  for (size_t i = 0; i < bs.inputs.size(); ++i) {
    BsTensor& t = bs.tensors[bs.inputs[i]];
    const std::string what = "input " + std::to_string(i);
    LOOM_SDK_RETURN_IF_ERROR(fits(t.shape, input_shapes[i], what));
    LOOM_SDK_RETURN_IF_ERROR(settle(&t, input_shapes[i], what));
  }
  const std::string at = " at binding " + binding_label(input_shapes);
  for (size_t n = 0; n < bs.nodes.size(); ++n) {
    std::vector<int64_t> shape;
    Status s = infer_node(bs, n, &shape);
    if (!s.ok()) return sdk::invalid_argument(s.message() + at);
    BsTensor& o = bs.tensors[static_cast<size_t>(bs.nodes[n].output)];
    const std::string what = "node " + std::to_string(n) + " (" + op_name(bs.nodes[n].op) + ") output";
    s = fits(o.shape, shape, what);
    if (!s.ok()) return sdk::invalid_argument(s.message() + at);
    LOOM_SDK_RETURN_IF_ERROR(settle(&o, shape, what));
  }
  // Activations laid out again for this binding's sizes.
  for (BsTensor& t : bs.tensors) {
    if (t.storage != Storage::kScratch) continue;
    t.offset = bs.activation_bytes;
    bs.activation_bytes += (t.bytes + kActivationAlignment - 1) / kActivationAlignment * kActivationAlignment;
  }
  *out = std::move(bs);
  return Status();
}

}  // namespace loom::fpga_stub
