"""The REST endpoints of `loom serve`, driven with curl (a real client, not
the server's own code): health, metadata, inference in JSON and with the
binary-data extension, every dtype, the errors of bad requests, slow and
excess connections, concurrency, batching, metrics and the SIGTERM drain."""
import json
import os
import socket
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest

from conftest import Server, scaled

NP = {"FP32": np.float32, "FP64": np.float64, "INT8": np.int8, "INT16": np.int16,
      "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8, "UINT16": np.uint16,
      "UINT32": np.uint32, "UINT64": np.uint64, "BOOL": np.bool_, "FP16": np.float16}


def curl(url, data=None, headers=(), method=None, timeout=30):
    """(HTTP status, headers as a dict of lower-case names, body bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        body_file = os.path.join(tmp, "body")
        head_file = os.path.join(tmp, "head")
        cmd = ["curl", "-s", "-S", "--max-time", str(int(scaled(timeout))), "-o", body_file,
               "-D", head_file, "-w", "%{http_code}"]
        for h in headers:
            cmd += ["-H", h]
        if data is not None:
            data_file = os.path.join(tmp, "data")
            with open(data_file, "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
            cmd += ["--data-binary", "@" + data_file]
        if method:
            cmd += ["-X", method]
        out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True)
        with open(body_file, "rb") as f:
            body = f.read()
        head = {}
        with open(head_file, "r", errors="replace") as f:
            for line in f.read().splitlines()[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    head[k.strip().lower()] = v.strip()
        return int(out.stdout), head, body


def infer(server, model, doc, version=None):
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    status, _, body = curl(server.url + path, json.dumps(doc))
    return status, json.loads(body)


def tensor(name, array, datatype):
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.flatten().tolist()}


def test_health_and_server_metadata(server):
    assert curl(server.url + "/v2/health/live")[0] == 200
    status, _, body = curl(server.url + "/v2/health/ready")
    assert status == 200 and json.loads(body) == {"ready": True}
    status, _, body = curl(server.url + "/v2")
    meta = json.loads(body)
    assert status == 200 and meta["name"] == "loom" and "binary_tensor_data" in meta["extensions"]


def test_model_metadata_and_readiness(server):
    status, _, body = curl(server.url + "/v2/models/add")
    meta = json.loads(body)
    assert status == 200
    assert meta["name"] == "add" and meta["versions"] == ["1"] and meta["platform"] == "loom"
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]},
                              {"name": "y", "datatype": "FP32", "shape": [-1, 4]}]
    assert [o["name"] for o in meta["outputs"]] == ["sum", "prod"]
    assert curl(server.url + "/v2/models/add/versions/1")[0] == 200
    status, _, body = curl(server.url + "/v2/models/add/versions/1/ready")
    assert status == 200 and json.loads(body)["ready"] is True
    status, _, body = curl(server.url + "/v2/models/add/versions/7")
    assert status == 404 and "no version '7'" in json.loads(body)["error"]
    status, _, body = curl(server.url + "/v2/models/nope/ready")
    assert status == 404 and "models: add, dtypes, half" in json.loads(body)["error"]


def test_infer_json_flat_and_nested(server):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = np.full((2, 4), 0.5, dtype=np.float32)
    doc = {"id": "req-7", "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": x.tolist()},
                                     tensor("y", y, "FP32")]}
    status, out = infer(server, "add", doc)
    assert status == 200, out
    assert out["id"] == "req-7" and out["model_name"] == "add" and out["model_version"] == "1"
    outs = {o["name"]: o for o in out["outputs"]}
    assert outs["sum"]["shape"] == [2, 4] and outs["sum"]["datatype"] == "FP32"
    np.testing.assert_array_equal(np.array(outs["sum"]["data"], np.float32).reshape(2, 4), x + y)
    np.testing.assert_array_equal(np.array(outs["prod"]["data"], np.float32).reshape(2, 4), x * y)
    # Only the output asked for, through the versioned URL.
    doc["outputs"] = [{"name": "prod"}]
    status, out = infer(server, "add", doc, version="1")
    assert status == 200 and [o["name"] for o in out["outputs"]] == ["prod"]


def test_every_dtype_in_json(server):
    rng = np.random.default_rng(3)
    inputs, expect = [], {}
    for name, t in NP.items():
        if name == "FP16":
            continue
        if name == "BOOL":
            a = rng.integers(0, 2, (3, 3)).astype(np.bool_)
            expect[name] = ~a
        elif name.startswith("FP"):
            a = rng.standard_normal((3, 3)).astype(t)
            expect[name] = a + a
        else:
            info = np.iinfo(t)
            a = rng.integers(max(info.min, -1000) // 2, min(info.max, 1000) // 2, (3, 3)).astype(t)
            expect[name] = a + a
        inputs.append(tensor(f"in_{name}", a, name))
    status, out = infer(server, "dtypes", {"inputs": inputs})
    assert status == 200, out
    for o in out["outputs"]:
        name = o["name"][4:]
        assert o["datatype"] == name
        got = np.array(o["data"], dtype=NP[name]).reshape(o["shape"])
        np.testing.assert_array_equal(got, expect[name], err_msg=name)


def binary_request(inputs, outputs=None, all_binary=False):
    """The binary-data extension: JSON header, then the tensors' bytes."""
    doc = {"inputs": [], "parameters": {"binary_data_output": all_binary}}
    blob = b""
    for name, array, datatype in inputs:
        raw = np.ascontiguousarray(array).tobytes()
        doc["inputs"].append({"name": name, "shape": list(array.shape), "datatype": datatype,
                              "parameters": {"binary_data_size": len(raw)}})
        blob += raw
    if outputs is not None:
        doc["outputs"] = outputs
    head = json.dumps(doc).encode()
    return head + blob, [f"Inference-Header-Content-Length: {len(head)}",
                         "Content-Type: application/octet-stream"]


def split_binary_response(headers, body):
    n = int(headers["inference-header-content-length"])
    doc = json.loads(body[:n])
    offset, arrays = n, {}
    for o in doc["outputs"]:
        if "parameters" in o and "binary_data_size" in o["parameters"]:
            size = o["parameters"]["binary_data_size"]
            arrays[o["name"]] = np.frombuffer(body[offset:offset + size], NP[o["datatype"]]).reshape(o["shape"])
            offset += size
        else:
            arrays[o["name"]] = np.array(o["data"], NP[o["datatype"]]).reshape(o["shape"])
    assert offset == len(body)
    return doc, arrays


def test_binary_data_extension(server):
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    data, headers = binary_request([("x", x, "FP32"), ("y", y, "FP32")],
                                   outputs=[{"name": "sum", "parameters": {"binary_data": True}},
                                            {"name": "prod"}])
    status, head, body = curl(server.url + "/v2/models/add/infer", data, headers)
    assert status == 200, body
    _, arrays = split_binary_response(head, body)
    np.testing.assert_array_equal(arrays["sum"], x + y)
    np.testing.assert_array_equal(arrays["prod"], x * y)
    # FP16 has no JSON form: in and out as binary data.
    h = np.array([[1.5, -2], [0.25, 1000]], np.float16)
    data, headers = binary_request([("h", h, "FP16")])
    status, head, body = curl(server.url + "/v2/models/half/infer", data, headers)
    assert status == 200, body
    _, arrays = split_binary_response(head, body)
    np.testing.assert_array_equal(arrays["h2"], h + h)


BAD_REQUESTS = [
    ("{\"inputs\": [", 400, "not valid JSON"),
    ("[1, 2]", 400, "not a JSON object"),
    ({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "INT64", "data": [0] * 8},
                 {"name": "y", "shape": [2, 4], "datatype": "FP32", "data": [0] * 8}]}, 400,
     "input 'x' has datatype INT64; the model takes FP32"),
    ({"inputs": [{"name": "x", "shape": [2, 5], "datatype": "FP32", "data": [0] * 10},
                 {"name": "y", "shape": [2, 4], "datatype": "FP32", "data": [0] * 8}]}, 400,
     "input 'x' has shape [2, 5]; the model takes [?, 4]"),
    ({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [0] * 7},
                 {"name": "y", "shape": [2, 4], "datatype": "FP32", "data": [0] * 8}]}, 400,
     "'data' holds 7 elements; shape [2, 4] has 8"),
    ({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0] * 4}]}, 400,
     "input 'y' is missing"),
    ({"inputs": [{"name": "z", "shape": [1, 4], "datatype": "FP32", "data": [0] * 4}]}, 400,
     "unknown input 'z'; its inputs are x, y"),
    ({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0] * 4},
                 {"name": "y", "shape": [1, 4], "datatype": "FP32", "data": [0] * 4}],
      "outputs": [{"name": "quotient"}]}, 400, "unknown output 'quotient'"),
    ({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, "a", 0]}]}, 400,
     "element 2 is \"a\", not a number"),
    ({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "STRING", "data": [0] * 4}]}, 400,
     "datatype 'STRING' is not one Loom runs"),
    ({"inputs": [{"name": "x", "shape": [1, -4], "datatype": "FP32", "data": []}]}, 400,
     "'shape' holds -4, not a non-negative integer"),
    ({"inputs": [{"name": "x", "shape": [1 << 40, 1 << 30], "datatype": "FP32", "data": []}]}, 413,
     "bytes this server takes"),
    ({"inputs": "x"}, 400, "'inputs' is missing or not an array"),
]


@pytest.mark.parametrize("doc,status,message", BAD_REQUESTS)
def test_bad_requests_get_the_protocols_error(server, doc, status, message):
    body = doc if isinstance(doc, str) else json.dumps(doc)
    got, _, reply = curl(server.url + "/v2/models/add/infer", body)
    assert got == status, reply
    assert message in json.loads(reply)["error"]


def test_unknown_model_and_version_are_404(server):
    doc = {"inputs": []}
    status, out = infer(server, "nope", doc)
    assert status == 404 and "model 'nope' is not served here" in out["error"]
    status, out = infer(server, "add", doc, version="2")
    assert status == 404 and "no version '2'" in out["error"]
    status, _, body = curl(server.url + "/v2/nothing")
    assert status == 404 and "no endpoint GET /v2/nothing" in json.loads(body)["error"]


def test_binary_data_errors(server):
    x = np.zeros((1, 4), np.float32)
    data, headers = binary_request([("x", x, "FP32"), ("y", x, "FP32")])
    status, _, body = curl(server.url + "/v2/models/add/infer", data[:-4], headers)
    assert status == 400 and "go past the body's end" in json.loads(body)["error"]
    status, _, body = curl(server.url + "/v2/models/add/infer", data + b"xx", headers)
    assert status == 400 and "2 bytes of binary data after the JSON that no input claims" in json.loads(body)["error"]
    status, _, body = curl(server.url + "/v2/models/add/infer", data,
                           ["Inference-Header-Content-Length: 99999"])
    assert status == 400 and "Inference-Header-Content-Length is 99999" in json.loads(body)["error"]
    status, _, body = curl(server.url + "/v2/models/add/infer", data, ["Inference-Header-Content-Length: -3"])
    assert status == 400 and "is not a byte count" in json.loads(body)["error"]


def test_body_over_the_limit_is_413(server):
    # The server takes 1,000,000 bytes; this body is 2 MB of JSON.
    doc = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0] * 4}],
           "id": "x" * 2_000_000}
    status, _, body = curl(server.url + "/v2/models/add/infer", json.dumps(doc))
    assert status == 413 and "larger than this server takes" in json.loads(body)["error"]


def test_concurrent_requests_all_answered_correctly(server):
    errors = []

    def client(k):
        rng = np.random.default_rng(100 + k)
        for i in range(10):
            rows = int(rng.integers(1, 5))
            x = rng.standard_normal((rows, 4)).astype(np.float32)
            y = rng.standard_normal((rows, 4)).astype(np.float32)
            status, out = infer(server, "add", {"id": f"{k}-{i}", "inputs": [tensor("x", x, "FP32"),
                                                                             tensor("y", y, "FP32")]})
            if status != 200 or out["id"] != f"{k}-{i}":
                errors.append((k, i, status, out))
                continue
            got = np.array(out["outputs"][0]["data"], np.float32).reshape(rows, 4)
            if not np.array_equal(got, x + y):
                errors.append((k, i, "wrong sum"))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(scaled(120))
    assert not errors, errors[:3]


def test_metrics_count_requests(server):
    x = np.ones((1, 4), np.float32)
    infer(server, "add", {"inputs": [tensor("x", x, "FP32"), tensor("y", x, "FP32")]})
    status, head, body = curl(server.url + "/metrics")
    text = body.decode()
    assert status == 200 and head["content-type"].startswith("text/plain")
    ok = [l for l in text.splitlines()
          if l.startswith('loom_serve_requests_total{model="add",device="cpu-simd://0",outcome="success"}')]
    assert ok and int(ok[0].split()[-1]) >= 1, text
    assert 'loom_serve_request_duration_seconds_count{model="add"}' in text
    assert 'loom_serve_rejected_requests_total{protocol="http"}' in text


def raw_http(port, data, wait):
    """Sends `data` on a fresh connection, then reads until the server closes
    it or `wait` seconds pass: (bytes read, seconds until closed or None)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    s.settimeout(wait)
    start = time.monotonic()
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got, time.monotonic() - start
            got += chunk
    except socket.timeout:
        return got, None
    finally:
        s.close()


def test_slow_clients_and_connection_flood(models):
    """Two REST threads, one waiting connection allowed, 2 s read timeout:
    two clients that stop mid-body hold both threads; the next connection
    waits; the one after it gets 503 at once. Once the slow clients are
    dropped, requests are served again."""
    s = Server({"add": models["add"]}, ["--device", "cpu-simd", "--no-grpc", "--http-threads", "2",
                                        "--http-max-waiting", "1", "--http-read-timeout", "2"])
    try:
        stalled = (b"POST /v2/models/add/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inp")
        results = []
        slow = [threading.Thread(target=lambda: results.append(raw_http(s.http_port, stalled, scaled(30))))
                for _ in range(2)]
        for t in slow:
            t.start()
        time.sleep(0.5)
        waiting = threading.Thread(target=lambda: results.append(
            raw_http(s.http_port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     scaled(30))))
        waiting.start()
        time.sleep(0.3)
        start = time.monotonic()
        status, _, body = curl(s.url + "/v2/health/live")
        assert status == 503 and "too many connections" in json.loads(body)["error"]
        assert time.monotonic() - start < 1.5, "the excess connection was not answered at once"
        for t in slow + [waiting]:
            t.join(scaled(30))
        # The stalled ones were dropped after the read timeout, not held.
        for got, closed_after in results[:2]:
            assert closed_after is not None and closed_after < scaled(10)
        assert any(b"200 OK" in got for got, _ in results), results
        x = np.ones((1, 4), np.float32)
        status, out = infer(s, "add", {"inputs": [tensor("x", x, "FP32"), tensor("y", x, "FP32")]})
        assert status == 200, out
    finally:
        assert s.stop() == 0


def test_dynamic_batching_runs_requests_together(models):
    s = Server({"add": models["add"]}, ["--device", "cpu-simd", "--no-grpc", "--max-batch", "16",
                                        "--batch-delay-us", "200000"])
    try:
        errors, barrier = [], threading.Barrier(8)

        def client(k):
            x = np.full((2, 4), k, np.float32)
            y = np.arange(8, dtype=np.float32).reshape(2, 4)
            barrier.wait()
            status, out = infer(s, "add", {"id": str(k), "inputs": [tensor("x", x, "FP32"), tensor("y", y, "FP32")]})
            got = np.array(out["outputs"][0]["data"], np.float32).reshape(2, 4) if status == 200 else None
            if status != 200 or out["id"] != str(k) or not np.array_equal(got, x + y):
                errors.append((k, status, out))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(scaled(60))
        assert not errors, errors
        text = curl(s.url + "/metrics")[2].decode()
        runs = sum(int(l.split()[-1]) for l in text.splitlines() if l.startswith("loom_serve_runs_total"))
        rows = sum(int(l.split()[-1]) for l in text.splitlines() if l.startswith("loom_serve_rows_total"))
        assert rows == 16, text
        assert runs < 8, f"8 requests took {runs} runs: nothing was batched"
    finally:
        assert s.stop() == 0


def test_sigterm_drains_in_flight_requests(models):
    """Three slow requests on one session; SIGTERM while they run: readiness
    turns 503, new requests get 503, the three finish with 200, exit 0."""
    s = Server({"slow": models["slow"]}, ["--device", "cpu-simd", "--no-grpc", "--threads", "1"])
    try:
        # 3072 rows (about 26 GFLOP a run): with 768, a 2-core AVX-512 VM ran
        # all three before the readiness check below.
        x = np.random.default_rng(5).standard_normal((3072, 256)).astype(np.float32)
        data, headers = binary_request([("x", x, "FP32")], all_binary=True)
        # One run alone, for the time it takes and the answer.
        start = time.monotonic()
        status, head, body = curl(s.url + "/v2/models/slow/infer", data, headers, timeout=120)
        one_run = time.monotonic() - start
        assert status == 200, body
        _, expect = split_binary_response(head, body)
        results = []
        clients = [threading.Thread(target=lambda: results.append(
            curl(s.url + "/v2/models/slow/infer", data, headers, timeout=120))) for _ in range(3)]
        for t in clients:
            t.start()
        time.sleep(min(0.3, one_run / 2))
        s.proc.send_signal(15)
        time.sleep(0.1)
        status, _, body = curl(s.url + "/v2/health/ready")
        assert status == 503 and json.loads(body) == {"ready": False}
        status, _, body = curl(s.url + "/v2/models/slow/infer", data, headers)
        assert status == 503 and "shutting down" in json.loads(body)["error"]
        for t in clients:
            t.join(scaled(120))
        assert len(results) == 3
        for status, head, body in results:
            assert status == 200, body
            np.testing.assert_array_equal(split_binary_response(head, body)[1]["y"], expect["y"])
        assert s.proc.wait(timeout=scaled(60)) == 0
        out = "".join(s.stdout)
        assert "SIGTERM: draining" in out and "loom serve: stopped\n" in out, out
    finally:
        s.kill()


def test_trace_on_demand(server):
    x = np.ones((1, 4), np.float32)
    result = {}

    def record():
        result["reply"] = curl(server.url + "/v2/loom/trace?ms=1500")

    t = threading.Thread(target=record)
    t.start()
    time.sleep(0.3)
    for _ in range(5):
        infer(server, "add", {"inputs": [tensor("x", x, "FP32"), tensor("y", x, "FP32")]})
    t.join(scaled(30))
    status, _, body = result["reply"]
    assert status == 200, body
    events = json.loads(body)
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert len(events) >= 5, events[:3]
    status, _, body = curl(server.url + "/v2/loom/trace?ms=0")
    assert status == 400 and "1 to 60000 ms" in json.loads(body)["error"]
    status, _, body = curl(server.url + "/v2/loom/trace?ms=abc")
    assert status == 400 and "not a whole number" in json.loads(body)["error"]


@pytest.mark.parametrize("args,message", [
    (["--model", "a=/nonexistent/model.onnx"], "/nonexistent/model.onnx"),
    (["--model", "a"], "--model 'a' is not NAME=VALUE"),
    (["--model", "bad/name=MODEL"], "model name 'bad/name' is not 1 to 128 letters"),
    (["--model", "a=MODEL", "--model", "a=MODEL"], "model 'a' is given twice"),
    (["--model", "a=MODEL", "--model-device", "b=cpu-simd"], "--model-device names model 'b'"),
    (["--model", "a=MODEL", "--device", "no-such-plugin"], "no-such-plugin"),
    (["--model", "a=MODEL", "--no-http", "--no-grpc"], "leave nothing to listen on"),
])
def test_bad_command_lines_fail_with_one_line(models, args, message):
    from conftest import LOOM
    args = [a.replace("MODEL", models["add"]) for a in args]
    out = subprocess.run([LOOM, "serve", "--http-port", "0", "--grpc-port", "0"] + args,
                         capture_output=True, text=True, timeout=scaled(120))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "loom: error:" in out.stderr and message in out.stderr, out.stderr


def test_model_device_selects_per_model(models):
    s = Server({"add": models["add"], "slow": models["slow"]},
               ["--device", "cpu-simd", "--model-device", "slow=fpga-stub", "--no-grpc"])
    try:
        x = np.ones((1, 4), np.float32)
        assert infer(s, "add", {"inputs": [tensor("x", x, "FP32"), tensor("y", x, "FP32")]})[0] == 200
        x = np.ones((1, 256), np.float32)
        assert infer(s, "slow", {"inputs": [tensor("x", x, "FP32")]})[0] == 200
        text = curl(s.url + "/metrics")[2].decode()
        assert 'loom_serve_requests_total{model="add",device="cpu-simd://0",outcome="success"} 1' in text, text
        # fpga-stub takes the MatMuls; the Tanh nodes run on the reference kernels.
        assert 'loom_serve_requests_total{model="slow",device="fpga-stub://0",outcome="success"} 1' in text, text
    finally:
        assert s.stop() == 0
