"""ONNX Runtime's InferenceSession calls on Loom: switch by changing one import.

    import loom.onnxruntime as ort
    session = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    (y,) = session.run(None, {name: x})

The model is compiled once with its dynamic dimensions left open (one
program for every input shape), for the Loom plugins the providers name, with
a variant per plugin so that the program runs on whichever is present (and
on the reference kernels for what none takes). Providers: ONNX Runtime's
names map to Loom plugins (CPUExecutionProvider: cpu-simd;
CUDAExecutionProvider, ROCMExecutionProvider, DmlExecutionProvider,
VulkanExecutionProvider: vulkan-compute), and a Loom plugin name is taken as
is. SessionOptions and RunOptions are accepted; of their settings only
intra_op_num_threads (the plugins' thread cap) has a Loom meaning.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import Runtime, _prepare

_PROVIDERS = {
    "CPUExecutionProvider": "cpu-simd",
    "CUDAExecutionProvider": "vulkan-compute",
    "ROCMExecutionProvider": "vulkan-compute",
    "DmlExecutionProvider": "vulkan-compute",
    "VulkanExecutionProvider": "vulkan-compute",
}

# Loom dtype names (loom/tensor.hpp) as ONNX Runtime spells tensor types.
_TYPES = {
    "f32": "tensor(float)", "f64": "tensor(double)", "f16": "tensor(float16)",
    "bf16": "tensor(bfloat16)", "i8": "tensor(int8)", "i16": "tensor(int16)",
    "i32": "tensor(int32)", "i64": "tensor(int64)", "u8": "tensor(uint8)",
    "u16": "tensor(uint16)", "u32": "tensor(uint32)", "u64": "tensor(uint64)",
    "bool": "tensor(bool)",
}


class SessionOptions:
    """Accepted for compatibility; intra_op_num_threads caps the plugins' threads."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.log_severity_level = 2
        self.graph_optimization_level = None


class RunOptions:
    """Accepted for compatibility; Loom has no per-run options here."""

    def __init__(self):
        self.log_severity_level = 2


class NodeArg:
    """An input or output: name, shape (an int, or the symbol's name or None for
    a dynamic dimension) and type ("tensor(float)")."""

    def __init__(self, desc: dict):
        self.name: str = desc["name"]
        self.shape: List[Union[int, str, None]] = [
            d if d is not None else s for d, s in zip(desc["shape"], desc["symbols"])]
        self.type: Optional[str] = _TYPES.get(desc["dtype"]) if desc["dtype"] else None

    def __repr__(self) -> str:
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


def get_available_providers() -> List[str]:
    """The ONNX Runtime provider names whose Loom plugin has a device here."""
    plugins = {d["plugin"] for d in Runtime().devices()}
    return [p for p, plugin in _PROVIDERS.items() if plugin in plugins]


class InferenceSession:
    """ONNX Runtime's InferenceSession over one Loom program."""

    def __init__(self, path_or_bytes: Union[str, "os.PathLike[str]", bytes],
                 sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Union[str, tuple]]] = None,
                 provider_options: Optional[Sequence[Mapping[str, Any]]] = None, **kwargs):
        threads = int(getattr(sess_options, "intra_op_num_threads", 0) or 0)
        self._runtime = Runtime(threads=threads)
        names = []
        requested = []  # (provider name as given, its plugin)
        for p in providers or ["CPUExecutionProvider"]:
            name = p[0] if isinstance(p, tuple) else p
            plugin = _PROVIDERS.get(name, name)
            requested.append((name, plugin))
            if plugin not in names:
                names.append(plugin)
        found = {r["name"] for r in self._runtime.plugins() if r["state"] != "rejected"}
        unknown = [n for n in names if n not in found and n not in _PROVIDERS.values()]
        if unknown:
            raise ValueError("unknown provider(s) " + ", ".join(unknown) + "; ONNX Runtime names: " +
                             ", ".join(_PROVIDERS) + "; Loom plugins here: " + ", ".join(sorted(found)))
        self._targets = [n for n in names if n in found]
        model = path_or_bytes if isinstance(path_or_bytes, (bytes, bytearray)) else os.fspath(path_or_bytes)
        report = self._runtime.compile(model, targets=self._targets, variants="all")
        self._report = report
        # Each delegate on the first of its variants (in the providers' order) that a
        # present device loads, the reference kernels last.
        self._program = self._runtime.load(report["program"])
        self._session = self._program.session()
        # As ONNX Runtime: the requested providers that are available, in the order
        # given, with CPUExecutionProvider (the reference kernels' fallback) last.
        self._providers = [n for n, plugin in requested if plugin in self._targets]
        if "CPUExecutionProvider" not in self._providers:
            self._providers.append("CPUExecutionProvider")

    def get_inputs(self) -> List[NodeArg]:
        return [NodeArg(d) for d in self._session.inputs]

    def get_outputs(self) -> List[NodeArg]:
        return [NodeArg(d) for d in self._session.outputs]

    def get_providers(self) -> List[str]:
        return list(self._providers)

    def get_modelmeta(self):
        return None

    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any],
            run_options: Optional[RunOptions] = None) -> List[np.ndarray]:
        """The outputs named (None: all, in the model's order) for ``input_feed``."""
        known = [d["name"] for d in self._session.inputs]
        for name in input_feed:
            if name not in known:
                raise ValueError(f"input '{name}' is not an input of the model (inputs: {', '.join(known)})")
        missing = [n for n in known if n not in input_feed]
        if missing:
            raise ValueError("missing input(s): " + ", ".join(missing))
        results = self._session.run(_prepare(input_feed))
        names = list(output_names) if output_names else [d["name"] for d in self._session.outputs]
        for n in names:
            if n not in results:
                raise ValueError(f"'{n}' is not an output of the model (outputs: {', '.join(results)})")
        return [results[n] for n in names]
