// The child side of plugin isolation (see remote_plugin.hpp): the body of
// the loom-plugin-host program.
#pragma once

namespace loom::host {

// Loads the plugin its arguments name, reports to the host on the socket it
// was given, and serves the host's calls until the host closes the socket.
// Never returns once serving (the process exits); returns an exit code for
// bad arguments.
int serve_plugin_process(int argc, char** argv);

}  // namespace loom::host
