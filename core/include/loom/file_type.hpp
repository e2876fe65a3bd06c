// Checking what a path names before it is opened. A file named by a program
// or on a command line may be a FIFO (opening or reading it blocks until a
// writer comes), a device such as /dev/zero (a read never ends) or a folder;
// Loom's readers (.npy, .irpa, programs, stamps) call this first so that
// each is refused with a message that says what the path is, and a host
// application or tool can do the same for the files it opens itself (the
// loom CLI does for `run`'s input files), with the same wording.
//
// Library: loom_common (in libloom). Thread-safe; nothing here throws.
#pragma once

#include <filesystem>
#include <string_view>

#include "loom/status.hpp"

namespace loom {

// "a FIFO", "a character device", "a block device", "a directory",
// "a socket", or "a special file" (any other type but a regular file).
std::string_view file_type_name(std::filesystem::file_type type);

// OK when `path` names a regular file (symlinks followed). Otherwise
// NOT_FOUND "<what> <path>: no such file", INVALID_ARGUMENT
// "<what> <path> is a FIFO, not a regular file" (see file_type_name), or UNAVAILABLE
// with the system's reason (permissions on a parent folder, ...). `what`
// names the role of the file ("input file"), may be empty.
Status check_regular_file(const std::filesystem::path& path, std::string_view what);

}  // namespace loom
