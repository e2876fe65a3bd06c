"""The Python package (`import loom`) against the build's libloom, compiler and
plugins: listing, compiling, loading, running, numpy layouts and dtypes,
threads, async runs, traces, errors, and the ONNX Runtime-style layer.

Run by ctest (test `python_loom`, label python) with PYTHONPATH at the
build's python/ folder; the ONNX models are written here with the onnx
package (python3-onnx) or taken from libonnx-testdata.
"""

import asyncio
import json
import os
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import loom
import loom.conformance
import loom.onnxruntime as lort

RELU = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx"


def write_model(path, nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def runtime():
    return loom.Runtime()


@pytest.fixture(scope="module")
def relu_program(runtime):
    report = runtime.compile(RELU, targets=["cpu-simd"])
    return runtime.load(report["program"])


@pytest.fixture(scope="module")
def open_relu(runtime, tmp_path_factory):
    # Relu over x [batch, 4, width]: one program for every batch and width.
    path = write_model(tmp_path_factory.mktemp("m") / "open_relu.onnx",
                       [helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, "width"])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "width"])])
    return path, runtime.load(runtime.compile(path, targets=["cpu-simd"])["program"])


def test_devices_and_plugins_are_listed():
    uris = [d["uri"] for d in loom.devices()]
    assert "cpu-simd://0" in uris
    cpu = next(d for d in loom.devices() if d["uri"] == "cpu-simd://0")
    assert cpu["plugin"] == "cpu-simd" and cpu["kind"] == "cpu" and "f32" in cpu["dtypes"]
    plugins = {p["name"]: p for p in loom.plugins()}
    assert plugins["cpu-simd"]["state"] == "loaded"
    assert loom.__version__.count(".") == 2


def test_compile_load_and_run_match_numpy(runtime, relu_program, tmp_path):
    assert relu_program.placements == [
        {"delegate": "cpu-simd_0", "device": "cpu-simd://0", "loader_key": "cpu-simd"}]
    assert "cpu-simd_0" in relu_program.explain()
    (main,) = relu_program.functions
    assert main["inputs"][0]["name"] == "x" and main["inputs"][0]["shape"] == (3, 4, 5)
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    y = relu_program.session().run({"x": x})
    assert list(y) == ["y"] and y["y"].dtype == np.float32
    np.testing.assert_array_equal(y["y"], np.maximum(x, 0))
    # A file written and loaded by path; the model given as bytes.
    out = tmp_path / "relu.loom"
    report = runtime.compile(open(RELU, "rb").read(), out, targets=["cpu-simd"])
    assert report["output"] == str(out) and report["targets"][0]["nodes"] == 1
    np.testing.assert_array_equal(runtime.load(out).run({"x": x})["y"], np.maximum(x, 0))


def test_layouts_are_taken_as_numpy_means_them(relu_program):
    s = relu_program.session()
    base = np.random.default_rng(2).standard_normal((5, 8, 10)).astype(np.float32)
    strided = base[1:4, ::2, ::2]                    # not contiguous
    fortran = np.asfortranarray(base[:3, :4, :5])    # column-major
    big_endian = base[:3, :4, :5].astype(">f4")      # another byte order
    for x in (strided, fortran, big_endian):
        assert x.shape == (3, 4, 5)
        np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(np.asarray(x, np.float32), 0))
    # An array of the input's dtype and shape is bound without a copy and
    # read at each run (the session keeps it alive); the next value replaces it.
    x = base[:3, :4, :5].copy()
    s.run({"x": x})
    x[...] = -x
    np.testing.assert_array_equal(s.run({})["y"], np.maximum(x, 0))
    # Nested lists are arrays too; the outputs own their memory.
    y = s.run({"x": base[:3, :4, :5].tolist()})["y"]
    assert y.flags["OWNDATA"] and y.flags["C_CONTIGUOUS"]


def test_bad_inputs_raise_with_loom_codes(relu_program):
    s = relu_program.session()
    with pytest.raises(loom.InvalidArgumentError, match="'x'") as e:
        s.run({"x": np.zeros((3, 4), np.float32)})
    assert e.value.code == "invalid_argument" and isinstance(e.value, ValueError)
    with pytest.raises(loom.InvalidArgumentError):
        s.run({"x": np.zeros((3, 4, 5), np.float64)})  # the model takes f32
    with pytest.raises(loom.NotFoundError, match="no input 'nosuch'"):
        s.run({"nosuch": np.zeros((3, 4, 5), np.float32)})
    with pytest.raises(TypeError, match="no Loom dtype"):
        s.run({"x": np.zeros((3, 4, 5), np.complex64)})
    with pytest.raises(TypeError, match="mapping"):
        s.run([np.zeros((3, 4, 5), np.float32)])


def test_loading_bad_programs_raises(runtime, tmp_path):
    with pytest.raises(loom.NotFoundError, match="nosuch.loom"):
        runtime.load(tmp_path / "nosuch.loom")
    with pytest.raises(loom.Error) as e:
        runtime.load(b"\x00" * 64)
    assert e.value.code != "unknown" and str(e.value)
    with pytest.raises(loom.Error):
        runtime.compile(b"not an onnx model")


def test_open_shapes_run_at_any_binding_and_empty_tensors(open_relu):
    _, program = open_relu
    (main,) = program.functions
    assert main["open"] and main["inputs"][0]["shape"] == (None, 4, None)
    assert main["inputs"][0]["symbols"] == ("batch", None, "width")
    s = program.session()
    for shape in [(1, 4, 3), (2, 4, 9), (0, 4, 7), (3, 4, 1)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 5
        y = s.run({"x": x})["y"]
        assert y.shape == shape
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    with pytest.raises(loom.InvalidArgumentError, match="dimension 1"):
        s.run({"x": np.zeros((2, 5, 3), np.float32)})


def test_staged_program_with_fixed_shape_inputs_runs_again_and_again(runtime, tmp_path):
    # An If on a bool input: a staged program (format 1.5) whose inputs are
    # all declared with fixed shapes. Its session takes set_input only, never
    # the zero-copy binding of a fixed-shape function's inputs.
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "t", [],
                                    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "e", [],
                                    [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    path = write_model(tmp_path / "if.onnx",
                       [helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                        helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    program = runtime.load(runtime.compile(path, targets=["cpu-simd"])["program"])
    main = next(f for f in program.functions if f["name"] == "main")
    assert main["open"] and main["inputs"][0]["shape"] == (2,)
    s = program.session()
    for k, c in enumerate([True, False, False, True]):
        x = np.array([k + 1, -2 * k], np.float32)
        y = s.run({"x": x, "c": np.array(c)})["y"]
        np.testing.assert_array_equal(y, -x if c else x)
    with pytest.raises(loom.InvalidArgumentError, match="dimension 0"):
        s.run({"x": np.zeros(3, np.float32), "c": np.array(True)})


def test_scalars_bools_and_int64(runtime, tmp_path):
    # 0-d f32 inputs, an int64 input and a bool output.
    path = write_model(tmp_path / "mixed.onnx",
                       [helper.make_node("Add", ["a", "b"], ["sum"]),
                        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
                        helper.make_node("Greater", ["nf", "sum"], ["more"])],
                       [helper.make_tensor_value_info("a", TensorProto.FLOAT, []),
                        helper.make_tensor_value_info("b", TensorProto.FLOAT, []),
                        helper.make_tensor_value_info("n", TensorProto.INT64, [3])],
                       [helper.make_tensor_value_info("sum", TensorProto.FLOAT, []),
                        helper.make_tensor_value_info("more", TensorProto.BOOL, [3])])
    report = runtime.compile(path)
    # No targets: every plugin that compiles, accelerators first, all variants.
    assert report["default_targets"] and report["variants"] == "all"
    assert report["target_order"][:2] == ["fpga-stub", "cpu-simd"], report["target_order"]
    assert runtime.compile(path, targets=[])["target_order"] == []
    program = runtime.load(report["program"])
    out = program.run({"a": np.float32(1.5), "b": np.array(2.0, np.float32),
                       "n": np.array([1, 4, 9], np.int64)})
    assert out["sum"].shape == () and out["sum"] == np.float32(3.5)
    assert out["more"].dtype == np.bool_
    np.testing.assert_array_equal(out["more"], [False, True, True])


def test_sessions_run_from_python_threads_at_once(relu_program):
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((3, 4, 5)).astype(np.float32) for _ in range(4)]
    errors = []

    def work(x):
        try:
            s = relu_program.session()  # one session per thread
            for _ in range(50):
                np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(x, 0))
        except Exception as e:  # reported below; a thread's exception is otherwise lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_async_runs_wait_and_await(relu_program):
    s = relu_program.session()
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(3, 4, 5)
    run = s.run_async({"x": x})
    assert run.wait() is True and run.done()
    np.testing.assert_array_equal(run.result()["y"], np.maximum(x, 0))

    async def main():
        return await s.run_async({"x": -x})

    np.testing.assert_array_equal(asyncio.run(main())["y"], np.maximum(-x, 0))


def test_trace_records_the_runs(runtime, relu_program, tmp_path):
    path = tmp_path / "trace.json"
    s = relu_program.session()
    with runtime.trace(path):
        s.run({"x": np.ones((3, 4, 5), np.float32)})
    events = json.load(open(path))["traceEvents"]
    assert any(e.get("name") == "main" or e.get("cat") == "run" for e in events), events[:5]


# The ONNX Runtime-style layer: the calls of onnxruntime.InferenceSession, as
# its documentation describes them.
def test_inference_session_like_onnxruntime(open_relu):
    path, _ = open_relu
    sess = lort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    assert inp.name == "x" and inp.type == "tensor(float)" and inp.shape == ["batch", 4, "width"]
    assert [o.name for o in sess.get_outputs()] == ["y"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    x = np.random.default_rng(4).standard_normal((2, 4, 6)).astype(np.float32)
    # run(None, feed) returns every output in the model's order, as a list.
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert isinstance(sess.run(["y"], {"x": x}), list)
    with pytest.raises(ValueError, match="missing input"):
        sess.run(None, {})
    with pytest.raises(ValueError, match="not an input"):
        sess.run(None, {"x": x, "z": x})
    with pytest.raises(ValueError, match="not an output"):
        sess.run(["nosuch"], {"x": x})
    with pytest.raises(ValueError, match="unknown provider"):
        lort.InferenceSession(path, providers=["NoSuchExecutionProvider"])
    assert "CPUExecutionProvider" in lort.get_available_providers()
    # SessionOptions are accepted; the model may come as bytes.
    opts = lort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess2 = lort.InferenceSession(open(path, "rb").read(), opts, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess2.run(None, {"x": x})[0], y)
    # get_providers: the requested ones available, in the order given, CPU last.
    if any(d["uri"] == "vulkan-compute://0" for d in loom.devices()):
        sess3 = lort.InferenceSession(path, providers=["VulkanExecutionProvider", "CPUExecutionProvider"])
        assert sess3.get_providers() == ["VulkanExecutionProvider", "CPUExecutionProvider"]
        np.testing.assert_array_equal(sess3.run(None, {"x": x})[0], y)


def test_conformance_suite_and_doctor_from_python():
    report = loom.conformance.run("cpu-simd", only=["abi."])
    assert report["plugin"]["name"] == "cpu-simd"
    assert report["totals"]["failed"] == 0 and report["totals"]["passed"] >= 3, report["totals"]
    assert all(c["id"].startswith("abi.") for c in report["checks"])
    with pytest.raises(loom.NotFoundError, match="no-such-plugin"):
        loom.conformance.run("no-such-plugin")
    with pytest.raises(loom.InvalidArgumentError, match="'fast'"):
        loom.conformance.run("cpu-simd", level="fast")
    (diagnosis,) = loom.doctor("cpu-simd")
    assert diagnosis["plugin"] == "cpu-simd" and diagnosis["accepted"]
    assert any(c["name"] == "manifest" and c["outcome"] == "OK" for c in diagnosis["checks"])
    assert "cpu-simd" in diagnosis["report"]


def test_sequences_are_lists_and_an_empty_optional_is_none(runtime):
    # ONNX's test_identity_sequence (a sequence in, the same out) and
    # test_optional_has_element (an optional tensor in): format 1.6.
    data = "/usr/share/libonnx-testdata/data/node/"
    seq = runtime.load(runtime.compile(data + "test_identity_sequence/model.onnx", targets=["cpu-simd"])["program"])
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32)
    y = seq.session().run({"x": [a, b]})["y"]
    assert isinstance(y, list) and len(y) == 2
    np.testing.assert_array_equal(y[0], a)
    np.testing.assert_array_equal(y[1], b)
    assert seq.session().run({"x": []})["y"] == []
    with pytest.raises(loom.InvalidArgumentError, match="takes a sequence of f32 tensors, got a tensor"):
        seq.session().run({"x": a})
    opt = runtime.load(runtime.compile(data + "test_optional_has_element/model.onnx")["program"])
    assert not opt.session().run({"optional_input": None})["output"]
    assert opt.session().run({"optional_input": b})["output"]
