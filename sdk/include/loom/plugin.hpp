// Header-only C++17 helper for writing a Loom plugin on top of plugin.h.
//
// It turns a handful of C++ classes into the C function table, so that a
// plugin is its logic plus ~50 lines of glue. What it takes care of:
//  - status objects: loom::sdk::Status (code + message) becomes a
//    loom_status_t* at the boundary, and status_code/message/destroy exist;
//  - every incoming struct is checked: non-NULL, struct_size at least the
//    size of the version that introduced it (LOOM_*_V1_0_SIZE; larger, newer
//    structs are accepted and only known fields are read);
//  - exceptions never cross the boundary: they become LOOM_STATUS_INTERNAL
//    (or are swallowed by entries that return nothing, such as destroy);
//  - device_info writes only the fields that fit the host's struct;
//  - the compile entries verify the graph, validate options, and hand the
//    blob back in memory from the host's allocator;
//  - LOOM_SDK_DEFINE_ENTRY writes loom_plugin_query with ABI negotiation:
//    the highest version both sides speak, or a refusal with a reason.
// It uses no global mutable state: the function table is a function-local
// static const.
//
// The pieces, each in its own header under loom/sdk/ (all included here):
//   status.hpp   Status, the error shorthands, LOOM_SDK_RETURN_IF_ERROR
//   options.hpp  Options: key/value options and compile specs
//   host.hpp     log, send_trace, copy_to_host_memory, CreateContext
//   calls.hpp    Blob, ExecuteCallT: what executable/execute members receive
//   compile.hpp  Claims, CompiledBlob: what compile members answer with
//   blob.hpp     BlobWriter, read_blob_header, BlobReader: a versioned,
//                checksummed container for the plugin's own blobs
//   thunks.hpp   the C entries (internal)
//   entry.hpp    make_api, negotiate_abi, query, LOOM_SDK_DEFINE_ENTRY
// and, NOT included here because it needs flatbuffers and the generated
// graph.fbs header (CMake target Loom::graph_schema):
//   graph.hpp    GraphView: the verified, read-only graph the compile
//                members receive
// nor, because it needs <filesystem>:
//   device_model.hpp  the cache of what a plugin measured on a device for
//                executable_estimate, and the roofline it turns work into
//                time with
//
// The plugin supplies one class `Impl` with these members (any may throw):
//
//   struct MyPlugin {
//     class Plugin;  class Device;  class Executable;  class Buffer;  class Fence;
//     static const loom_plugin_info_t* info();
//     static loom::sdk::Status create(const loom::sdk::CreateContext& ctx,
//                                     std::unique_ptr<Plugin>* out);
//   };
//   Plugin:     Status check_available();  size_t device_count();
//               Device* device(size_t index);  // nullptr when out of range
//   Device:     void info(loom_device_info_t* full);  // fill every field but struct_size
//               Status check_executable(const Blob& blob);
//               Status load_executable(const Blob& blob, const Options& specs,
//                                      std::unique_ptr<Executable>* out);
//               Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
//                                      std::unique_ptr<Buffer>* out);
//               Status create_fence(std::unique_ptr<Fence>* out);
//   Executable: Status execute(const loom::sdk::ExecuteCallT<Fence>& call);
//   Buffer:     Status map(void** out);  void unmap();
//               Status copy_from_host(uint64_t offset, const void* src, uint64_t size);
//               Status copy_to_host(uint64_t offset, void* dst, uint64_t size);
//   Fence:      Status signal();  Status wait(uint64_t timeout_ns);  Status query(bool* out);
//
// Optional members, detected at compile time (the entry is NULL without them):
//   Device:     Status import_host(void* pointer, uint64_t size,
//                                  std::unique_ptr<Buffer>* out);   // buffer_import_host
//               Status estimate_executable(const Blob& blob,
//                                          uint64_t* out_time_ns);  // ABI 1.1
//   Plugin:     Status compile_supported(const GraphView& graph,
//                                        Claims* claims);            // compile_supported
//               Status compile(const GraphView& graph, const Options& options,
//                              CompiledBlob* out);                   // compile
//               (both or neither; the file with LOOM_SDK_DEFINE_ENTRY then
//               includes loom/sdk/graph.hpp; see loom/sdk/compile.hpp)
//
// and then, in one source file:
//
//   LOOM_SDK_DEFINE_ENTRY(MyPlugin)
//
// Handles given to the host are the Impl objects themselves (reinterpret_cast
// to the opaque C types), except loom_plugin_t, which is an SDK box holding
// the Plugin and the host services; the thunks take ownership back on
// destroy. Thread safety is plugin.h's, per entry: members behind entries
// plugin.h calls thread-safe must be thread-safe.
#ifndef LOOM_PLUGIN_HPP_
#define LOOM_PLUGIN_HPP_

#include "loom/plugin.h"
#include "loom/sdk/blob.hpp"
#include "loom/sdk/calls.hpp"
#include "loom/sdk/compile.hpp"
#include "loom/sdk/entry.hpp"
#include "loom/sdk/host.hpp"
#include "loom/sdk/options.hpp"
#include "loom/sdk/status.hpp"
#include "loom/sdk/thunks.hpp"

#endif  // LOOM_PLUGIN_HPP_
