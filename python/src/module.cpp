// loom._loom: the Python extension under `import loom` (python/loom/). A thin
// layer over libloom.so (loom/runtime.hpp) and libloom-compiler.so
// (loom/compiler.hpp): every decision is theirs; this file converts types,
// turns a failed Status into the loom.Error subclass of its code
// (python/loom/_errors.py), and releases the GIL while Loom works.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <chrono>
#include <map>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/compiler.hpp"
#include "loom/conformance.hpp"
#include "loom/doctor.hpp"
#include "loom/runtime.hpp"
#include "loom/trace.hpp"
#include "loom/version.hpp"

namespace py = pybind11;

namespace loom::python {
namespace {

// A failed Status on its way to Python: the translator below raises the
// loom.Error subclass of its code.
struct StatusError {
  int code;
  std::string message;
};

[[noreturn]] void raise(const Status& status) {
  throw StatusError{static_cast<int>(status.code()), status.message()};
}

void check(const Status& status) {
  if (!status.ok()) raise(status);
}

template <typename T>
T take(Result<T> result) {
  if (!result.ok()) raise(result.status());
  return std::move(*result);
}

// numpy dtype <-> loom DType. Only the dtypes Loom has; anything else is a
// TypeError naming the array.
std::optional<DType> dtype_of(const py::dtype& d) {
  const char kind = d.kind();
  const size_t size = static_cast<size_t>(d.itemsize());
  if (kind == 'f' && size == 4) return DType::kF32;
  if (kind == 'f' && size == 8) return DType::kF64;
  if (kind == 'f' && size == 2) return DType::kF16;
  if (kind == 'i' && size == 1) return DType::kI8;
  if (kind == 'i' && size == 2) return DType::kI16;
  if (kind == 'i' && size == 4) return DType::kI32;
  if (kind == 'i' && size == 8) return DType::kI64;
  if (kind == 'u' && size == 1) return DType::kU8;
  if (kind == 'u' && size == 2) return DType::kU16;
  if (kind == 'u' && size == 4) return DType::kU32;
  if (kind == 'u' && size == 8) return DType::kU64;
  if (kind == 'b' && size == 1) return DType::kBool;
  return std::nullopt;
}

// The numpy dtype string of a Loom dtype ("float32"); bf16 has none and is
// returned as its raw uint16 bits.
const char* numpy_name(DType d) {
  switch (d) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "uint16";
    case DType::kI8: return "int8";
    case DType::kI16: return "int16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kU8: return "uint8";
    case DType::kU16: return "uint16";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
    case DType::kBool: return "bool";
    default: return nullptr;
  }
}

py::object shape_of(const Shape& shape) {
  py::list out;
  for (int64_t d : shape) {
    if (d < 0) {
      out.append(py::none());
    } else {
      out.append(d);
    }
  }
  return py::tuple(out);
}

py::dict argument_dict(const ArgumentInfo& a) {
  py::dict d;
  d["name"] = a.name;
  d["dtype"] = a.dtype == DType::kInvalid ? py::object(py::none()) : py::object(py::str(dtype_name(a.dtype)));
  d["shape"] = shape_of(a.shape);
  d["kind"] = value_kind_name(a.kind);  // "tensor", "sequence", "optional tensor", "optional sequence"
  py::list symbols;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    const std::string s = i < a.symbols.size() ? a.symbols[i] : std::string();
    symbols.append(s.empty() ? py::object(py::none()) : py::object(py::str(s)));
  }
  d["symbols"] = py::tuple(symbols);
  return d;
}

py::dict function_dict(const FunctionInfo& f) {
  py::dict d;
  d["name"] = f.name;
  py::list inputs, outputs;
  for (const ArgumentInfo& a : f.inputs) inputs.append(argument_dict(a));
  for (const ArgumentInfo& a : f.outputs) outputs.append(argument_dict(a));
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["open"] = f.open;
  return d;
}

py::dict device_dict(const DeviceInfo& info) {
  py::dict d;
  d["uri"] = info.uri;
  d["name"] = info.name;
  d["plugin"] = info.plugin;
  d["kind"] = std::string(device_kind_name(info.kind));
  d["capabilities"] = capability_names(info.capabilities);
  py::list dtypes;
  for (uint32_t t = 1; t <= static_cast<uint32_t>(DType::kBool); ++t) {
    if (info.dtype_mask & (uint64_t{1} << t)) dtypes.append(std::string(dtype_name(static_cast<DType>(t))));
  }
  d["dtypes"] = dtypes;
  d["device_memory_bytes"] = info.device_memory_bytes;
  return d;
}

// A C-contiguous, aligned, native-endian array of a Loom dtype, viewed as
// a Tensor without a copy (python/loom/__init__.py prepares it so).
Tensor view_of(const std::string& name, const py::array& a) {
  auto dtype = dtype_of(a.dtype());
  if (!dtype) {
    throw py::type_error("input '" + name + "': numpy dtype " + std::string(py::str(a.dtype())) +
                         " has no Loom dtype");
  }
  if (!(a.flags() & py::array::c_style)) {
    throw py::value_error("input '" + name + "': the array is not C-contiguous");
  }
  Shape shape(a.shape(), a.shape() + a.ndim());
  return take(Tensor::view(*dtype, std::move(shape), const_cast<void*>(a.data()), static_cast<size_t>(a.nbytes())));
}

// A copy of `t` as a numpy array that owns its memory.
py::array array_of(const Tensor& t) {
  const char* name = numpy_name(t.dtype());
  if (name == nullptr) throw py::type_error("a result of dtype " + std::string(dtype_name(t.dtype())) + " has no numpy dtype");
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array out(py::dtype(name), shape);
  if (t.byte_size() > 0) std::memcpy(out.mutable_data(), t.data(), t.byte_size());
  return out;
}

// The runtime with a trace being recorded, if any.
struct PyRuntime {
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<Trace> trace;
};

struct PyProgram {
  std::shared_ptr<Program> program;
  std::shared_ptr<Runtime> runtime;       // keeps the plugins' host alive as long as the program
  std::shared_ptr<std::vector<std::byte>> bytes;  // a program loaded from memory
};

struct PySession {
  std::shared_ptr<Program> program;
  std::unique_ptr<Session> session;
  // Arrays bound without a copy (Session::bind_input), by input index: the
  // session reads them at every run until another value is given, so it
  // keeps them alive.
  std::map<size_t, py::array> held;

  // An input of fixed shape given an array of exactly its dtype and shape
  // is bound without a copy; any other is copied by set_input, which checks
  // it (and takes any binding of an open-shape input). An open or staged
  // function (FunctionInfo::open) takes set_input only, even where an
  // input's declared shape is fixed (a staged function's often is).
  void set_inputs(const py::dict& feeds) {
    const FunctionInfo& f = session->function();
    for (auto item : feeds) {
      const std::string name = py::str(item.first);
      // A sequence (a list or tuple of arrays) or an empty optional (None):
      // copied by set_input_value (docs/control-flow.md).
      if (item.second.is_none()) {
        check(session->set_input_value(name, Value::none()));
        continue;
      }
      if (py::isinstance<py::list>(item.second) || py::isinstance<py::tuple>(item.second)) {
        std::vector<py::array> arrays;
        std::vector<Tensor> elements;
        for (py::handle e : item.second) {
          arrays.push_back(py::array::ensure(e, py::array::c_style));
          if (!arrays.back()) throw py::type_error("input '" + name + "': a sequence holds arrays only");
          elements.push_back(view_of(name, arrays.back()));
        }
        check(session->set_input_value(name, Value::sequence(std::move(elements))));
        continue;
      }
      py::array a = py::reinterpret_borrow<py::array>(item.second);
      Tensor t = view_of(name, a);
      size_t index = f.inputs.size();
      for (size_t i = 0; i < f.inputs.size(); ++i) {
        if (f.inputs[i].name == name) index = i;
      }
      if (!f.open && index < f.inputs.size() && f.inputs[index].dtype == t.dtype() &&
          f.inputs[index].shape == t.shape()) {
        check(session->bind_input(index, t.data(), t.byte_size()));
        held[index] = a;
        continue;
      }
      check(session->set_input(name, t));
      if (index < f.inputs.size()) held.erase(index);
    }
  }

  py::dict outputs() const {
    py::dict out;
    const FunctionInfo& f = session->function();
    for (size_t i = 0; i < f.outputs.size(); ++i) {
      // A sequence is a list of arrays, an empty optional None.
      const Result<Value> v = session->output_value(i);
      check(v.status());
      if (v->is_tensor()) {
        out[py::str(f.outputs[i].name)] = array_of(v->tensor);
      } else if (v->is_none()) {
        out[py::str(f.outputs[i].name)] = py::none();
      } else {
        py::list elements;
        for (const Tensor& e : v->elements) elements.append(array_of(e));
        out[py::str(f.outputs[i].name)] = elements;
      }
    }
    return out;
  }

  py::dict run(const py::dict& feeds) {
    set_inputs(feeds);
    Status st;
    {
      py::gil_scoped_release release;
      st = session->run();
    }
    check(st);
    return outputs();
  }
};

struct PyRun {
  RunHandle handle;
  PySession* session;   // for the outputs once done; the Python object keeps the session alive
  py::object owner;     // the Python session

  // Waits up to `timeout` seconds (None: as long as it takes); True when
  // the run finished (its error raised), False when still running.
  bool wait(std::optional<double> timeout) {
    Status st;
    {
      py::gil_scoped_release release;
      st = timeout ? handle.wait(std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000.0)))
                   : handle.wait();
    }
    if (st.code() == StatusCode::kDeadlineExceeded && timeout && !handle.done()) return false;
    check(st);
    return true;
  }
};

compiler::CompileOptions compile_options(const std::optional<std::vector<std::string>>& targets,
                                         const std::optional<py::dict>& input_shapes, const std::string& variants,
                                         const std::optional<std::filesystem::path>& params_out) {
  compiler::CompileOptions o;
  if (targets) o.targets = *targets;
  if (input_shapes) {
    for (auto item : *input_shapes) {
      Shape shape;
      for (py::handle d : py::reinterpret_borrow<py::sequence>(item.second)) {
        shape.push_back(d.is_none() ? -1 : d.cast<int64_t>());
      }
      o.input_shapes.emplace_back(py::str(item.first), std::move(shape));
    }
  }
  // No variants named: all when the targets are the default (every plugin),
  // as `loom compile` without --target, else first.
  if (variants == "all" || (variants.empty() && !targets)) {
    o.variants = compiler::CompileOptions::Variants::kAll;
  } else if (!variants.empty() && variants != "first") {
    throw py::value_error("variants must be 'first' or 'all', not '" + variants + "'");
  }
  if (params_out) o.params_out = *params_out;
  return o;
}

py::dict report_dict(const compiler::CompileReport& r) {
  py::dict d;
  d["opset"] = r.opset;
  d["model_nodes"] = r.model_nodes;
  d["folded_nodes"] = r.folded_nodes;
  d["fused_nodes"] = r.fused_nodes;
  d["dead_nodes"] = r.dead_nodes;
  py::list targets;
  for (const compiler::TargetReport& t : r.targets) {
    py::dict td;
    td["plugin"] = t.plugin;
    td["loader_key"] = t.loader_key;
    td["subgraphs"] = t.subgraphs;
    td["nodes"] = t.nodes;
    td["op_types"] = t.op_types;
    td["blob_bytes"] = t.blob_bytes;
    targets.append(td);
  }
  d["targets"] = targets;
  d["reference_nodes"] = r.reference_nodes;
  d["reference_op_types"] = r.reference_op_types;
  d["open_inputs"] = r.open_inputs;
  d["open_native"] = r.open_native;
  d["open_per_binding_why"] = r.open_per_binding_why;
  d["program_bytes"] = r.program_bytes;
  return d;
}

}  // namespace
}  // namespace loom::python

PYBIND11_MODULE(_loom, m) {
  using namespace loom;
  using namespace loom::python;
  m.doc() = "Loom's runtime and compiler (the extension under `import loom`; use the loom package)";
  m.attr("__version__") = LOOM_VERSION_STRING;

  // A failed Status raises loom.Error's subclass for its code, made by
  // loom._errors.from_status (the Python side owns the class hierarchy).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object make = py::module_::import("loom._errors").attr("from_status");
      py::object error = make(e.code, e.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    }
  });

  py::class_<PyRuntime>(m, "Runtime")
      .def(py::init([](std::vector<std::filesystem::path> plugin_paths, uint32_t threads,
                       std::map<std::string, std::string> plugin_options, std::vector<std::string> isolated,
                       bool require_conformance, bool probe, bool use_environment,
                       std::optional<py::function> log) {
             RuntimeOptions o;
             o.plugin_paths = std::move(plugin_paths);
             o.threads = threads;
             for (auto& [k, v] : plugin_options) o.plugin_options.emplace_back(k, v);
             o.isolated_plugins = std::move(isolated);
             o.require_conformance = require_conformance;
             o.probe_plugins = probe;
             o.use_environment = use_environment;
             if (log) {
               // Plugins log from their own threads: take the GIL for the call.
               auto fn = std::make_shared<py::function>(*log);
               o.log_sink = [fn](LogLevel level, std::string_view line) {
                 py::gil_scoped_acquire gil;
                 try {
                   (*fn)(static_cast<int>(level), std::string(line));
                 } catch (py::error_already_set& e) {
                   e.discard_as_unraisable("loom log callback");
                 }
               };
             }
             std::unique_ptr<Runtime> rt;
             {
               py::gil_scoped_release release;
               rt = take(Runtime::create(o));
             }
             return PyRuntime{std::shared_ptr<Runtime>(std::move(rt)), nullptr};
           }),
           py::arg("plugin_paths") = std::vector<std::filesystem::path>{}, py::arg("threads") = 0,
           py::arg("plugin_options") = std::map<std::string, std::string>{},
           py::arg("isolated") = std::vector<std::string>{}, py::arg("require_conformance") = false,
           py::arg("probe") = true, py::arg("use_environment") = true, py::arg("log") = py::none())
      .def("devices", [](PyRuntime& r) {
        std::vector<DeviceInfo> devices;
        {
          py::gil_scoped_release release;
          devices = r.runtime->devices();
        }
        py::list out;
        for (const DeviceInfo& d : devices) out.append(device_dict(d));
        return out;
      })
      .def("plugins", [](PyRuntime& r) {
        std::vector<PluginRecord> plugins;
        {
          py::gil_scoped_release release;
          plugins = r.runtime->plugins();
        }
        py::list out;
        for (const PluginRecord& p : plugins) {
          py::dict d;
          d["name"] = p.name;
          d["version"] = p.version;
          d["state"] = std::string(plugin_state_name(p.state));
          d["reason"] = p.reason;
          d["loader_keys"] = p.loader_keys;
          d["manifest"] = p.manifest_path.string();
          d["isolated"] = p.isolated;
          d["conformance"] = p.conformance;
          py::list devices;
          for (const DeviceInfo& dev : p.devices) devices.append(device_dict(dev));
          d["devices"] = devices;
          out.append(d);
        }
        return out;
      })
      .def("compile",
           [](PyRuntime& r, const std::filesystem::path& model, const std::filesystem::path& output,
              std::optional<std::vector<std::string>> targets, std::optional<py::dict> input_shapes,
              const std::string& variants, std::optional<std::filesystem::path> params_out) {
             compiler::CompileOptions o = compile_options(targets, input_shapes, variants, params_out);
             Result<compiler::CompileReport> report = internal_error("not run");
             {
               py::gil_scoped_release release;
               if (!targets) o.targets = compiler::default_targets(r.runtime->plugin_host());
               report = compiler::compile_onnx_file(r.runtime->plugin_host(), model, output, o);
             }
             py::dict d = report_dict(take(std::move(report)));
             d["default_targets"] = !targets.has_value();
             d["target_order"] = o.targets;
             d["variants"] = o.variants == compiler::CompileOptions::Variants::kAll ? "all" : "first";
             return d;
           },
           py::arg("model"), py::arg("output"), py::arg("targets") = py::none(), py::arg("input_shapes") = py::none(),
           py::arg("variants") = "", py::arg("params_out") = py::none())
      .def("load",
           [](PyRuntime& r, py::object source, const std::string& device, bool fallback, double run_timeout,
              size_t shape_cache, uint64_t max_tensor_bytes) {
             LoadOptions o;
             o.device = device;
             o.fallback = fallback;
             o.run_timeout = std::chrono::milliseconds(static_cast<int64_t>(run_timeout * 1000.0));
             o.shape_cache = shape_cache;
             o.max_tensor_bytes = max_tensor_bytes;
             PyProgram p;
             p.runtime = r.runtime;
             Result<std::shared_ptr<Program>> loaded = internal_error("not run");
             if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
                 py::isinstance<py::memoryview>(source)) {
               py::buffer_info info = py::reinterpret_borrow<py::buffer>(source).request();
               const auto* data = static_cast<const std::byte*>(info.ptr);
               p.bytes = std::make_shared<std::vector<std::byte>>(data, data + info.size * info.itemsize);
               py::gil_scoped_release release;
               loaded = r.runtime->load_program(std::span<const std::byte>(*p.bytes), o);
             } else {
               const std::filesystem::path path = source.cast<std::filesystem::path>();
               py::gil_scoped_release release;
               loaded = r.runtime->load_program(path, o);
             }
             p.program = take(std::move(loaded));
             return p;
           },
           py::arg("source"), py::arg("device") = "", py::arg("fallback") = false, py::arg("run_timeout") = 60.0,
           py::arg("shape_cache") = 4, py::arg("max_tensor_bytes") = 0)
      .def("trace_start", [](PyRuntime& r) { r.trace = r.runtime->start_trace(); })
      .def("trace_stop", [](PyRuntime& r, std::optional<std::filesystem::path> path) {
        r.runtime->stop_trace();
        std::shared_ptr<Trace> trace = std::move(r.trace);
        if (!path) return;
        if (!trace) check(failed_precondition("no trace is being recorded"));
        std::ofstream out(*path, std::ios::binary | std::ios::trunc);
        out << trace->to_chrome_json();
        out.close();
        if (!out) check(unavailable("cannot write the trace to " + path->string()));
      }, py::arg("path") = py::none());

  py::class_<PyProgram>(m, "Program")
      .def_property_readonly("functions", [](const PyProgram& p) {
        py::list out;
        for (const FunctionInfo& f : p.program->functions()) out.append(function_dict(f));
        return out;
      })
      .def_property_readonly("placements", [](const PyProgram& p) {
        py::list out;
        for (const DelegatePlacement& d : p.program->placements()) {
          py::dict e;
          e["delegate"] = d.delegate;
          e["device"] = d.device;
          e["loader_key"] = d.loader_key;
          out.append(e);
        }
        return out;
      })
      .def("explain", [](const PyProgram& p) { return p.program->explain().to_string(); })
      .def("session", [](PyProgram& p, const std::string& function) {
        auto s = std::make_unique<PySession>();
        s->program = p.program;
        s->session = take(p.program->create_session(function));
        return s;
      }, py::arg("function") = "");

  py::class_<PySession>(m, "Session")
      .def_property_readonly("function", [](const PySession& s) { return function_dict(s.session->function()); })
      .def("run", &PySession::run, py::arg("feeds"))
      .def("run_async", [](py::object self, const py::dict& feeds) {
        PySession& s = self.cast<PySession&>();
        s.set_inputs(feeds);
        // The arrays stay referenced until the run is waited for (set_input
        // copied them, but a caller's buffer must not be freed under a run).
        auto run = std::make_unique<PyRun>();
        run->handle = take(s.session->run_async());
        run->session = &s;
        run->owner = self;
        return run;
      }, py::arg("feeds"))
      .def("outputs", &PySession::outputs)
      .def_property_readonly("transfers", [](const PySession& s) {
        py::list out;
        for (const DelegateTransfers& t : s.session->transfers()) {
          py::dict d;
          d["delegate"] = t.delegate;
          d["device"] = t.device;
          out.append(d);
        }
        return out;
      });

  // loom.conformance.run and loom.doctor (python/loom/__init__.py wraps them).
  m.def("conformance_run",
        [](const std::string& plugin, const std::string& level, const std::string& device,
           std::vector<std::string> only, std::vector<std::string> skip,
           std::map<std::string, std::string> plugin_options, std::vector<std::filesystem::path> search_paths,
           std::vector<std::filesystem::path> onnx_dirs, bool stamp) {
          conformance::SuiteOptions o;
          o.plugin = plugin;
          o.level = take(conformance::parse_level(level));
          o.device = device;
          o.only = std::move(only);
          o.skip = std::move(skip);
          for (auto& [k, v] : plugin_options) o.plugin_options.emplace_back(k, v);
          o.search_paths = std::move(search_paths);
          o.onnx_dirs = std::move(onnx_dirs);
          Result<conformance::SuiteReport> report = internal_error("not run");
          {
            py::gil_scoped_release release;
            report = conformance::run_suite(o);
          }
          conformance::SuiteReport r = take(std::move(report));
          if (stamp) take(conformance::stamp_plugin(r));
          return conformance::report_json(r);
        },
        py::arg("plugin"), py::arg("level"), py::arg("device"), py::arg("only"), py::arg("skip"),
        py::arg("plugin_options"), py::arg("search_paths"), py::arg("onnx_dirs"), py::arg("stamp"));
  m.def("doctor", [](const std::string& plugin, std::vector<std::filesystem::path> plugin_paths,
                     bool require_conformance) {
    RuntimeOptions o;
    o.plugin_paths = std::move(plugin_paths);
    o.require_conformance = require_conformance;
    Result<std::vector<PluginDiagnosis>> found = internal_error("not run");
    {
      py::gil_scoped_release release;
      found = diagnose_plugins(o, plugin);
    }
    py::list out;
    for (const PluginDiagnosis& d : take(std::move(found))) {
      py::dict e;
      e["plugin"] = d.plugin;
      e["manifest"] = d.manifest_path.string();
      e["library"] = d.library.string();
      e["accepted"] = d.accepted();
      py::list checks;
      for (const DoctorCheck& c : d.checks) {
        py::dict cd;
        cd["name"] = c.name;
        cd["outcome"] = std::string(doctor_outcome_name(c.outcome));
        cd["detail"] = c.detail;
        cd["fix"] = c.fix;
        checks.append(cd);
      }
      e["checks"] = checks;
      e["report"] = d.to_string();
      out.append(e);
    }
    return out;
  }, py::arg("plugin"), py::arg("plugin_paths"), py::arg("require_conformance"));

  py::class_<PyRun>(m, "Run")
      .def("wait", &PyRun::wait, py::arg("timeout") = py::none())
      .def("done", [](const PyRun& r) { return r.handle.done(); })
      .def("outputs", [](PyRun& r) {
        r.wait(std::nullopt);
        return r.session->outputs();
      });
}
