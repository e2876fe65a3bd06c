#include "common/text.hpp"

#include <algorithm>

namespace loom {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest(std::string_view text, const std::vector<std::string>& candidates,
                    size_t max_distance) {
  const std::string* best = nullptr;
  size_t best_distance = max_distance + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(text, c);
    if (d < best_distance) {
      best_distance = d;
      best = &c;
    }
  }
  return best != nullptr ? *best : std::string();
}

bool printable_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace loom
