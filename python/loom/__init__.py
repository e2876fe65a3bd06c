"""Loom from Python: list devices, compile ONNX models, load programs, run them.

    import loom, numpy as np
    print(loom.devices())                              # every device of every plugin
    report = loom.compile("model.onnx", "model.loom")  # the compile side (libloom-compiler)
    program = loom.load("model.loom", device="policy:fastest")
    session = program.session()                        # one per thread
    outputs = session.run({"x": np.zeros((1, 3, 224, 224), np.float32)})
    print(program.explain())                           # where each delegate went, and why

A thin layer over libloom.so and libloom-compiler.so: every decision (device
choice, shapes, placement) is the C++ library's. Failures raise subclasses of
:class:`loom.Error` carrying Loom's status code. Sessions release the GIL
while they run. ``loom.onnxruntime`` offers an ``InferenceSession`` with
ONNX Runtime's calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _loom
from ._errors import (AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError,
                      DeviceLostError, Error, FailedPreconditionError, IncompatibleError,
                      InternalError, InvalidArgumentError, NotFoundError, OutOfRangeError,
                      ResourceExhaustedError, UnavailableError, UnimplementedError)

__version__: str = _loom.__version__

PathLike = Union[str, "os.PathLike[str]"]
Feeds = Mapping[str, Any]

__all__ = [
    "Runtime", "Program", "Session", "Run", "default_runtime", "devices", "plugins", "compile",
    "load", "trace", "doctor", "Error", "InvalidArgumentError", "NotFoundError", "UnimplementedError",
    "IncompatibleError", "ResourceExhaustedError", "DeviceLostError", "DeadlineExceededError",
    "DataLossError", "InternalError", "FailedPreconditionError", "UnavailableError",
    "OutOfRangeError", "CancelledError", "AlreadyExistsError",
]


# Loom dtype names (loom/tensor.hpp) as numpy dtypes; bf16 has none.
_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
          "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
          "u64": np.uint64, "bool": np.bool_}


def _array(value, dtype) -> np.ndarray:
    a = np.asarray(value, dtype=dtype)
    if a.dtype.byteorder not in ("=", "|"):
        a = a.astype(a.dtype.newbyteorder("="))
    return np.require(a, requirements=["C_CONTIGUOUS", "ALIGNED"])


def _prepare(feeds: Feeds, declared: Optional[Mapping[str, Optional[str]]] = None,
             kinds: Optional[Mapping[str, str]] = None) -> Dict[str, np.ndarray]:
    """Each input as an aligned, C-contiguous, native-endian array (a copy only
    where the caller's array is not already one). A value that is not a numpy
    array or scalar (a list, a Python number) takes the input's declared dtype;
    an array keeps its own, which must be the input's. A sequence input
    (``kinds``) takes a list or tuple of arrays, an optional one None for
    none (docs/control-flow.md)."""
    if not isinstance(feeds, Mapping):
        raise TypeError("feeds must be a mapping of input names to arrays, not " + type(feeds).__name__)
    out = {}
    for name, value in feeds.items():
        if not isinstance(name, str):
            raise TypeError("input names must be str, not " + type(name).__name__)
        kind = (kinds or {}).get(name, "tensor")
        if kind.startswith("optional") and value is None:
            out[name] = None
            continue
        dtype = None
        if declared is not None and not isinstance(value, (np.ndarray, np.generic)):
            dtype = _NUMPY.get(declared.get(name) or "")
        if kind.endswith("sequence") and isinstance(value, (list, tuple)):
            out[name] = [_array(v, None if isinstance(v, (np.ndarray, np.generic)) else dtype) for v in value]
            continue
        out[name] = _array(value, dtype)
    return out


class Run:
    """A run started by :meth:`Session.run_async`. ``await run`` works too."""

    def __init__(self, native: "_loom.Run"):
        self._native = native

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits up to ``timeout`` seconds (None: until it ends). True when the run
        has finished (its error raised), False while it is still going."""
        return self._native.wait(timeout)

    def done(self) -> bool:
        return self._native.done()

    def result(self) -> Dict[str, np.ndarray]:
        """Waits for the run and returns its outputs."""
        return self._native.outputs()

    def __await__(self):
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.result).__await__()


class Session:
    """Runs one function of a program; owns its memory. One thread at a time."""

    def __init__(self, native: "_loom.Session"):
        self._native = native

    @property
    def inputs(self) -> List[dict]:
        """name, dtype, shape (None for an open dimension) and symbols of each input."""
        return self._native.function["inputs"]

    @property
    def outputs(self) -> List[dict]:
        return self._native.function["outputs"]

    @property
    def transfers(self) -> List[dict]:
        return self._native.transfers

    def _declared(self) -> Dict[str, Optional[str]]:
        return {d["name"]: d["dtype"] for d in self.inputs}

    def _kinds(self) -> Dict[str, str]:
        return {d["name"]: d.get("kind", "tensor") for d in self.inputs}

    def run(self, feeds: Feeds) -> Dict[str, np.ndarray]:
        """Runs on ``feeds`` (input name -> array-like) and returns every output as
        a new array. Inputs not given are zero (an open-shape input must be given)."""
        return self._native.run(_prepare(feeds, self._declared(), self._kinds()))

    def run_async(self, feeds: Feeds) -> Run:
        """Starts a run and returns at once; the session must not be used until the
        run is waited for."""
        return Run(self._native.run_async(_prepare(feeds, self._declared(), self._kinds())))


class Program:
    """A loaded program: its functions, where its delegates went, sessions."""

    def __init__(self, native: "_loom.Program"):
        self._native = native

    @property
    def functions(self) -> List[dict]:
        return self._native.functions

    @property
    def placements(self) -> List[dict]:
        """delegate, device and loader_key of each delegate."""
        return self._native.placements

    def explain(self) -> str:
        """Every candidate considered for each delegate and what became of it."""
        return self._native.explain()

    def session(self, function: Optional[str] = None) -> Session:
        return Session(self._native.session(function or ""))

    def run(self, feeds: Feeds, function: Optional[str] = None) -> Dict[str, np.ndarray]:
        """A session of its own for one run (make a session to run repeatedly)."""
        return self.session(function).run(feeds)


class Runtime:
    """Finds the plugins; loads programs; compiles ONNX models.

    plugin_paths: folders searched for plugin manifests first; threads: cap on
    plugins' worker threads (0: all cores); plugin_options: handed to every
    plugin; isolated: plugins to run in a process of their own ("*": all);
    require_conformance: refuse plugins without a valid conformance stamp;
    probe: load each plugin in a child first; log: called as log(level, line)
    for every line plugins log.
    """

    def __init__(self, plugin_paths: Sequence[PathLike] = (), threads: int = 0,
                 plugin_options: Optional[Mapping[str, str]] = None, isolated: Sequence[str] = (),
                 require_conformance: bool = False, probe: bool = True, use_environment: bool = True,
                 log=None):
        self._native = _loom.Runtime([os.fspath(p) for p in plugin_paths], threads,
                                     dict(plugin_options or {}), list(isolated), require_conformance,
                                     probe, use_environment, log)

    def devices(self) -> List[dict]:
        """uri, name, plugin, kind, capabilities, dtypes of every device."""
        return self._native.devices()

    def plugins(self) -> List[dict]:
        """Every plugin found: name, version, state (loaded, found, rejected), reason."""
        return self._native.plugins()

    def compile(self, model: Union[PathLike, bytes], output: Optional[PathLike] = None, *,
                targets: Optional[Sequence[str]] = None,
                input_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
                variants: Optional[str] = None, params_out: Optional[PathLike] = None) -> dict:
        """Compiles an ONNX model (a path or its bytes) into a program file.

        targets: plugin names in order of preference (None: every plugin found that
        compiles, accelerators first, as `loom compile` without --target; []: the
        reference kernels only); input_shapes: {"x": [None, 3, 224, 224]}, None
        leaving a dimension open; variants: "first" or "all" (None: "all" when the
        targets are the default, else "first"). Returns the report (with
        "target_order", "default_targets" and "variants" saying what was chosen);
        with ``output`` None the program's bytes are in report["program"].
        """
        with contextlib.ExitStack() as stack:
            if isinstance(model, (bytes, bytearray, memoryview)):
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="loom-compile-"))
                path = os.path.join(tmp, "model.onnx")
                with open(path, "wb") as f:
                    f.write(model)
                model = path
            keep = output is not None
            if not keep:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="loom-compile-"))
                output = os.path.join(tmp, "program.loom")
            report = self._native.compile(os.fspath(model), os.fspath(output),
                                          None if targets is None else list(targets),
                                          None if input_shapes is None else dict(input_shapes),
                                          variants or "", None if params_out is None else os.fspath(params_out))
            if keep:
                report["output"] = os.fspath(output)
            else:
                with open(output, "rb") as f:
                    report["program"] = f.read()
            return report

    def load(self, source: Union[PathLike, bytes], device: str = "", *, fallback: bool = False,
             run_timeout: float = 60.0, shape_cache: int = 4, max_tensor_bytes: int = 0) -> Program:
        """Loads a program file (a path, or its bytes). device: a device selector
        ("cpu-simd://0", a plugin name, "kind:gpu", "policy:fastest", a list tried
        in order; "" each delegate's first variant a present device loads)."""
        if not isinstance(source, (bytes, bytearray, memoryview)):
            source = os.fspath(source)
        return Program(self._native.load(source, device, fallback, run_timeout, shape_cache,
                                         max_tensor_bytes))

    @contextlib.contextmanager
    def trace(self, path: Optional[PathLike] = None) -> Iterator[None]:
        """Records every run inside the block; writes Chrome trace JSON to path."""
        self._native.trace_start()
        try:
            yield
        finally:
            self._native.trace_stop(None if path is None else os.fspath(path))


_default_lock = threading.Lock()
_default: Optional[Runtime] = None


def default_runtime() -> Runtime:
    """The runtime the module-level functions use, made at the first call
    with the default options."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime()
        return _default


def devices() -> List[dict]:
    return default_runtime().devices()


def plugins() -> List[dict]:
    return default_runtime().plugins()


def compile(model: Union[PathLike, bytes], output: Optional[PathLike] = None, **options) -> dict:
    """Runtime.compile on the default runtime."""
    return default_runtime().compile(model, output, **options)


def load(source: Union[PathLike, bytes], device: str = "", **options) -> Program:
    """Runtime.load on the default runtime."""
    return default_runtime().load(source, device, **options)


def doctor(plugin: str = "", plugin_paths: Sequence[PathLike] = (),
           require_conformance: bool = False) -> List[dict]:
    """What `loom doctor` checks, for the plugins ``plugin`` names (a manifest, a
    library or a name; "": every one found): each with ``accepted``, its
    ``checks`` (name, outcome OK/PROBLEM/NOTE/SKIP, detail, fix) and ``report``,
    the text `loom doctor` prints."""
    return _loom.doctor(plugin, [os.fspath(p) for p in plugin_paths], require_conformance)


def trace(path: Optional[PathLike] = None):
    """Runtime.trace on the default runtime: ``with loom.trace("run.json"): ...``"""
    return default_runtime().trace(path)
