// fpga-stub's blob loader: decode() of a bitstream (header, checksum,
// tensor and node tables, storage ranges, I/O lists, check_node on every
// node), which executable_load runs before anything reaches the simulated
// device. What decodes must encode and decode again. An open bitstream
// (format 2) is also bound (bind_shapes) at two bindings of its inputs,
// every open dimension 1 and then 5, and what binds is costed.
//
// Each input is decoded twice: as it is, and with the header's size and
// checksum recomputed (FNV-1a 64 of the bytes after the 64-byte header), so
// that mutations reach the tables instead of stopping at the checksum.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bind.hpp"
#include "bitstream.hpp"
#include "fuzz_support.hpp"
#include "node_check.hpp"

namespace {

using namespace loom::fpga_stub;

void decode_blob(const void* data, size_t size) {
  Bitstream bs;
  Status s = decode(data, size, &bs);
  if (!s.ok()) {
    loom::fuzz::check_refusal(s);
    return;
  }
  // node_cost needs checked nodes: an open bitstream's are checked when bound.
  if (!bs.has_open_dims()) {
    for (const BsNode& node : bs.nodes) (void)node_cost(bs, node);
  } else {
    for (int64_t size : {1, 5}) {
      std::vector<std::vector<int64_t>> shapes;
      for (uint32_t t : bs.inputs) {
        shapes.push_back(bs.tensors[t].shape);
        for (int64_t& d : shapes.back()) d = d == -1 ? size : d;
      }
      Bitstream bound;
      s = bind_shapes(bs, shapes, &bound);
      if (!s.ok()) {
        loom::fuzz::check_refusal(s);
        continue;
      }
      for (const BsNode& node : bound.nodes) (void)node_cost(bound, node);
    }
  }
  const auto bytes = encode(bs);
  Bitstream again;
  s = decode(bytes.data(), bytes.size(), &again);
  if (!s.ok()) loom::fuzz::fail("a decoded bitstream, encoded again, is refused: " + s.message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode_blob(data, size);
  if (size < kHeaderSize) return 0;
  std::vector<uint8_t> fixed(data, data + size);
  const uint64_t total = size;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = kHeaderSize; i < size; ++i) h = (h ^ fixed[i]) * 0x100000001b3ull;
  std::memcpy(fixed.data() + 16, &total, 8);
  std::memcpy(fixed.data() + 56, &h, 8);
  if (std::memcmp(fixed.data(), data, size) != 0) decode_blob(fixed.data(), fixed.size());
  return 0;
}
