// Writing a small file so that readers never see it half written.
#pragma once

#include <filesystem>
#include <string_view>

#include "loom/status.hpp"

namespace loom {

// Writes `text` to a temporary file beside `path` (named after it and this
// process) and renames it over `path`: a reader in another process sees the
// old file or the new one, never a mix, and concurrent writers of the same
// file leave one whole version. `what` names the file in errors ("conformance
// stamp"); errors are UNAVAILABLE with the path and the system's reason, and
// leave no temporary file behind.
Status write_file_atomically(const std::filesystem::path& path, std::string_view text,
                             std::string_view what);

}  // namespace loom
