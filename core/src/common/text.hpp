// Small text helpers shared by the core's error messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// Levenshtein distance between `a` and `b`.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `text` when it is within `max_distance` edits (a
// likely typo), else "". Ties go to the earlier candidate.
std::string nearest(std::string_view text, const std::vector<std::string>& candidates,
                    size_t max_distance = 3);

// Whether every character of `text` is printable ASCII (0x20 to 0x7e), as
// the manifest, stamp and probe-cache readers require of their strings.
bool printable_ascii(std::string_view text);

}  // namespace loom
