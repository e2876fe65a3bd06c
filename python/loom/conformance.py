"""The conformance suite of `loom conformance` from Python.

    import loom.conformance
    report = loom.conformance.run("cpu-simd", level="basic")
    assert report["totals"]["failed"] == 0, [c for c in report["checks"] if c["outcome"] == "fail"]

Each check runs in a child process, as the command runs them, so that a
plugin that crashes fails its check instead of taking Python down.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence

from . import _loom

__all__ = ["run"]


def run(plugin: str, level: str = "basic", device: str = "", *, only: Sequence[str] = (),
        skip: Sequence[str] = (), plugin_options: Optional[Mapping[str, str]] = None,
        search_paths: Sequence[str] = (), onnx_dirs: Sequence[str] = (), stamp: bool = False) -> Dict[str, Any]:
    """Runs the checks on ``plugin`` (a manifest, a library, or a plugin name) and
    returns the report as `loom conformance --report` writes it (plugin, device,
    totals, and each check's id, outcome and message). ``stamp`` records the
    result beside the plugin's manifest. A suite that cannot start (no such
    plugin) raises; what the plugin does wrong is a failed check."""
    text = _loom.conformance_run(plugin, level, device, list(only), list(skip), dict(plugin_options or {}),
                                 [os.fspath(p) for p in search_paths], [os.fspath(p) for p in onnx_dirs],
                                 stamp)
    return json.loads(text)
