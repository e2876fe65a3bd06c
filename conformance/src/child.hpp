// Runs one check in a child process and reads back its verdict. Private.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "check_context.hpp"

namespace loom::conformance::detail {

using NoteFn = std::function<void(std::string_view)>;

// Forks; the child runs `body` (which may call its NoteFn to say what it is
// doing) and sends the verdict back. A child killed by a signal, exiting
// without a verdict, or silent for `step_timeout` (no note and no verdict:
// each note starts the clock again, so a check of a hundred ONNX cases gets
// the limit per case, not for all of them) or still running after
// `total_timeout` is killed, and the check fails naming that and the last
// note.
Verdict run_in_child(const std::function<Verdict(const NoteFn&)>& body,
                     std::chrono::milliseconds step_timeout,
                     std::chrono::milliseconds total_timeout);

}  // namespace loom::conformance::detail
