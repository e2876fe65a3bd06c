// The C host API (loom/loom.h) over the C++ runtime: handles own C++
// objects, every entry validates its arguments and turns a Status into a
// loom_error_t, and no C++ exception crosses the C boundary.
#include "loom/loom.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <span>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/runtime.hpp"
#include "loom/trace.hpp"

struct loom_error_t {
  loom_status_code_t code;
  std::string message;
};

struct loom_runtime_t {
  std::unique_ptr<loom::Runtime> runtime;
  std::vector<loom::DeviceInfo> devices;  // the last list
  std::vector<std::string> kinds;         // per device, for loom_device_desc_t.kind
  std::shared_ptr<loom::Trace> trace;
};

struct loom_program_t {
  std::shared_ptr<loom::Program> program;
  std::vector<std::byte> bytes;  // a program loaded from memory: its own copy
};

struct loom_session_t {
  std::shared_ptr<loom::Program> program;  // outlives the session
  std::unique_ptr<loom::Session> session;
};

struct loom_run_t {
  loom::RunHandle handle;
};

namespace {

using loom::Status;
using loom::StatusCode;

loom_error_t* make_error(loom_status_code_t code, std::string message) {
  auto* e = new (std::nothrow) loom_error_t{code, std::move(message)};
  // Out of memory for the error itself: a static one would be a mutable
  // global; a null would read as success. Terminate instead.
  if (e == nullptr) std::terminate();
  return e;
}

loom_error_t* from_status(const Status& status) {
  if (status.ok()) return nullptr;
  return make_error(static_cast<loom_status_code_t>(status.code()), status.message());
}

loom_error_t* invalid(const char* function, const std::string& what) {
  return make_error(LOOM_STATUS_INVALID_ARGUMENT, std::string(function) + ": " + what);
}

// Runs `body`, turning an escaping exception into an INTERNAL (or
// RESOURCE_EXHAUSTED) error: nothing is thrown across the C boundary.
template <typename Body>
loom_error_t* guarded(const char* function, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_error(LOOM_STATUS_RESOURCE_EXHAUSTED, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return make_error(LOOM_STATUS_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return make_error(LOOM_STATUS_INTERNAL, std::string(function) + ": an unknown exception");
  }
}

// A struct from the caller must say its size and be at least the first
// version's.
bool sized(size_t struct_size, size_t minimum) { return struct_size >= minimum; }

std::string size_message(const char* type, size_t got, size_t want) {
  return std::string(type) + ".struct_size is " + std::to_string(got) + ", at least " + std::to_string(want) +
         " (set it to sizeof(" + type + "))";
}

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void fill(const loom::ArgumentInfo& arg, loom_value_desc_t* out) {
  const size_t size = out->struct_size;
  loom_value_desc_t d{};
  d.struct_size = size;
  d.name = arg.name.c_str();
  d.dtype = static_cast<loom_dtype_t>(arg.dtype);
  d.rank = static_cast<uint32_t>(arg.shape.size());
  d.shape = arg.shape.data();
  std::memcpy(out, &d, std::min(size, sizeof d));
}

loom_error_t* view_of(const std::string& name, const loom::Tensor& t, loom_tensor_view_t* out) {
  const size_t size = out->struct_size;
  loom_tensor_view_t v{};
  v.struct_size = size;
  v.name = name.c_str();
  v.dtype = static_cast<loom_dtype_t>(t.dtype());
  v.rank = static_cast<uint32_t>(t.rank());
  v.shape = t.shape().data();
  v.data = t.data();
  v.byte_size = t.byte_size();
  std::memcpy(out, &v, std::min(size, sizeof v));
  return nullptr;
}

loom::Result<loom::LoadOptions> load_options(const loom_load_options_t* o) {
  loom::LoadOptions load;
  if (o == nullptr) return load;
  if (!sized(o->struct_size, LOOM_LOAD_OPTIONS_V1_0_SIZE)) {
    return loom::invalid_argument(size_message("loom_load_options_t", o->struct_size, LOOM_LOAD_OPTIONS_V1_0_SIZE));
  }
  constexpr uint32_t kKnown = LOOM_LOAD_FALLBACK | LOOM_LOAD_NO_PARAMETER_CHECKSUMS;
  if ((o->flags & ~kKnown) != 0) {
    return loom::invalid_argument("loom_load_options_t.flags has unknown bits 0x" +
                                  [](uint32_t v) {
                                    char buf[16];
                                    std::snprintf(buf, sizeof buf, "%x", v);
                                    return std::string(buf);
                                  }(o->flags & ~kKnown));
  }
  if (o->device != nullptr) load.device = o->device;
  load.fallback = (o->flags & LOOM_LOAD_FALLBACK) != 0;
  load.check_parameter_checksums = (o->flags & LOOM_LOAD_NO_PARAMETER_CHECKSUMS) == 0;
  if (o->run_timeout_ms != 0) load.run_timeout = std::chrono::milliseconds(o->run_timeout_ms);
  load.max_tensor_bytes = o->max_tensor_bytes;
  if (o->shape_cache != 0) load.shape_cache = o->shape_cache;
  if (o->parameter_archive_count > 0 &&
      (o->parameter_archive_scopes == nullptr || o->parameter_archive_paths == nullptr)) {
    return loom::invalid_argument("loom_load_options_t: parameter_archive_count is " +
                                  std::to_string(o->parameter_archive_count) + " but the scopes or paths are NULL");
  }
  for (size_t i = 0; i < o->parameter_archive_count; ++i) {
    if (o->parameter_archive_scopes[i] == nullptr || o->parameter_archive_paths[i] == nullptr) {
      return loom::invalid_argument("loom_load_options_t: parameter archive " + std::to_string(i) +
                                    " has a NULL scope or path");
    }
    load.parameter_archives.emplace_back(o->parameter_archive_scopes[i], o->parameter_archive_paths[i]);
  }
  return load;
}

loom_error_t* describe(const char* fn, const loom_session_t* session, size_t index, loom_value_desc_t* out,
                              bool input) {
  if (session == nullptr) return invalid(fn, "session is NULL");
  if (out == nullptr) return invalid(fn, "out_desc is NULL");
  if (!sized(out->struct_size, LOOM_VALUE_DESC_V1_0_SIZE)) {
    return invalid(fn, size_message("loom_value_desc_t", out->struct_size, LOOM_VALUE_DESC_V1_0_SIZE));
  }
  const loom::FunctionInfo& f = session->session->function();
  const std::vector<loom::ArgumentInfo>& list = input ? f.inputs : f.outputs;
  if (index >= list.size()) {
    return make_error(LOOM_STATUS_OUT_OF_RANGE, std::string(fn) + ": index " + std::to_string(index) + " of " +
                                                    std::to_string(list.size()) + (input ? " inputs" : " results") +
                                                    " of function '" + f.name + "'");
  }
  fill(list[index], out);
  return nullptr;
}

}  // namespace

extern "C" {

uint32_t loom_c_api_version(void) { return (LOOM_C_API_VERSION_MAJOR << 16) | LOOM_C_API_VERSION_MINOR; }

loom_status_code_t loom_error_code(const loom_error_t* error) { return error ? error->code : LOOM_STATUS_OK; }

const char* loom_error_message(const loom_error_t* error) { return error ? error->message.c_str() : ""; }

const char* loom_status_code_name(loom_status_code_t code) {
  switch (code) {
    case LOOM_STATUS_OK: return "OK";
    case LOOM_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case LOOM_STATUS_NOT_FOUND: return "NOT_FOUND";
    case LOOM_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case LOOM_STATUS_INCOMPATIBLE: return "INCOMPATIBLE";
    case LOOM_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case LOOM_STATUS_DEVICE_LOST: return "DEVICE_LOST";
    case LOOM_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case LOOM_STATUS_DATA_LOSS: return "DATA_LOSS";
    case LOOM_STATUS_INTERNAL: return "INTERNAL";
    case LOOM_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case LOOM_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case LOOM_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case LOOM_STATUS_CANCELLED: return "CANCELLED";
    case LOOM_STATUS_ALREADY_EXISTS: return "ALREADY_EXISTS";
  }
  return "UNKNOWN";
}

void loom_error_free(loom_error_t* error) { delete error; }

void loom_string_free(char* string) { std::free(string); }

loom_error_t* loom_runtime_create(const loom_runtime_options_t* options, loom_runtime_t** out_runtime) {
  constexpr const char* kFn = "loom_runtime_create";
  if (out_runtime == nullptr) return invalid(kFn, "out_runtime is NULL");
  *out_runtime = nullptr;
  return guarded(kFn, [&]() -> loom_error_t* {
    loom::RuntimeOptions o;
    if (options != nullptr) {
      if (!sized(options->struct_size, LOOM_RUNTIME_OPTIONS_V1_0_SIZE)) {
        return invalid(kFn, size_message("loom_runtime_options_t", options->struct_size,
                                         LOOM_RUNTIME_OPTIONS_V1_0_SIZE));
      }
      constexpr uint32_t kKnown = LOOM_RUNTIME_NO_ENVIRONMENT | LOOM_RUNTIME_NO_DEFAULT_FOLDER |
                                  LOOM_RUNTIME_NO_USER_FOLDER | LOOM_RUNTIME_NO_PROBE |
                                  LOOM_RUNTIME_REQUIRE_CONFORMANCE;
      if ((options->flags & ~kKnown) != 0) {
        return invalid(kFn, "loom_runtime_options_t.flags has unknown bits " +
                                std::to_string(options->flags & ~kKnown));
      }
      auto strings = [&](const char* const* list, size_t count, const char* what,
                         std::vector<std::string>* out) -> loom_error_t* {
        if (count > 0 && list == nullptr) {
          return invalid(kFn, std::string(what) + " is NULL with a count of " + std::to_string(count));
        }
        for (size_t i = 0; i < count; ++i) {
          if (list[i] == nullptr) return invalid(kFn, std::string(what) + "[" + std::to_string(i) + "] is NULL");
          out->emplace_back(list[i]);
        }
        return nullptr;
      };
      std::vector<std::string> paths;
      if (loom_error_t* e = strings(options->plugin_paths, options->plugin_path_count, "plugin_paths", &paths)) return e;
      for (std::string& p : paths) o.plugin_paths.emplace_back(std::move(p));
      if (loom_error_t* e = strings(options->isolated_plugins, options->isolated_plugin_count, "isolated_plugins",
                                    &o.isolated_plugins)) {
        return e;
      }
      if (options->plugin_option_count > 0 && options->plugin_options == nullptr) {
        return invalid(kFn, "plugin_options is NULL with a count of " + std::to_string(options->plugin_option_count));
      }
      for (size_t i = 0; i < options->plugin_option_count; ++i) {
        const loom_option_t& opt = options->plugin_options[i];
        if (opt.key == nullptr || opt.value == nullptr) {
          return invalid(kFn, "plugin_options[" + std::to_string(i) + "] has a NULL key or value");
        }
        o.plugin_options.emplace_back(opt.key, opt.value);
      }
      o.threads = options->threads;
      o.use_environment = (options->flags & LOOM_RUNTIME_NO_ENVIRONMENT) == 0;
      o.use_default_folder = (options->flags & LOOM_RUNTIME_NO_DEFAULT_FOLDER) == 0;
      o.use_user_folder = (options->flags & LOOM_RUNTIME_NO_USER_FOLDER) == 0;
      o.probe_plugins = (options->flags & LOOM_RUNTIME_NO_PROBE) == 0;
      o.require_conformance = (options->flags & LOOM_RUNTIME_REQUIRE_CONFORMANCE) != 0;
      if (options->log != nullptr) {
        loom_log_fn_t log = options->log;
        void* user = options->log_user_data;
        o.log_sink = [log, user](loom::LogLevel level, std::string_view line) {
          const std::string text(line);
          log(user, static_cast<loom_log_level_t>(static_cast<int>(level)), text.c_str());
        };
      }
    }
    auto runtime = loom::Runtime::create(o);
    if (!runtime.ok()) return from_status(runtime.status());
    auto* rt = new loom_runtime_t;
    rt->runtime = std::move(*runtime);
    *out_runtime = rt;
    return nullptr;
  });
}

void loom_runtime_destroy(loom_runtime_t* runtime) { delete runtime; }

loom_error_t* loom_runtime_device_count(loom_runtime_t* runtime, size_t* out_count) {
  constexpr const char* kFn = "loom_runtime_device_count";
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  if (out_count == nullptr) return invalid(kFn, "out_count is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    runtime->devices = runtime->runtime->devices();
    runtime->kinds.clear();
    for (const loom::DeviceInfo& d : runtime->devices) runtime->kinds.emplace_back(loom::device_kind_name(d.kind));
    *out_count = runtime->devices.size();
    return nullptr;
  });
}

loom_error_t* loom_runtime_device(loom_runtime_t* runtime, size_t index, loom_device_desc_t* out_device) {
  constexpr const char* kFn = "loom_runtime_device";
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  if (out_device == nullptr) return invalid(kFn, "out_device is NULL");
  if (!sized(out_device->struct_size, LOOM_DEVICE_DESC_V1_0_SIZE)) {
    return invalid(kFn, size_message("loom_device_desc_t", out_device->struct_size, LOOM_DEVICE_DESC_V1_0_SIZE));
  }
  if (index >= runtime->devices.size()) {
    return make_error(LOOM_STATUS_OUT_OF_RANGE, std::string(kFn) + ": index " + std::to_string(index) +
                                                    " is past the " + std::to_string(runtime->devices.size()) +
                                                    " devices of the last loom_runtime_device_count");
  }
  const loom::DeviceInfo& d = runtime->devices[index];
  loom_device_desc_t desc{};
  desc.struct_size = out_device->struct_size;
  desc.uri = d.uri.c_str();
  desc.name = d.name.c_str();
  desc.plugin = d.plugin.c_str();
  desc.kind = runtime->kinds[index].c_str();
  desc.capabilities = d.capabilities;
  desc.dtype_mask = d.dtype_mask;
  desc.device_memory_bytes = d.device_memory_bytes;
  std::memcpy(out_device, &desc, std::min(out_device->struct_size, sizeof desc));
  return nullptr;
}

loom_error_t* loom_runtime_plugins(loom_runtime_t* runtime, char** out_text) {
  constexpr const char* kFn = "loom_runtime_plugins";
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  if (out_text == nullptr) return invalid(kFn, "out_text is NULL");
  *out_text = nullptr;
  return guarded(kFn, [&]() -> loom_error_t* {
    std::string text;
    for (const loom::PluginRecord& p : runtime->runtime->plugins()) {
      text += p.name + " " + (p.version.empty() ? "-" : p.version) + " " +
              std::string(loom::plugin_state_name(p.state));
      if (!p.reason.empty()) text += " " + p.reason;
      text += "\n";
    }
    *out_text = copy_string(text);
    if (*out_text == nullptr) return make_error(LOOM_STATUS_RESOURCE_EXHAUSTED, std::string(kFn) + ": out of memory");
    return nullptr;
  });
}

loom_error_t* loom_runtime_trace_start(loom_runtime_t* runtime) {
  constexpr const char* kFn = "loom_runtime_trace_start";
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    runtime->trace = runtime->runtime->start_trace();
    return nullptr;
  });
}

loom_error_t* loom_runtime_trace_stop(loom_runtime_t* runtime, const char* path) {
  constexpr const char* kFn = "loom_runtime_trace_stop";
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    runtime->runtime->stop_trace();
    std::shared_ptr<loom::Trace> trace = std::move(runtime->trace);
    if (path == nullptr) return nullptr;
    if (trace == nullptr) {
      return make_error(LOOM_STATUS_FAILED_PRECONDITION,
                        std::string(kFn) + ": no trace is being recorded (loom_runtime_trace_start first)");
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << trace->to_chrome_json();
    out.close();
    if (!out) {
      return make_error(LOOM_STATUS_UNAVAILABLE,
                        std::string(kFn) + ": cannot write the trace to '" + path + "': " + std::strerror(errno));
    }
    return nullptr;
  });
}

loom_error_t* loom_program_load_file(loom_runtime_t* runtime, const char* path, const loom_load_options_t* options,
                                     loom_program_t** out_program) {
  constexpr const char* kFn = "loom_program_load_file";
  if (out_program == nullptr) return invalid(kFn, "out_program is NULL");
  *out_program = nullptr;
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  if (path == nullptr) return invalid(kFn, "path is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    auto load = load_options(options);
    if (!load.ok()) return invalid(kFn, load.status().message());
    auto program = runtime->runtime->load_program(std::filesystem::path(path), *load);
    if (!program.ok()) return from_status(program.status());
    *out_program = new loom_program_t{std::move(*program), {}};
    return nullptr;
  });
}

loom_error_t* loom_program_load_memory(loom_runtime_t* runtime, const void* data, size_t size,
                                       const loom_load_options_t* options, loom_program_t** out_program) {
  constexpr const char* kFn = "loom_program_load_memory";
  if (out_program == nullptr) return invalid(kFn, "out_program is NULL");
  *out_program = nullptr;
  if (runtime == nullptr) return invalid(kFn, "runtime is NULL");
  if (data == nullptr && size > 0) return invalid(kFn, "data is NULL with a size of " + std::to_string(size));
  return guarded(kFn, [&]() -> loom_error_t* {
    auto load = load_options(options);
    if (!load.ok()) return invalid(kFn, load.status().message());
    auto p = std::make_unique<loom_program_t>();
    const auto* bytes = static_cast<const std::byte*>(data);
    p->bytes.assign(bytes, bytes + size);
    auto program = runtime->runtime->load_program(std::span<const std::byte>(p->bytes), *load);
    if (!program.ok()) return from_status(program.status());
    p->program = std::move(*program);
    *out_program = p.release();
    return nullptr;
  });
}

void loom_program_release(loom_program_t* program) { delete program; }

loom_error_t* loom_program_explain(loom_program_t* program, char** out_text) {
  constexpr const char* kFn = "loom_program_explain";
  if (out_text == nullptr) return invalid(kFn, "out_text is NULL");
  *out_text = nullptr;
  if (program == nullptr) return invalid(kFn, "program is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    *out_text = copy_string(program->program->explain().to_string());
    if (*out_text == nullptr) return make_error(LOOM_STATUS_RESOURCE_EXHAUSTED, std::string(kFn) + ": out of memory");
    return nullptr;
  });
}

loom_error_t* loom_session_create(loom_program_t* program, const char* function, loom_session_t** out_session) {
  constexpr const char* kFn = "loom_session_create";
  if (out_session == nullptr) return invalid(kFn, "out_session is NULL");
  *out_session = nullptr;
  if (program == nullptr) return invalid(kFn, "program is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    auto session = program->program->create_session(function ? std::string_view(function) : std::string_view());
    if (!session.ok()) return from_status(session.status());
    *out_session = new loom_session_t{program->program, std::move(*session)};
    return nullptr;
  });
}

void loom_session_destroy(loom_session_t* session) { delete session; }

size_t loom_session_input_count(const loom_session_t* session) {
  return session ? session->session->function().inputs.size() : 0;
}

size_t loom_session_output_count(const loom_session_t* session) {
  return session ? session->session->function().outputs.size() : 0;
}

loom_error_t* loom_session_input(const loom_session_t* session, size_t index, loom_value_desc_t* out_desc) {
  return describe("loom_session_input", session, index, out_desc, true);
}

loom_error_t* loom_session_output_desc(const loom_session_t* session, size_t index, loom_value_desc_t* out_desc) {
  return describe("loom_session_output_desc", session, index, out_desc, false);
}

loom_error_t* loom_session_set_input(loom_session_t* session, const char* name, loom_dtype_t dtype,
                                     const int64_t* shape, uint32_t rank, const void* data, size_t byte_size) {
  constexpr const char* kFn = "loom_session_set_input";
  if (session == nullptr) return invalid(kFn, "session is NULL");
  if (name == nullptr) return invalid(kFn, "name is NULL");
  const std::string where = std::string(kFn) + ": input '" + name + "'";
  // A C caller may pass any int: read the bytes, never load an enum value
  // outside loom_dtype_t's range.
  std::underlying_type_t<loom_dtype_t> raw_dtype;
  std::memcpy(&raw_dtype, &dtype, sizeof raw_dtype);
  if (raw_dtype <= LOOM_DTYPE_INVALID || raw_dtype > LOOM_DTYPE_BOOL) {
    return make_error(LOOM_STATUS_INVALID_ARGUMENT, where + ": dtype " + std::to_string(raw_dtype) +
                                                        " is not a loom_dtype_t");
  }
  if (rank > 0 && shape == nullptr) {
    return make_error(LOOM_STATUS_INVALID_ARGUMENT, where + ": shape is NULL with rank " + std::to_string(rank));
  }
  if (rank > LOOM_MAX_RANK * 4) {
    return make_error(LOOM_STATUS_INVALID_ARGUMENT, where + ": rank " + std::to_string(rank) + " is implausible");
  }
  if (data == nullptr && byte_size > 0) {
    return make_error(LOOM_STATUS_INVALID_ARGUMENT, where + ": data is NULL with " + std::to_string(byte_size) + " bytes");
  }
  return guarded(kFn, [&]() -> loom_error_t* {
    loom::Shape s(shape, shape + rank);
    for (uint32_t d = 0; d < rank; ++d) {
      if (s[d] < 0) {
        return make_error(LOOM_STATUS_INVALID_ARGUMENT, where + ": dimension " + std::to_string(d) + " is " +
                                                            std::to_string(s[d]));
      }
    }
    // A view: Tensor::view checks that byte_size is the shape's size, and
    // set_input copies it.
    auto view = loom::Tensor::view(static_cast<loom::DType>(dtype), std::move(s), const_cast<void*>(data), byte_size);
    if (!view.ok()) return make_error(static_cast<loom_status_code_t>(view.status().code()), where + ": " + view.status().message());
    return from_status(session->session->set_input(name, *view));
  });
}

loom_error_t* loom_session_bind_input(loom_session_t* session, const char* name, const void* data,
                                      size_t byte_size) {
  constexpr const char* kFn = "loom_session_bind_input";
  if (session == nullptr) return invalid(kFn, "session is NULL");
  if (name == nullptr) return invalid(kFn, "name is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    const loom::FunctionInfo& f = session->session->function();
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      if (f.inputs[i].name == name) return from_status(session->session->bind_input(i, data, byte_size));
    }
    std::string names;
    for (const loom::ArgumentInfo& a : f.inputs) names += (names.empty() ? "" : ", ") + a.name;
    return make_error(LOOM_STATUS_NOT_FOUND, std::string(kFn) + ": function '" + f.name + "' has no input '" + name +
                                                 "' (inputs: " + names + ")");
  });
}

loom_error_t* loom_session_run(loom_session_t* session) {
  constexpr const char* kFn = "loom_session_run";
  if (session == nullptr) return invalid(kFn, "session is NULL");
  return guarded(kFn, [&]() -> loom_error_t* { return from_status(session->session->run()); });
}

loom_error_t* loom_session_run_async(loom_session_t* session, loom_run_t** out_run) {
  constexpr const char* kFn = "loom_session_run_async";
  if (out_run == nullptr) return invalid(kFn, "out_run is NULL");
  *out_run = nullptr;
  if (session == nullptr) return invalid(kFn, "session is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    auto handle = session->session->run_async();
    if (!handle.ok()) return from_status(handle.status());
    *out_run = new loom_run_t{std::move(*handle)};
    return nullptr;
  });
}

loom_error_t* loom_run_wait(loom_run_t* run, int64_t timeout_ms) {
  constexpr const char* kFn = "loom_run_wait";
  if (run == nullptr) return invalid(kFn, "run is NULL");
  return guarded(kFn, [&]() -> loom_error_t* {
    const auto timeout =
        timeout_ms < 0 ? std::chrono::milliseconds::max() : std::chrono::milliseconds(timeout_ms);
    return from_status(run->handle.wait(timeout));
  });
}

int loom_run_done(const loom_run_t* run) { return run != nullptr && run->handle.done() ? 1 : 0; }

void loom_run_release(loom_run_t* run) { delete run; }

loom_error_t* loom_session_output(const loom_session_t* session, const char* name, loom_tensor_view_t* out_view) {
  constexpr const char* kFn = "loom_session_output";
  if (session == nullptr) return invalid(kFn, "session is NULL");
  if (name == nullptr) return invalid(kFn, "name is NULL");
  if (out_view == nullptr) return invalid(kFn, "out_view is NULL");
  if (!sized(out_view->struct_size, LOOM_TENSOR_VIEW_V1_0_SIZE)) {
    return invalid(kFn, size_message("loom_tensor_view_t", out_view->struct_size, LOOM_TENSOR_VIEW_V1_0_SIZE));
  }
  return guarded(kFn, [&]() -> loom_error_t* {
    const loom::FunctionInfo& f = session->session->function();
    for (size_t i = 0; i < f.outputs.size(); ++i) {
      if (f.outputs[i].name == name) return view_of(f.outputs[i].name, session->session->output(i), out_view);
    }
    std::string names;
    for (const loom::ArgumentInfo& a : f.outputs) names += (names.empty() ? "" : ", ") + a.name;
    return make_error(LOOM_STATUS_NOT_FOUND, std::string(kFn) + ": function '" + f.name + "' has no result '" + name +
                                                 "' (results: " + names + ")");
  });
}

loom_error_t* loom_session_output_at(const loom_session_t* session, size_t index, loom_tensor_view_t* out_view) {
  constexpr const char* kFn = "loom_session_output_at";
  if (session == nullptr) return invalid(kFn, "session is NULL");
  if (out_view == nullptr) return invalid(kFn, "out_view is NULL");
  if (!sized(out_view->struct_size, LOOM_TENSOR_VIEW_V1_0_SIZE)) {
    return invalid(kFn, size_message("loom_tensor_view_t", out_view->struct_size, LOOM_TENSOR_VIEW_V1_0_SIZE));
  }
  return guarded(kFn, [&]() -> loom_error_t* {
    const loom::FunctionInfo& f = session->session->function();
    if (index >= f.outputs.size()) {
      return make_error(LOOM_STATUS_OUT_OF_RANGE, std::string(kFn) + ": index " + std::to_string(index) + " of " +
                                                      std::to_string(f.outputs.size()) + " results of function '" +
                                                      f.name + "'");
    }
    return view_of(f.outputs[index].name, session->session->output(index), out_view);
  });
}

}  // extern "C"
