// Plugin isolation, the host's side: a plugin run in a process of its own
// (loom-plugin-host), behind a function table that forwards every call over
// local sockets, so that the rest of the host (handles, sessions, the
// compiler) uses it exactly as an in-process plugin and vendors write
// nothing different.
//
// What crosses: requests and replies over SOCK_SEQPACKET channels (one per
// calling thread at a time, made as needed, so a thread blocked in
// fence_wait holds up no other); device buffers as memfd shared memory
// mapped by both processes, so tensor data is never sent through a socket.
// The devices an isolated plugin shows take buffers only (no
// HOST_POINTER_EXECUTE or HOST_POINTER_IMPORT: the child cannot see the
// host's memory) and are host-visible (their buffers are mapped here): a
// session stages inputs and outputs with one copy each, as for any device
// with memory of its own.
//
// A crash of the child, or a call it does not answer within the call
// timeout (the child is then killed), loses the plugin: that call fails with
// DEVICE_LOST (DEADLINE_EXCEEDED for the timeout), every later one with
// DEVICE_LOST naming what happened, and the host process lives on.
//
// Private to the core.
#pragma once

#include <memory>

#include "host/plugin_host.hpp"

namespace loom::host {

// RemotePlugin and its deleter are declared in plugin_host.hpp; the type is
// complete only in remote_plugin.cpp.
using RemotePluginPtr = std::unique_ptr<RemotePlugin, RemotePluginDeleter>;

// What an isolated plugin's process reported after loading.
struct RemoteFacts {
  uint32_t abi_version = 0;
  std::vector<LoadedPlugin::LoaderKeyRange> loader_keys;
  uint64_t capabilities = 0;  // LOOM_PLUGIN_CAP_* (ABI 1.2)
  int pid = 0;
};

// Starts loom-plugin-host for `manifest` and waits (options.probe_timeout)
// for its report. With `probe`, the child only loads the plugin, reports and
// exits: OK when loading survives, else an error saying what happened
// (the plugin's own error, a signal, an exit, a timeout). Without it the
// child stays and serves; `out_api`/`out_instance` are the forwarding table
// and instance, valid while the returned object lives. `out_about_plugin`,
// when given, is set to whether the outcome speaks of the plugin (the child
// started, so success or the plugin's failure) rather than of the host (the
// child could not be started).
Result<RemotePluginPtr> start_remote_plugin(const PluginManifest& manifest,
                                            const HostOptions& options,
                                            std::shared_ptr<LogChannel> log, bool probe,
                                            RemoteFacts* out_facts,
                                            const loom_plugin_api_t** out_api,
                                            loom_plugin_t** out_instance,
                                            bool* out_about_plugin = nullptr);

// Where loom-plugin-host is: HostOptions::plugin_host_program, else
// $LOOM_PLUGIN_HOST, else beside the running program, else
// <program dir>/../libexec/loom/, else <dir of libloom.so>/../bin/ (a host
// program linked with the installed library). An error says where it looked.
Result<std::filesystem::path> find_plugin_host_program(const HostOptions& options);

}  // namespace loom::host
