"""Fixtures of the `loom serve` protocol tests: the models (made with
make_models.py), and servers started on free loopback ports.

The loom binary is $LOOM_BIN (CTest sets it), else build/bin/loom. Every wait
is bounded; $LOOM_TIME_SCALE (4 under ASan) stretches the bounds.
"""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("LOOM_SOURCE_DIR", os.path.join(HERE, "..", ".."))
LOOM = os.environ.get("LOOM_BIN", os.path.join(SOURCE, "build", "bin", "loom"))
SCALE = float(os.environ.get("LOOM_TIME_SCALE", "1"))


def scaled(seconds):
    return seconds * SCALE


class Server:
    """One `loom serve` process; stop() sends SIGTERM and waits for it."""

    def __init__(self, models, extra=()):
        args = [LOOM, "serve", "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "0"]
        for name, path in models.items():
            args += ["--model", f"{name}={path}"]
        args += list(extra)
        self.args = args
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.stdout = []
        self.stderr = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr, False), daemon=True).start()
        self.http_port = None
        self.grpc_port = None
        deadline = time.monotonic() + scaled(120)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise AssertionError(f"loom serve did not get ready: {self.stdout} {self.stderr}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"loom serve exited: rc={self.proc.wait()} {''.join(self.stderr)}")
            if line.startswith("loom serve: REST on http://"):
                self.http_port = int(line.rsplit(":", 1)[1])
            if line.startswith("loom serve: gRPC on "):
                self.grpc_port = int(line.rsplit(":", 1)[1])
            if line.strip() == "loom serve: ready":
                break
        self.url = f"http://127.0.0.1:{self.http_port}"

    def _read(self, stream, sink, lines):
        for line in stream:
            sink.append(line)
            if lines:
                self.lines.put(line)
        if lines:
            self.lines.put(None)

    def stop(self, timeout=60):
        """SIGTERM, then the exit code once the process ends."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=scaled(timeout))
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("loom serve did not stop within the drain timeout after SIGTERM")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), str(out)], check=True)
    return {name: str(out / f"{name}.onnx") for name in ("add", "dtypes", "half", "slow")}


@pytest.fixture(scope="session")
def server(models):
    """add, dtypes and half on cpu-simd, two sessions each, no batching."""
    s = Server({k: models[k] for k in ("add", "dtypes", "half")},
               ["--device", "cpu-simd", "--instances", "2", "--max-request-bytes", "1000000"])
    yield s
    assert s.stop() == 0, "".join(s.stderr)
