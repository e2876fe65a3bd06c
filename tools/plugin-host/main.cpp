// loom-plugin-host: runs one plugin in a process of its own for a Loom host
// that isolates it (or probes it before loading it itself). Started by the
// host, never by hand; see core/src/host/isolation/remote_plugin.hpp.
#include "host/isolation/plugin_server.hpp"

int main(int argc, char** argv) { return loom::host::serve_plugin_process(argc, argv); }
