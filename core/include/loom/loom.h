/* Loom's C host API: list devices, load a program, run it, from C (C11) or
 * any language that binds to C (Rust, Go, C#, Java, Python's ctypes).
 *
 * It is a thin layer over the C++ runtime (loom/runtime.hpp) in libloom.so,
 * with the conventions of the plugin ABI (loom/plugin.h, whose dtype and
 * status code enumerations it shares):
 *
 *   - Objects are opaque handles made by a `*_create`/`*_load` function and
 *     released by the matching `*_destroy`/`*_release` (NULL is ignored).
 *   - Functions that can fail return `loom_error_t*`: NULL is success; any
 *     other value carries a code (loom_status_code_t) and a message naming
 *     what was wrong and where, and must be freed with loom_error_free.
 *   - Option and description structs begin with `struct_size`, set by the
 *     caller to sizeof(the struct) as the caller's header declares it; fields
 *     are only ever appended, so an application built against an older
 *     header keeps working with a newer library. A zero-filled options
 *     struct (with struct_size set) means the defaults. NULL options mean
 *     the defaults too.
 *   - Strings are NUL-terminated UTF-8. Strings and arrays a function hands
 *     back are owned by the object they came from, valid as each function
 *     says; those returned as `char*` are the caller's, freed with
 *     loom_string_free.
 *   - A runtime and a program may be used from any thread. A session is used
 *     by one thread at a time (one session per thread for parallel runs).
 *
 * Symbols carry the ELF version LOOM_1. loom_c_api_version() says which
 * version of this header the library implements.
 *
 *   loom_runtime_t* rt = NULL;
 *   loom_error_t* e = loom_runtime_create(NULL, &rt);
 *   loom_program_t* program = NULL;
 *   loom_load_options_t load = {.struct_size = sizeof load};
 *   load.device = "policy:fastest";
 *   if (!e) e = loom_program_load_file(rt, "model.loom", &load, &program);
 *   loom_session_t* s = NULL;
 *   if (!e) e = loom_session_create(program, NULL, &s);
 *   int64_t shape[2] = {1, 784};
 *   if (!e) e = loom_session_set_input(s, "x", LOOM_DTYPE_F32, shape, 2, pixels, sizeof pixels);
 *   if (!e) e = loom_session_run(s);
 *   loom_tensor_view_t y = {.struct_size = sizeof y};
 *   if (!e) e = loom_session_output(s, "y", &y);
 *   if (e) { fprintf(stderr, "%s\n", loom_error_message(e)); loom_error_free(e); }
 *   loom_session_destroy(s); loom_program_release(program); loom_runtime_destroy(rt);
 */
#ifndef LOOM_LOOM_H_
#define LOOM_LOOM_H_

#include <stddef.h>
#include <stdint.h>

#include "loom/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This header's version: major 1 (LOOM_1 symbols), minor 0. */
#define LOOM_C_API_VERSION_MAJOR 1
#define LOOM_C_API_VERSION_MINOR 0

/* The library's C API version, (major << 16) | minor. */
uint32_t loom_c_api_version(void);

/* ---- errors ------------------------------------------------------------ */

typedef struct loom_error_t loom_error_t;

/* The code of `error` (LOOM_STATUS_OK for NULL). */
loom_status_code_t loom_error_code(const loom_error_t* error);
/* The message of `error` ("" for NULL); valid until loom_error_free. */
const char* loom_error_message(const loom_error_t* error);
/* The name of a code: "INVALID_ARGUMENT", "NOT_FOUND", ... */
const char* loom_status_code_name(loom_status_code_t code);
void loom_error_free(loom_error_t* error);

/* Frees a string this API returned as `char*`. */
void loom_string_free(char* string);

/* ---- runtime ----------------------------------------------------------- */

typedef struct loom_runtime_t loom_runtime_t;

/* loom_runtime_options_t.flags; zero keeps every default. */
typedef enum loom_runtime_flags_t {
  LOOM_RUNTIME_NO_ENVIRONMENT = 1u << 0,    /* do not search $LOOM_PLUGIN_PATH */
  LOOM_RUNTIME_NO_DEFAULT_FOLDER = 1u << 1, /* nor the build/install tree's plugin folder */
  LOOM_RUNTIME_NO_USER_FOLDER = 1u << 2,    /* nor the per-user plugin folder */
  LOOM_RUNTIME_NO_PROBE = 1u << 3,          /* load plugins without probing each in a child first */
  LOOM_RUNTIME_REQUIRE_CONFORMANCE = 1u << 4, /* refuse plugins without a valid conformance stamp */
} loom_runtime_flags_t;

/* Receives every line plugins log, from any thread (calls are serialized). */
typedef void (*loom_log_fn_t)(void* user_data, loom_log_level_t level, const char* message);

typedef struct loom_runtime_options_t {
  size_t struct_size;
  /* Folders searched for plugin manifests first. */
  const char* const* plugin_paths;
  size_t plugin_path_count;
  /* Handed to every plugin when it is created; plugins ignore keys they do
   * not know. */
  const loom_option_t* plugin_options;
  size_t plugin_option_count;
  /* Plugins to run each in a process of their own, by name ("*": all). */
  const char* const* isolated_plugins;
  size_t isolated_plugin_count;
  /* Cap on every plugin's worker threads; 0 = all cores. */
  uint32_t threads;
  uint32_t flags; /* loom_runtime_flags_t bits */
  /* NULL: warnings and errors go to stderr. */
  loom_log_fn_t log;
  void* log_user_data;
} loom_runtime_options_t;
#define LOOM_RUNTIME_OPTIONS_V1_0_SIZE \
  (offsetof(loom_runtime_options_t, log_user_data) + sizeof(void*))

/* Finds the plugins (loading none yet). `options` may be NULL. */
loom_error_t* loom_runtime_create(const loom_runtime_options_t* options, loom_runtime_t** out_runtime);
/* Programs, sessions and runs made from the runtime keep what they need
 * (its plugins stay loaded until the last is released), so the runtime may
 * be destroyed before them. */
void loom_runtime_destroy(loom_runtime_t* runtime);

/* One device of a usable plugin. */
typedef struct loom_device_desc_t {
  size_t struct_size;
  const char* uri;    /* "cpu-simd://0" */
  const char* name;
  const char* plugin; /* the plugin's name */
  const char* kind;   /* "cpu", "gpu", "accelerator", "virtual" */
  uint64_t capabilities; /* LOOM_DEVICE_CAP_* bits */
  uint64_t dtype_mask;   /* LOOM_DTYPE_BIT bits */
  uint64_t device_memory_bytes;
} loom_device_desc_t;
#define LOOM_DEVICE_DESC_V1_0_SIZE \
  (offsetof(loom_device_desc_t, device_memory_bytes) + sizeof(uint64_t))

/* Lists the devices of every usable plugin (loading the plugins), and keeps
 * the list in the runtime: loom_runtime_device reads it. */
loom_error_t* loom_runtime_device_count(loom_runtime_t* runtime, size_t* out_count);
/* Device `index` of the last list. Strings live until the next
 * loom_runtime_device_count or loom_runtime_destroy. */
loom_error_t* loom_runtime_device(loom_runtime_t* runtime, size_t index, loom_device_desc_t* out_device);

/* Every plugin found, one a line: "name version state [reason]" (state
 * loaded, found or rejected). The caller frees it (loom_string_free). */
loom_error_t* loom_runtime_plugins(loom_runtime_t* runtime, char** out_text);

/* Starts recording a trace of every run; replaces one being recorded. */
loom_error_t* loom_runtime_trace_start(loom_runtime_t* runtime);
/* Stops recording and writes what was recorded as Chrome trace JSON (open
 * it in Perfetto or chrome://tracing) to `path`; NULL: drop it. */
loom_error_t* loom_runtime_trace_stop(loom_runtime_t* runtime, const char* path);

/* ---- programs ---------------------------------------------------------- */

typedef struct loom_program_t loom_program_t;

/* loom_load_options_t.flags */
typedef enum loom_load_flags_t {
  /* When a delegate's device fails a run (device lost, deadline), move it to
   * the next candidate device and run again. */
  LOOM_LOAD_FALLBACK = 1u << 0,
  /* Do not check external parameters against the program's checksums. */
  LOOM_LOAD_NO_PARAMETER_CHECKSUMS = 1u << 1,
} loom_load_flags_t;

typedef struct loom_load_options_t {
  size_t struct_size;
  /* Which devices the delegates may run on: a URI ("cpu-simd://0"), a plugin
   * name, "kind:gpu", a list tried in order, "policy:fastest", ... (the
   * grammar of loom/device.hpp's DeviceSelector). NULL or "": each
   * delegate's first variant a present device loads. */
  const char* device;
  uint32_t flags; /* loom_load_flags_t bits */
  /* How long a run waits for an asynchronous device; 0 = the default (60 s). */
  uint64_t run_timeout_ms;
  /* The largest tensor or arena a session may allocate; 0 = half of RAM. */
  uint64_t max_tensor_bytes;
  /* Open-shape programs: bindings kept prepared; 0 = the default (4). */
  uint32_t shape_cache;
  /* External parameter archives: scope i takes its parameters from the
   * .irpa file at parameter_archive_paths[i]. */
  const char* const* parameter_archive_scopes;
  const char* const* parameter_archive_paths;
  size_t parameter_archive_count;
} loom_load_options_t;
#define LOOM_LOAD_OPTIONS_V1_0_SIZE \
  (offsetof(loom_load_options_t, parameter_archive_count) + sizeof(size_t))

/* Maps, verifies and prepares a program file; each delegate is loaded on a
 * device per `options` (may be NULL). */
loom_error_t* loom_program_load_file(loom_runtime_t* runtime, const char* path, const loom_load_options_t* options,
                                     loom_program_t** out_program);
/* The same for a program in memory; the bytes are copied. */
loom_error_t* loom_program_load_memory(loom_runtime_t* runtime, const void* data, size_t size,
                                       const loom_load_options_t* options, loom_program_t** out_program);
void loom_program_release(loom_program_t* program);

/* Where each delegate went and why, with every candidate considered, as
 * text (what `loom run --explain` prints). Freed with loom_string_free. */
loom_error_t* loom_program_explain(loom_program_t* program, char** out_text);

/* ---- sessions ---------------------------------------------------------- */

typedef struct loom_session_t loom_session_t;

/* An argument or result of a session's function. An open dimension (an
 * open-shape program's) is -1; a result's dtype may be LOOM_DTYPE_INVALID
 * when an open-shape function only knows it per run. */
typedef struct loom_value_desc_t {
  size_t struct_size;
  const char* name;
  loom_dtype_t dtype;
  uint32_t rank;
  const int64_t* shape;
} loom_value_desc_t;
#define LOOM_VALUE_DESC_V1_0_SIZE (offsetof(loom_value_desc_t, shape) + sizeof(const int64_t*))

/* A result of the last run, in the session's memory: valid until the next
 * run or the session's destruction. */
typedef struct loom_tensor_view_t {
  size_t struct_size;
  const char* name;
  loom_dtype_t dtype;
  uint32_t rank;
  const int64_t* shape;
  const void* data; /* dense, row-major */
  size_t byte_size;
} loom_tensor_view_t;
#define LOOM_TENSOR_VIEW_V1_0_SIZE (offsetof(loom_tensor_view_t, byte_size) + sizeof(size_t))

/* A session of `function` (NULL: "main"), which owns its arena and outputs. */
loom_error_t* loom_session_create(loom_program_t* program, const char* function, loom_session_t** out_session);
/* A run started by loom_session_run_async must have been waited for. */
void loom_session_destroy(loom_session_t* session);

size_t loom_session_input_count(const loom_session_t* session);
size_t loom_session_output_count(const loom_session_t* session);
/* Strings and shapes live as long as the session. */
loom_error_t* loom_session_input(const loom_session_t* session, size_t index, loom_value_desc_t* out_desc);
loom_error_t* loom_session_output_desc(const loom_session_t* session, size_t index, loom_value_desc_t* out_desc);

/* Copies `byte_size` bytes at `data` (dense, row-major, `rank` dimensions
 * `shape`) into input `name`. dtype and shape must fit the function's
 * signature; an open-shape function takes any binding that fits. */
loom_error_t* loom_session_set_input(loom_session_t* session, const char* name, loom_dtype_t dtype,
                                     const int64_t* shape, uint32_t rank, const void* data, size_t byte_size);
/* Binds caller memory as input `name` without copying: `data` must hold the
 * input's bytes (its fixed shape) and stay valid and unchanged until the
 * run returns. Inputs with an open dimension take set_input only. */
loom_error_t* loom_session_bind_input(loom_session_t* session, const char* name, const void* data,
                                      size_t byte_size);

/* Runs the function on the inputs set (inputs not set are zero). */
loom_error_t* loom_session_run(loom_session_t* session);

typedef struct loom_run_t loom_run_t;
/* Starts a run on the session's own thread and returns at once; until
 * loom_run_wait returns its result, the session must not be touched. */
loom_error_t* loom_session_run_async(loom_session_t* session, loom_run_t** out_run);
/* Waits up to `timeout_ms` (negative: as long as it takes) and returns the
 * run's result; DEADLINE_EXCEEDED while it is still going (wait again). */
loom_error_t* loom_run_wait(loom_run_t* run, int64_t timeout_ms);
/* 1 when the run has finished (loom_run_wait returns at once), else 0. */
int loom_run_done(const loom_run_t* run);
void loom_run_release(loom_run_t* run);

/* Result `name` of the last run. */
loom_error_t* loom_session_output(const loom_session_t* session, const char* name, loom_tensor_view_t* out_view);
/* Result `index` of the last run. */
loom_error_t* loom_session_output_at(const loom_session_t* session, size_t index, loom_tensor_view_t* out_view);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_LOOM_H_ */
