/* Loom plugin ABI.
 *
 * This header is the whole contract between the Loom core and a backend
 * plugin. It is plain C, includes only the C standard headers below, and is
 * versioned: a major version change breaks compatibility, a minor version only
 * appends (new fields at the end of structs, new entries at the end of the
 * function table). See sdk/CHANGELOG.md for the history.
 *
 * Conventions used throughout:
 *  - Every struct that crosses the boundary starts with `size_t struct_size`,
 *    set by whoever fills the struct in. A reader accepts structs that are
 *    smaller (older) or larger (newer) than its own definition: it never reads
 *    a field that lies at or past `struct_size` and treats missing fields as
 *    zero. The size constants are computed from the last field of each
 *    version, never written by hand.
 *  - Struct sizes per version. Every struct has one constant per ABI version
 *    that defined or grew it, LOOM_<NAME>_V<major>_<minor>_SIZE (for example
 *    LOOM_EXECUTE_ARGS_V1_0_SIZE; a struct new in 1.1 has only a V1_1 one),
 *    and LOOM_<NAME>_STRUCT_SIZE, which means "the newest size this header
 *    knows" and moves when a minor version grows the struct. The rule, for
 *    both sides:
 *      - a reader accepts any struct_size >= the size of the version that
 *        introduced the struct (V1_0 for every struct of 1.0), never just
 *        the current one, and refuses smaller ones with a message;
 *      - it reads, and writes `out_` fields, only where LOOM_STRUCT_HAS says
 *        the field fits struct_size, and treats absent fields as zero;
 *      - a writer sets struct_size to the newest size it knows
 *        (LOOM_*_STRUCT_SIZE).
 *    So a plugin rebuilt against a later header still takes 1.0-sized
 *    structs from a 1.0 host. The C++ helper (plugin.hpp) checks incoming
 *    structs against the V1_0 constants.
 *  - Functions that can fail return `loom_status_t*`: NULL means success, any
 *    other value is an error object created by the plugin and released by the
 *    host with `status_destroy` from the same function table.
 *  - Output parameters are struct fields or arguments whose names begin with
 *    `out_`. On failure, output handles are left NULL.
 *  - Handles are opaque and come in create/destroy pairs; every destroy entry
 *    accepts NULL. Whoever allocates frees.
 *  - Borrowed pointers are valid only for the duration of the call unless the
 *    comment on the field says otherwise.
 *  - Thread safety is stated per entry. "Thread-safe" means the entry may be
 *    called concurrently from several threads, also on the same handle.
 */
#ifndef LOOM_PLUGIN_H_
#define LOOM_PLUGIN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Versions and helpers
 * ------------------------------------------------------------------------- */

/* Packs a major and minor version into one comparable 32-bit value. */
#define LOOM_ABI_VERSION(major, minor) \
  ((uint32_t)(((uint32_t)(major) << 16) | ((uint32_t)(minor)&0xffffu)))
#define LOOM_ABI_VERSION_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define LOOM_ABI_VERSION_MINOR_OF(v) ((uint32_t)(v)&0xffffu)

/* The ABI version this header describes. */
#define LOOM_ABI_MAJOR 1
#define LOOM_ABI_MINOR 2
#define LOOM_ABI_CURRENT LOOM_ABI_VERSION(LOOM_ABI_MAJOR, LOOM_ABI_MINOR)

/* Size of a struct up to and including `last_field`. Used to define the
 * versioned struct-size constants so that they can never drift from the
 * declaration. */
#define LOOM_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* True when a struct of `struct_size` bytes contains the field `field` of
 * `type` in full. Readers use it before touching any field past the first. */
#define LOOM_STRUCT_HAS(type, struct_size, field) \
  ((size_t)(struct_size) >= LOOM_STRUCT_SIZE(type, field))

/* Name of the one symbol a plugin library exports. */
#define LOOM_PLUGIN_ENTRY_POINT_NAME "loom_plugin_query"

#if defined(_WIN32)
#define LOOM_PLUGIN_EXPORT __declspec(dllexport)
#else
#define LOOM_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------
 * Status
 * ------------------------------------------------------------------------- */

/* The fixed set of error codes. New codes may be appended in a minor version;
 * a host maps codes it does not know to LOOM_STATUS_INTERNAL. */
typedef enum loom_status_code_t {
  LOOM_STATUS_OK = 0,
  LOOM_STATUS_INVALID_ARGUMENT = 1,
  LOOM_STATUS_NOT_FOUND = 2,
  LOOM_STATUS_UNIMPLEMENTED = 3,
  LOOM_STATUS_INCOMPATIBLE = 4,
  LOOM_STATUS_RESOURCE_EXHAUSTED = 5,
  LOOM_STATUS_DEVICE_LOST = 6,
  LOOM_STATUS_DEADLINE_EXCEEDED = 7,
  LOOM_STATUS_DATA_LOSS = 8,
  LOOM_STATUS_INTERNAL = 9,
  LOOM_STATUS_FAILED_PRECONDITION = 10,
  LOOM_STATUS_UNAVAILABLE = 11,
  LOOM_STATUS_OUT_OF_RANGE = 12,
  LOOM_STATUS_CANCELLED = 13,
  LOOM_STATUS_ALREADY_EXISTS = 14,
} loom_status_code_t;

/* An error object: a code plus a human-readable message. Created by the
 * plugin, destroyed by the host through `loom_plugin_api_t.status_destroy`. */
typedef struct loom_status_t loom_status_t;

/* ---------------------------------------------------------------------------
 * Opaque handles (all created and destroyed by the plugin)
 * ------------------------------------------------------------------------- */

/* One initialized instance of the plugin. */
typedef struct loom_plugin_t loom_plugin_t;
/* A device enumerated by the plugin; owned by the loom_plugin_t. */
typedef struct loom_device_t loom_device_t;
/* A delegate blob loaded onto a device. */
typedef struct loom_executable_t loom_executable_t;
/* A block of device memory. */
typedef struct loom_buffer_t loom_buffer_t;
/* A completion object for asynchronous work. */
typedef struct loom_fence_t loom_fence_t;

/* ---------------------------------------------------------------------------
 * Data types and tensors
 * ------------------------------------------------------------------------- */

/* Element types. The numbering is part of the ABI and matches the program
 * container's DType enum. */
typedef enum loom_dtype_t {
  LOOM_DTYPE_INVALID = 0,
  LOOM_DTYPE_F32 = 1,
  LOOM_DTYPE_F16 = 2,
  LOOM_DTYPE_BF16 = 3,
  LOOM_DTYPE_F64 = 4,
  LOOM_DTYPE_I8 = 5,
  LOOM_DTYPE_I16 = 6,
  LOOM_DTYPE_I32 = 7,
  LOOM_DTYPE_I64 = 8,
  LOOM_DTYPE_U8 = 9,
  LOOM_DTYPE_U16 = 10,
  LOOM_DTYPE_U32 = 11,
  LOOM_DTYPE_U64 = 12,
  LOOM_DTYPE_BOOL = 13,
} loom_dtype_t;

/* Bit for `dtype` in a dtype mask (loom_device_info_t.dtype_mask). */
#define LOOM_DTYPE_BIT(dtype) (UINT64_C(1) << (uint32_t)(dtype))

/* Maximum rank of a tensor crossing the ABI. */
#define LOOM_MAX_RANK 8

/* Describes one tensor argument of an execution. Exactly one of `buffer` and
 * `host_data` is set: `buffer` for device memory made by this plugin,
 * `host_data` for host memory (only when the device reports
 * LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE). Dense, row-major, no padding.
 * All pointers are borrowed for the duration of the execution, which for an
 * asynchronous execution lasts until its signal fence is signaled. */
typedef struct loom_tensor_t {
  size_t struct_size;
  loom_dtype_t dtype;
  uint32_t rank;                /* <= LOOM_MAX_RANK */
  const int64_t* shape;         /* `rank` dimensions, each >= 0 */
  loom_buffer_t* buffer;        /* device memory, or NULL */
  void* host_data;              /* host memory, or NULL */
  uint64_t offset;              /* byte offset into buffer or host_data */
  uint64_t byte_size;           /* bytes of the dense tensor */
} loom_tensor_t;
#define LOOM_TENSOR_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_tensor_t, byte_size)
#define LOOM_TENSOR_STRUCT_SIZE LOOM_TENSOR_V1_0_SIZE

/* A key/value option: compile specs, plugin options. Strings are borrowed,
 * NUL-terminated UTF-8. */
typedef struct loom_option_t {
  size_t struct_size;
  const char* key;
  const char* value;
} loom_option_t;
#define LOOM_OPTION_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_option_t, value)
#define LOOM_OPTION_STRUCT_SIZE LOOM_OPTION_V1_0_SIZE

/* Well-known plugin option: the maximum number of worker threads a plugin may
 * use, as a decimal string. "0" or absent means "all cores". */
#define LOOM_OPTION_THREADS "loom.threads"

/* ---------------------------------------------------------------------------
 * Host services: handed to the plugin at query time
 * ------------------------------------------------------------------------- */

typedef enum loom_log_level_t {
  LOOM_LOG_DEBUG = 0,
  LOOM_LOG_INFO = 1,
  LOOM_LOG_WARNING = 2,
  LOOM_LOG_ERROR = 3,
} loom_log_level_t;

typedef enum loom_trace_phase_t {
  LOOM_TRACE_BEGIN = 0,
  LOOM_TRACE_END = 1,
  LOOM_TRACE_INSTANT = 2,
} loom_trace_phase_t;

/* One trace event. `name` and `category` are borrowed for the call. The host
 * puts an event whose `category` is one of this plugin's device URIs on that
 * device's track of the timeline (`loom run --trace`), any other on a track
 * named after the plugin. A BEGIN is closed by the next END of the same
 * thread and track. */
typedef struct loom_trace_event_t {
  size_t struct_size;
  loom_trace_phase_t phase;
  const char* category;
  const char* name;
  uint64_t timestamp_ns; /* steady clock; 0 lets the host stamp it */
} loom_trace_event_t;
#define LOOM_TRACE_EVENT_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_trace_event_t, timestamp_ns)
#define LOOM_TRACE_EVENT_STRUCT_SIZE LOOM_TRACE_EVENT_V1_0_SIZE

/* Services the host offers. The struct and every function in it stay valid
 * until the plugin library is unloaded; all functions are thread-safe. Any
 * function pointer may be NULL in a smaller (older) struct; the plugin checks
 * struct_size before using one. */
typedef struct loom_host_services_t {
  size_t struct_size;
  void* user_data; /* passed back as the first argument of every service */
  /* Allocates `size` bytes aligned to `alignment` (a power of two), or
   * returns NULL. Memory from here is released with `free` below, by either
   * side: the host frees compile results the plugin allocated here. */
  void* (*allocate)(void* user_data, size_t size, size_t alignment);
  void (*free)(void* user_data, void* ptr);
  /* Writes one log line; `message` is borrowed for the call. */
  void (*log)(void* user_data, loom_log_level_t level, const char* message);
  /* Records one trace event; cheap when tracing is off. */
  void (*trace)(void* user_data, const loom_trace_event_t* event);
} loom_host_services_t;
#define LOOM_HOST_SERVICES_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_host_services_t, trace)
#define LOOM_HOST_SERVICES_STRUCT_SIZE LOOM_HOST_SERVICES_V1_0_SIZE

/* ---------------------------------------------------------------------------
 * Plugin information
 * ------------------------------------------------------------------------- */

/* A blob format the plugin loads, with the range of format versions. */
typedef struct loom_loader_key_t {
  size_t struct_size;
  const char* key; /* e.g. "cpu-simd" */
  uint32_t format_version_min;
  uint32_t format_version_max;
} loom_loader_key_t;
#define LOOM_LOADER_KEY_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_loader_key_t, format_version_max)
#define LOOM_LOADER_KEY_STRUCT_SIZE LOOM_LOADER_KEY_V1_0_SIZE

/* Static description of the plugin. Everything it points to is owned by the
 * plugin and valid until the library is unloaded. */
typedef struct loom_plugin_info_t {
  size_t struct_size;
  const char* name;    /* matches the manifest, e.g. "cpu-simd" */
  const char* vendor;
  const char* version; /* the plugin's own version, free form */
  size_t loader_key_count;
  const loom_loader_key_t* const* loader_keys; /* array of pointers */
  /* ABI 1.2: LOOM_PLUGIN_CAP_* bits. A host reads it only when the version
   * chosen is 1.2 or newer and struct_size covers it. */
  uint64_t capabilities;
} loom_plugin_info_t;
#define LOOM_PLUGIN_INFO_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_plugin_info_t, loader_keys)
#define LOOM_PLUGIN_INFO_V1_2_SIZE \
  LOOM_STRUCT_SIZE(loom_plugin_info_t, capabilities)
#define LOOM_PLUGIN_INFO_STRUCT_SIZE LOOM_PLUGIN_INFO_V1_2_SIZE

/* Capability flags of a plugin (loom_plugin_info_t.capabilities, ABI 1.2). */
/* Open-shape executables. The compile entries accept graphs whose tensors
 * have open dimensions (-1 in graph.fbs shapes; constants are always
 * static): compile_supported claims the nodes the plugin can run at every
 * binding of them, and compile returns ONE blob for all bindings. Executing
 * an executable loaded from such a blob, the host passes in every input and
 * output loom_tensor_t the concrete shape of this execution (the outputs'
 * from ONNX shape inference over the graph at this binding); the plugin
 * checks them against its own shape rules and fails with
 * LOOM_STATUS_INVALID_ARGUMENT naming the tensor and both shapes when they
 * disagree. Whatever the plugin prepares per binding (kernels, layouts) it
 * caches itself, bounded. A host never gives an open graph to a plugin
 * without this bit, or to one that chose a version before 1.2: such plugins
 * only ever see static shapes (the host specializes the graph per binding
 * through their compile entries instead). */
#define LOOM_PLUGIN_CAP_OPEN_SHAPES (UINT64_C(1) << 0)

/* ---------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------- */

typedef enum loom_device_kind_t {
  LOOM_DEVICE_KIND_CPU = 0,
  LOOM_DEVICE_KIND_GPU = 1,
  LOOM_DEVICE_KIND_ACCELERATOR = 2,
  LOOM_DEVICE_KIND_VIRTUAL = 3,
} loom_device_kind_t;

/* Capability flags of a device. */
/* Executions may complete asynchronously and signal fences later. */
#define LOOM_DEVICE_CAP_ASYNC (UINT64_C(1) << 0)
/* Buffers can be mapped into the host address space. */
#define LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY (UINT64_C(1) << 1)
/* Host memory can be imported as a buffer (buffer_import_host). */
#define LOOM_DEVICE_CAP_HOST_POINTER_IMPORT (UINT64_C(1) << 2)
/* The device can record timestamps for profiling. */
#define LOOM_DEVICE_CAP_TIMESTAMPS (UINT64_C(1) << 3)
/* Executions accept tensors in host memory (loom_tensor_t.host_data). A
 * device without it needs its own buffers: the host copies in and out. */
#define LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE (UINT64_C(1) << 4)

/* Description of one device. Strings are owned by the plugin and valid until
 * the loom_plugin_t is destroyed. */
typedef struct loom_device_info_t {
  size_t struct_size;
  const char* uri;  /* "<plugin>://<index>", e.g. "cpu-simd://0" */
  const char* name; /* human-readable, e.g. the CPU model */
  loom_device_kind_t kind;
  uint64_t device_memory_bytes; /* 0 when not known */
  uint64_t host_visible_memory_bytes;
  uint64_t capabilities; /* LOOM_DEVICE_CAP_* */
  uint64_t dtype_mask;   /* LOOM_DTYPE_BIT of each supported dtype */
} loom_device_info_t;
#define LOOM_DEVICE_INFO_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_device_info_t, dtype_mask)
#define LOOM_DEVICE_INFO_STRUCT_SIZE LOOM_DEVICE_INFO_V1_0_SIZE

/* ---------------------------------------------------------------------------
 * Argument structs of the function table
 * ------------------------------------------------------------------------- */

typedef struct loom_plugin_create_args_t {
  size_t struct_size;
  /* The same services as handed to the query; valid until the library is
   * unloaded. Plugins keep this pointer instead of a global. */
  const loom_host_services_t* host;
  size_t option_count;
  const loom_option_t* const* options; /* e.g. LOOM_OPTION_THREADS */
  loom_plugin_t* out_plugin;
} loom_plugin_create_args_t;
#define LOOM_PLUGIN_CREATE_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_plugin_create_args_t, out_plugin)
#define LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE LOOM_PLUGIN_CREATE_ARGS_V1_0_SIZE

typedef struct loom_executable_check_args_t {
  size_t struct_size;
  loom_device_t* device;
  const char* loader_key;
  uint32_t format_version; /* as recorded in the program, 0 if unknown */
  const void* blob;
  size_t blob_size;
} loom_executable_check_args_t;
#define LOOM_EXECUTABLE_CHECK_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_executable_check_args_t, blob_size)
#define LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE LOOM_EXECUTABLE_CHECK_ARGS_V1_0_SIZE

typedef struct loom_executable_load_args_t {
  size_t struct_size;
  loom_device_t* device;
  const char* loader_key;
  uint32_t format_version;
  /* The blob stays valid and unchanged until executable_destroy, so the
   * plugin may keep pointers into it instead of copying. */
  const void* blob;
  size_t blob_size;
  size_t spec_count;
  const loom_option_t* const* specs; /* compile specs, borrowed for the call */
  loom_executable_t* out_executable;
} loom_executable_load_args_t;
#define LOOM_EXECUTABLE_LOAD_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_executable_load_args_t, out_executable)
#define LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE LOOM_EXECUTABLE_LOAD_ARGS_V1_0_SIZE

typedef struct loom_execute_args_t {
  size_t struct_size;
  loom_executable_t* executable;
  size_t input_count;
  const loom_tensor_t* const* inputs;
  size_t output_count;
  /* Shapes are fixed by the caller: the blob's own, or, for a blob compiled
   * from an open graph (LOOM_PLUGIN_CAP_OPEN_SHAPES), this execution's. */
  const loom_tensor_t* const* outputs;
  /* Fences to wait for before starting, borrowed until the execution starts. */
  size_t wait_fence_count;
  loom_fence_t* const* wait_fences;
  /* When NULL the execution completes before execute returns. When set, the
   * plugin may return at once and signal the fence on completion; an error
   * that happens later is reported by fence_wait/fence_query. A synchronous
   * plugin runs inline and signals the fence before returning.
   * ABI 1.1: a fence whose earlier execution has finished (it is signaled,
   * or failed, and nobody is waiting on it) may be handed to execute again;
   * execute re-arms it (unsignaled, no error) for this execution. A 1.1 host
   * keeps one fence per call site instead of making one per execution; a
   * 1.0 host always passes a new fence.
   * Lifetime of what an execution uses: until its fence has signaled (or
   * reported the execution's error), the host does not free its buffers or
   * the host memory they import, destroy this fence or the executable, hand
   * the fence to execute again, or destroy the plugin; a fence_wait that
   * timed out does not end the execution. A host that gives up on a run
   * (its run timeout) waits for the fence later, before reusing or freeing
   * any of these; when it never signals (a hung device), the host keeps
   * them, and the plugin, for the rest of its process. */
  loom_fence_t* signal_fence;
} loom_execute_args_t;
#define LOOM_EXECUTE_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_execute_args_t, signal_fence)
#define LOOM_EXECUTE_ARGS_STRUCT_SIZE LOOM_EXECUTE_ARGS_V1_0_SIZE

typedef enum loom_buffer_flags_t {
  LOOM_BUFFER_DEVICE_LOCAL = 0,
  /* The buffer must be mappable (needs LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY). */
  LOOM_BUFFER_HOST_VISIBLE = 1,
} loom_buffer_flags_t;

typedef struct loom_buffer_allocate_args_t {
  size_t struct_size;
  loom_device_t* device;
  uint64_t size;
  uint64_t alignment; /* power of two, 0 = the device's default */
  uint32_t flags;     /* loom_buffer_flags_t bits */
  loom_buffer_t* out_buffer;
} loom_buffer_allocate_args_t;
#define LOOM_BUFFER_ALLOCATE_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_buffer_allocate_args_t, out_buffer)
#define LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE LOOM_BUFFER_ALLOCATE_ARGS_V1_0_SIZE

typedef struct loom_buffer_import_args_t {
  size_t struct_size;
  loom_device_t* device;
  /* Host memory that must stay valid until the buffer is freed. */
  void* host_pointer;
  uint64_t size;
  loom_buffer_t* out_buffer;
} loom_buffer_import_args_t;
#define LOOM_BUFFER_IMPORT_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_buffer_import_args_t, out_buffer)
#define LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE LOOM_BUFFER_IMPORT_ARGS_V1_0_SIZE

/* Copies between host memory and a buffer. Synchronous: done on return. */
typedef struct loom_buffer_copy_args_t {
  size_t struct_size;
  loom_buffer_t* buffer;
  uint64_t buffer_offset;
  void* host_pointer; /* source for copy_from_host, target for copy_to_host */
  uint64_t size;
} loom_buffer_copy_args_t;
#define LOOM_BUFFER_COPY_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_buffer_copy_args_t, size)
#define LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE LOOM_BUFFER_COPY_ARGS_V1_0_SIZE

/* Compile side (optional). `graph` is a graph.fbs flatbuffer. */
typedef struct loom_compile_supported_args_t {
  size_t struct_size;
  loom_plugin_t* plugin;
  const void* graph;
  size_t graph_size;
  size_t node_count;     /* nodes in the graph */
  bool* out_supported;   /* caller array of node_count entries */
} loom_compile_supported_args_t;
#define LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_compile_supported_args_t, out_supported)
#define LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE

typedef struct loom_compile_args_t {
  size_t struct_size;
  loom_plugin_t* plugin;
  const void* graph;
  size_t graph_size;
  size_t option_count;
  const loom_option_t* const* options;
  /* The blob, allocated with the host's `allocate` service; the host frees it
   * with `free`. The loader key is a static string of the plugin. */
  void* out_blob;
  size_t out_blob_size;
  const char* out_loader_key;
  uint32_t out_format_version;
} loom_compile_args_t;
#define LOOM_COMPILE_ARGS_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_compile_args_t, out_format_version)
#define LOOM_COMPILE_ARGS_STRUCT_SIZE LOOM_COMPILE_ARGS_V1_0_SIZE

/* ABI 1.1. Arguments of executable_estimate: how long one execution of a
 * blob would take on a device, asked before anything is loaded. */
typedef struct loom_executable_estimate_args_t {
  size_t struct_size;
  loom_device_t* device;
  const char* loader_key;
  uint32_t format_version;
  const void* blob; /* borrowed for the call */
  size_t blob_size;
  /* The plugin's estimate of one execution in nanoseconds, inputs and
   * outputs already in place; 0: no estimate for this blob. */
  uint64_t out_time_ns;
} loom_executable_estimate_args_t;
#define LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE \
  LOOM_STRUCT_SIZE(loom_executable_estimate_args_t, out_time_ns)
#define LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE

/* ---------------------------------------------------------------------------
 * The function table
 * ------------------------------------------------------------------------- */

/* Everything a plugin offers. Owned by the plugin (typically static) and valid
 * until the library is unloaded. Entries up to LOOM_PLUGIN_API_V1_0_SIZE are
 * required except those marked optional, which may be NULL.
 *
 * Versions: the table a plugin hands out for the version V it chose says
 * abi_version = V and has a struct_size of at least V's size constant
 * (LOOM_PLUGIN_API_V1_0_SIZE for 1.0, LOOM_PLUGIN_API_V1_1_SIZE for 1.1,
 * LOOM_PLUGIN_API_V1_2_SIZE for 1.2). A
 * host reads an entry added in 1.M only when the version chosen is 1.M or
 * newer and struct_size covers it (LOOM_STRUCT_HAS). So a plugin speaking
 * 1.0-1.1 that a 1.0 host loads answers 1.0 with a 1.0 table. */
typedef struct loom_plugin_api_t {
  size_t struct_size;
  uint32_t abi_version; /* the version chosen, as in the query answer */

  /* -- status objects (thread-safe) -- */
  loom_status_code_t (*status_code)(const loom_status_t* status);
  /* Message borrowed until status_destroy. Never NULL. */
  const char* (*status_message)(const loom_status_t* status);
  void (*status_destroy)(loom_status_t* status);

  /* -- plugin instance -- */
  /* Static information; may be called before plugin_create. Thread-safe. */
  const loom_plugin_info_t* (*plugin_info)(void);
  /* Creates the instance. The host creates at most one per loaded library
   * and calls it from one thread. */
  loom_status_t* (*plugin_create)(loom_plugin_create_args_t* args);
  /* Destroys the instance after every object it made is gone. */
  void (*plugin_destroy)(loom_plugin_t* plugin);
  /* NULL when the plugin can run here; otherwise LOOM_STATUS_UNAVAILABLE with
   * the reason ("no Vulkan driver found"). Thread-safe. */
  loom_status_t* (*plugin_check_available)(loom_plugin_t* plugin);

  /* -- devices (thread-safe) -- */
  loom_status_t* (*device_count)(loom_plugin_t* plugin, size_t* out_count);
  /* Borrowed handle, valid until plugin_destroy. */
  loom_status_t* (*device_get)(loom_plugin_t* plugin, size_t index,
                               loom_device_t** out_device);
  /* The host sets info->struct_size to the size it knows; the plugin writes
   * only fields that fit and leaves struct_size as it was. */
  loom_status_t* (*device_info)(loom_device_t* device,
                                loom_device_info_t* info);

  /* -- executables -- */
  /* NULL when the blob can be loaded on the device; LOOM_STATUS_INCOMPATIBLE
   * with the reason otherwise. Never loads. Thread-safe. */
  loom_status_t* (*executable_check)(loom_executable_check_args_t* args);
  /* Thread-safe. */
  loom_status_t* (*executable_load)(loom_executable_load_args_t* args);
  void (*executable_destroy)(loom_executable_t* executable);
  /* Thread-safe, also on one executable, as long as each call has its own
   * tensors and fences. */
  loom_status_t* (*execute)(loom_execute_args_t* args);

  /* -- device memory (thread-safe; one buffer is not used by two calls that
   * write it at once) -- */
  loom_status_t* (*buffer_allocate)(loom_buffer_allocate_args_t* args);
  void (*buffer_free)(loom_buffer_t* buffer);
  /* Maps a host-visible buffer; the pointer is valid until buffer_unmap. */
  loom_status_t* (*buffer_map)(loom_buffer_t* buffer, void** out_pointer);
  void (*buffer_unmap)(loom_buffer_t* buffer);
  loom_status_t* (*buffer_copy_from_host)(loom_buffer_copy_args_t* args);
  loom_status_t* (*buffer_copy_to_host)(loom_buffer_copy_args_t* args);
  /* Optional (NULL) unless the device has LOOM_DEVICE_CAP_HOST_POINTER_IMPORT. */
  loom_status_t* (*buffer_import_host)(loom_buffer_import_args_t* args);

  /* -- fences (thread-safe) -- */
  loom_status_t* (*fence_create)(loom_device_t* device,
                                 loom_fence_t** out_fence);
  void (*fence_destroy)(loom_fence_t* fence);
  /* Signals the fence from the host. */
  loom_status_t* (*fence_signal)(loom_fence_t* fence);
  /* Waits up to timeout_ns (UINT64_MAX = forever). NULL once signaled,
   * LOOM_STATUS_DEADLINE_EXCEEDED on timeout, or the error of the work that
   * was to signal it. */
  loom_status_t* (*fence_wait)(loom_fence_t* fence, uint64_t timeout_ns);
  /* Non-blocking: *out_signaled tells whether it is signaled; the status is
   * the error of the work that was to signal it, if that failed. */
  loom_status_t* (*fence_query)(loom_fence_t* fence, bool* out_signaled);

  /* -- compile side (optional: both NULL for a run-only plugin) -- */
  loom_status_t* (*compile_supported)(loom_compile_supported_args_t* args);
  loom_status_t* (*compile)(loom_compile_args_t* args);

  /* -- ABI 1.1 -- */
  /* Optional (NULL): estimates one execution of a blob on a device without
   * loading it; `policy:fastest` ranks devices by it (a plugin without it is
   * ranked by device kind). Cheap and thread-safe; an error or 0 means no
   * estimate. */
  loom_status_t* (*executable_estimate)(loom_executable_estimate_args_t* args);
} loom_plugin_api_t;
#define LOOM_PLUGIN_API_V1_0_SIZE LOOM_STRUCT_SIZE(loom_plugin_api_t, compile)
#define LOOM_PLUGIN_API_V1_1_SIZE LOOM_STRUCT_SIZE(loom_plugin_api_t, executable_estimate)
/* ABI 1.2 added no entry (it grew loom_plugin_info_t): its table is 1.1's. */
#define LOOM_PLUGIN_API_V1_2_SIZE LOOM_PLUGIN_API_V1_1_SIZE
/* The size of the table this header describes (the newest version). */
#define LOOM_PLUGIN_API_STRUCT_SIZE LOOM_PLUGIN_API_V1_2_SIZE

/* ---------------------------------------------------------------------------
 * The entry point
 * ------------------------------------------------------------------------- */

/* Filled in by the host, answered by the plugin. */
typedef struct loom_plugin_query_t {
  size_t struct_size;
  /* The range of ABI versions the host speaks (LOOM_ABI_VERSION values). */
  uint32_t host_abi_min;
  uint32_t host_abi_max;
  /* Valid until the library is unloaded. */
  const loom_host_services_t* host;
  /* Host buffer for the reason of a refusal, NUL-terminated by the plugin. */
  char* reason;
  size_t reason_capacity;
  /* The version the plugin chose, within the host's range. */
  uint32_t out_abi_version;
  /* The plugin's function table, valid until the library is unloaded. */
  const loom_plugin_api_t* out_api;
} loom_plugin_query_t;
#define LOOM_PLUGIN_QUERY_V1_0_SIZE \
  LOOM_STRUCT_SIZE(loom_plugin_query_t, out_api)
#define LOOM_PLUGIN_QUERY_STRUCT_SIZE LOOM_PLUGIN_QUERY_V1_0_SIZE

/* The one symbol a plugin exports (LOOM_PLUGIN_ENTRY_POINT_NAME). Returns
 * LOOM_STATUS_OK with out_abi_version and out_api set, or another code
 * (usually LOOM_STATUS_INCOMPATIBLE) with a reason written to query->reason.
 * Called once per load, from one thread, before anything else. */
typedef loom_status_code_t (*loom_plugin_query_fn_t)(loom_plugin_query_t* query);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_PLUGIN_H_ */
