// The .irpa reader (ArchiveReader::open_buffer: the header chain, entry
// tables, names, storage ranges), then every entry read back whole and in
// part, and its metadata through the tensor metadata decoder.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_support.hpp"
#include "loom/irpa.hpp"
#include "loom/tensor_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  auto reader = io::irpa::ArchiveReader::open_buffer(fuzz::bytes_of(data, size));
  if (!reader.ok()) {
    fuzz::check_refusal(reader.status());
    return 0;
  }
  const auto& r = **reader;
  std::vector<std::byte> out;
  for (const auto& entry : r.entries()) {
    if (r.find(entry.name) == nullptr) fuzz::fail("an entry that find() does not know");
    if (entry.type == io::irpa::EntryType::kData) {
      auto view = r.view(entry);
      if (!view.ok()) fuzz::fail("a data entry of an accepted archive cannot be viewed");
      if (view->size() != entry.length) fuzz::fail("a view of the wrong length");
    }
    // Read at most 64 KiB of each entry (a splat may declare terabytes).
    const uint64_t length = std::min<uint64_t>(entry.length, 64 * 1024);
    out.resize(length);
    Status s = r.read(entry, 0, out);
    if (!s.ok()) fuzz::check_refusal(s);
    if (entry.length > 3) {
      out.resize(3);
      s = r.read(entry, entry.length - 3, out);
      if (!s.ok()) fuzz::check_refusal(s);
    }
    std::byte past[1];
    if (r.read(entry, entry.length, past).ok()) fuzz::fail("a read past an entry's end was accepted");
    auto metadata = io::decode_tensor_metadata(entry.metadata);
    if (!metadata.ok()) fuzz::check_refusal(metadata.status());
  }
  return 0;
}
