"""loom serve's gRPC front end (inference.GRPCInferenceService) from
Python's gRPC client, as KServe's and Triton's clients talk to it. The
client's stubs are generated at test time from serve/grpc_predict_v2.proto
with grpc_tools (python3-grpc-tools), so the test checks the file the server
was built from. Every response is checked against NumPy. The server is
conftest.py's (add, dtypes and half on cpu-simd, --max-request-bytes
1000000)."""
import concurrent.futures
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

import grpc  # python3-grpcio
import numpy as np
import pytest
from conftest import LOOM, SOURCE, Server, scaled
from grpc_tools import protoc  # python3-grpc-tools

# The datatypes a typed request carries: (protocol name, NumPy dtype,
# InferTensorContents field).
TYPED = [
    ("BOOL", np.bool_, "bool_contents"),
    ("INT8", np.int8, "int_contents"),
    ("INT16", np.int16, "int_contents"),
    ("INT32", np.int32, "int_contents"),
    ("INT64", np.int64, "int64_contents"),
    ("UINT8", np.uint8, "uint_contents"),
    ("UINT16", np.uint16, "uint_contents"),
    ("UINT32", np.uint32, "uint_contents"),
    ("UINT64", np.uint64, "uint64_contents"),
    ("FP32", np.float32, "fp32_contents"),
    ("FP64", np.float64, "fp64_contents"),
]
NP_DTYPE = {name: dt for name, dt, _ in TYPED}
NP_DTYPE["FP16"] = np.float16
FIELD = {name: field for name, _, field in TYPED}
SHAPE = [2, 3]  # of dtypes' inputs: N = 2
HALF_SHAPE = [2, 2]


@pytest.fixture(scope="session")
def pb(tmp_path_factory):
    """The protocol's messages and stubs, generated from our .proto."""
    out = str(tmp_path_factory.mktemp("grpc_stubs"))
    serve_dir = os.path.join(SOURCE, "serve")
    rc = protoc.main(["protoc", "-I" + serve_dir, "--python_out=" + out, "--grpc_python_out=" + out,
                      os.path.join(serve_dir, "grpc_predict_v2.proto")])
    assert rc == 0, "grpc_tools.protoc failed on serve/grpc_predict_v2.proto"
    sys.path.insert(0, out)
    try:
        import grpc_predict_v2_pb2 as messages
        import grpc_predict_v2_pb2_grpc as services
    finally:
        sys.path.remove(out)
    return messages, services


@pytest.fixture(scope="module")
def stub(server, pb):
    messages, services = pb
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}",
                                    options=[("grpc.max_send_message_length", 64 << 20)])
    grpc.channel_ready_future(channel).result(timeout=scaled(30))
    yield services.GRPCInferenceServiceStub(channel)
    channel.close()


def sample(name, rng):
    dt = NP_DTYPE[name]
    if name == "BOOL":
        return rng.integers(0, 2, SHAPE).astype(np.bool_)
    if name.startswith("FP"):
        return (rng.integers(-1000, 1000, SHAPE) / 8).astype(dt)
    info = np.iinfo(dt)
    # Halfway to the type's limits, so that x + x does not overflow.
    return rng.integers(max(info.min // 2, -(1 << 40)), min(info.max // 2, 1 << 40), SHAPE, dtype=dt)


def expected(name, x):
    return np.logical_not(x) if name == "BOOL" else x + x


def dtypes_request(pb, arrays, raw, **kw):
    messages, _ = pb
    request = messages.ModelInferRequest(model_name="dtypes", **kw)
    for name, x in arrays.items():
        tensor = request.inputs.add(name="in_" + name, datatype=name, shape=list(x.shape))
        if raw:
            request.raw_input_contents.append(x.tobytes())
        else:
            getattr(tensor.contents, FIELD[name]).extend(x.flatten().tolist())
    return request


def output_array(response, index):
    out = response.outputs[index]
    dt = NP_DTYPE[out.datatype]
    if response.raw_output_contents:
        data = np.frombuffer(response.raw_output_contents[index], dtype=dt)
    else:
        data = np.array(getattr(out.contents, FIELD[out.datatype]), dtype=dt)
    return data.reshape(list(out.shape))


def check_dtypes_response(response, arrays, raw):
    assert bool(response.raw_output_contents) == raw
    names = [o.name for o in response.outputs]
    assert sorted(names) == sorted("out_" + n for n in arrays)
    for i, out in enumerate(response.outputs):
        name = out.name[len("out_"):]
        assert out.datatype == name
        assert list(out.shape) == SHAPE
        np.testing.assert_array_equal(output_array(response, i), expected(name, arrays[name]), err_msg=name)


def rpc_error(call, *args, **kw):
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kw)
    return info.value


def test_live_ready_and_model_ready(stub, pb):
    messages, _ = pb
    assert stub.ServerLive(messages.ServerLiveRequest()).live
    assert stub.ServerReady(messages.ServerReadyRequest()).ready
    assert stub.ModelReady(messages.ModelReadyRequest(name="dtypes")).ready
    assert stub.ModelReady(messages.ModelReadyRequest(name="half")).ready


def test_server_metadata(stub, pb):
    messages, _ = pb
    meta = stub.ServerMetadata(messages.ServerMetadataRequest())
    assert meta.name == "loom"
    assert re.match(r"\d+\.\d+", meta.version)
    assert "binary_tensor_data" in meta.extensions


def test_model_metadata_lists_inputs_and_outputs(stub, pb):
    messages, _ = pb
    meta = stub.ModelMetadata(messages.ModelMetadataRequest(name="dtypes"))
    assert meta.name == "dtypes"
    assert list(meta.versions) == ["1"]
    assert meta.platform == "loom"
    assert {(t.name, t.datatype, tuple(t.shape)) for t in meta.inputs} == \
        {("in_" + n, n, (-1, 3)) for n, _, _ in TYPED}
    assert {(t.name, t.datatype) for t in meta.outputs} == {("out_" + n, n) for n, _, _ in TYPED}
    half = stub.ModelMetadata(messages.ModelMetadataRequest(name="half"))
    assert [(t.name, t.datatype, list(t.shape)) for t in half.inputs] == [("h", "FP16", HALF_SHAPE)]


def test_unknown_model_or_version_is_not_found(stub, pb):
    messages, _ = pb
    for call, request in [
        (stub.ModelReady, messages.ModelReadyRequest(name="nope")),
        (stub.ModelMetadata, messages.ModelMetadataRequest(name="nope")),
        (stub.ModelReady, messages.ModelReadyRequest(name="dtypes", version="999")),
        (stub.ModelMetadata, messages.ModelMetadataRequest(name="dtypes", version="999")),
        (stub.ModelInfer, messages.ModelInferRequest(model_name="nope")),
        (stub.ModelInfer, messages.ModelInferRequest(model_name="dtypes", model_version="999")),
    ]:
        err = rpc_error(call, request)
        assert err.code() == grpc.StatusCode.NOT_FOUND, (request, err.details())


def test_infer_typed_every_dtype(stub, pb):
    rng = np.random.default_rng(1)
    arrays = {name: sample(name, rng) for name, _, _ in TYPED}
    response = stub.ModelInfer(dtypes_request(pb, arrays, raw=False, id="typed-1", model_version="1"))
    assert (response.model_name, response.model_version, response.id) == ("dtypes", "1", "typed-1")
    check_dtypes_response(response, arrays, raw=False)


def test_infer_raw_every_dtype_and_fp16(stub, pb):
    messages, _ = pb
    rng = np.random.default_rng(2)
    arrays = {name: sample(name, rng) for name, _, _ in TYPED}
    check_dtypes_response(stub.ModelInfer(dtypes_request(pb, arrays, raw=True)), arrays, raw=True)
    x = (rng.integers(-1000, 1000, HALF_SHAPE) / 8).astype(np.float16)
    request = messages.ModelInferRequest(model_name="half")
    request.inputs.add(name="h", datatype="FP16", shape=HALF_SHAPE)
    request.raw_input_contents.append(x.tobytes())
    response = stub.ModelInfer(request)
    assert (response.outputs[0].name, response.outputs[0].datatype) == ("h2", "FP16")
    np.testing.assert_array_equal(output_array(response, 0), x + x)
    # FP16 has no typed field: a typed request is refused with the way out.
    typed = messages.ModelInferRequest(model_name="half")
    typed.inputs.add(name="h", datatype="FP16", shape=HALF_SHAPE).contents.fp32_contents.extend([1] * 4)
    err = rpc_error(stub.ModelInfer, typed)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "raw_input_contents" in err.details()


def test_infer_requested_output(stub, pb):
    messages, _ = pb
    rng = np.random.default_rng(3)
    arrays = {name: sample(name, rng) for name, _, _ in TYPED}
    request = dtypes_request(pb, arrays, raw=False)
    request.outputs.add(name="out_INT16")
    response = stub.ModelInfer(request)
    assert [o.name for o in response.outputs] == ["out_INT16"]
    np.testing.assert_array_equal(output_array(response, 0), arrays["INT16"] * 2)
    request.outputs.add(name="out_nope")
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "out_nope" in err.details()


def test_shape_errors(stub, pb):
    rng = np.random.default_rng(4)
    arrays = {name: sample(name, rng) for name, _, _ in TYPED}
    # Fewer elements than the shape says.
    request = dtypes_request(pb, arrays, raw=False)
    del request.inputs[9].contents.fp32_contents[-1]
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "in_FP32" in err.details() and "5 elements" in err.details() and "6" in err.details()
    # A raw entry shorter than shape x element size.
    request = dtypes_request(pb, arrays, raw=True)
    request.raw_input_contents[4] = request.raw_input_contents[4][:-8]
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "in_INT64" in err.details() and "48 bytes" in err.details() and "40" in err.details()
    # Consistent in itself, but not the model's shape.
    request = dtypes_request(pb, arrays, raw=False)
    request.inputs[3].shape[:] = [3, 2]
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "in_INT32" in err.details()
    # A negative dimension.
    request = dtypes_request(pb, arrays, raw=False)
    request.inputs[0].shape[:] = [-2, -3]
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "in_BOOL" in err.details() and "-2" in err.details()


def test_wrong_or_unknown_dtype(stub, pb):
    rng = np.random.default_rng(5)
    arrays = {name: sample(name, rng) for name, _, _ in TYPED}
    # FP64 where the model takes FP32: refused by the model server.
    request = dtypes_request(pb, arrays, raw=True)
    request.inputs[9].datatype = "FP64"
    request.raw_input_contents[9] = arrays["FP32"].astype(np.float64).tobytes()
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "in_FP32" in err.details()
    # Contents in another datatype's field, an unknown name, BYTES.
    request = dtypes_request(pb, arrays, raw=False)
    request.inputs[4].contents.ClearField("int64_contents")
    request.inputs[4].contents.int_contents.extend([1] * 6)
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "in_INT64" in err.details() and "int_contents" in err.details()
    for datatype in ["FLOAT", "BYTES"]:
        request = dtypes_request(pb, arrays, raw=False)
        request.inputs[9].datatype = datatype
        err = rpc_error(stub.ModelInfer, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert datatype in err.details()


def test_too_large_requests_are_resource_exhausted(stub, pb):
    messages, _ = pb
    # Over the server's message limit (--max-request-bytes 1000000): refused
    # by gRPC itself.
    request = messages.ModelInferRequest(model_name="dtypes")
    request.inputs.add(name="in_UINT8", datatype="UINT8", shape=[1100000])
    request.raw_input_contents.append(bytes(1100000))
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # A message under the limit whose typed contents decode to more: 200000
    # INT64 ones are 200 kB on the wire and 1.6 MB as a tensor.
    request = messages.ModelInferRequest(model_name="dtypes")
    request.inputs.add(name="in_INT64", datatype="INT64", shape=[200000, 1]).contents.int64_contents.extend(
        [1] * 200000)
    assert request.ByteSize() < 1000000
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "in_INT64" in err.details() and "1600000 bytes" in err.details() and "1000000" in err.details()
    # A small message declaring a huge tensor: refused before allocating.
    request = messages.ModelInferRequest(model_name="dtypes")
    request.inputs.add(name="in_FP32", datatype="FP32", shape=[1 << 20, 1 << 20])
    request.raw_input_contents.append(b"")
    err = rpc_error(stub.ModelInfer, request)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "in_FP32" in err.details()


def test_concurrent_requests_from_threads(stub, pb):
    def worker(seed):
        rng = np.random.default_rng(100 + seed)
        for i in range(12):
            arrays = {name: sample(name, rng) for name, _, _ in TYPED}
            raw = (seed + i) % 2 == 0
            response = stub.ModelInfer(dtypes_request(pb, arrays, raw=raw, id=f"{seed}-{i}"))
            assert response.id == f"{seed}-{i}"
            check_dtypes_response(response, arrays, raw=raw)
        return seed

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        assert sorted(pool.map(worker, range(8))) == list(range(8))


def rejected_grpc_requests(url):
    with urllib.request.urlopen(f"{url}/metrics", timeout=scaled(30)) as reply:
        text = reply.read().decode()
    m = re.search(r'^loom_serve_rejected_requests_total\{protocol="grpc"\} (\d+)$', text, re.M)
    assert m, text
    return int(m.group(1))


def test_malformed_requests_are_counted_as_rejected(server, stub, pb):
    messages, _ = pb
    before = rejected_grpc_requests(server.url)
    request = messages.ModelInferRequest(model_name="dtypes")
    request.inputs.add(name="in_FP32", datatype="FP32", shape=[2, 3]).contents.fp32_contents.extend([1, 2])
    for _ in range(3):
        assert rpc_error(stub.ModelInfer, request).code() == grpc.StatusCode.INVALID_ARGUMENT
    assert rejected_grpc_requests(server.url) == before + 3


def test_busy_grpc_port_is_an_error(server, models):
    """A second server on the first one's gRPC port fails at start: gRPC
    would otherwise share the port (SO_REUSEPORT) and split the calls."""
    port = str(server.grpc_port)
    proc = subprocess.Popen([LOOM, "serve", "--host", "127.0.0.1", "--no-http", "--grpc-port", port,
                             "--model", f"half={models['half']}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(scaled(120), proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            if line.startswith("loom serve: ready"):
                proc.kill()
                pytest.fail("a second loom serve took the busy gRPC port " + port)
        stderr = proc.stderr.read()
        assert proc.wait() == 1, stderr
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert f"loom: error: unavailable: gRPC front end cannot listen on '127.0.0.1:{port}'" in stderr


def test_sigterm_drains_in_flight_calls(models, pb):
    """Three slow calls on one session; SIGTERM while they run: ServerReady
    turns false, a new call gets UNAVAILABLE, the three finish with their
    answers, the process exits 0."""
    messages, services = pb
    s = Server({"slow": models["slow"]}, ["--device", "cpu-simd", "--no-http", "--threads", "1"])
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
        stub = services.GRPCInferenceServiceStub(channel)
        x = np.random.default_rng(6).standard_normal((512, 256)).astype(np.float32)
        request = messages.ModelInferRequest(model_name="slow")
        request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        request.raw_input_contents.append(x.tobytes())
        start = time.monotonic()
        expect = stub.ModelInfer(request, timeout=scaled(120)).raw_output_contents[0]
        one_run = time.monotonic() - start
        results = []
        clients = [threading.Thread(target=lambda: results.append(stub.ModelInfer(request, timeout=scaled(120))))
                   for _ in range(3)]
        for t in clients:
            t.start()
        time.sleep(min(0.3, one_run / 2))
        s.proc.send_signal(15)
        time.sleep(min(0.1, one_run / 4))
        assert not stub.ServerReady(messages.ServerReadyRequest()).ready
        err = rpc_error(stub.ModelInfer, request)
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        for t in clients:
            t.join(scaled(120))
        assert len(results) == 3
        for response in results:
            assert response.raw_output_contents[0] == expect
        assert s.proc.wait(timeout=scaled(60)) == 0
        out = "".join(s.stdout)
        assert "SIGTERM: draining" in out and "loom serve: stopped\n" in out, out
        channel.close()
    finally:
        s.kill()
