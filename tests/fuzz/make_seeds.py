#!/usr/bin/python3
"""Writes the NumPy seeds of tests/fuzz/corpus (.npy of several dtypes,
versions and layouts) and the ONNX seeds that Debian's ONNX test data
lacks: TensorProtos stored in the typed fields (float_data, int32_data for
f16 and bool, int64_data, double_data) and as external data, and small
models with initializers, so that the importer's constant folding,
BatchNormalization folding and dead node removal have something to work on.
Run with the Debian python3-onnx and python3-numpy (scripts/setup.sh):
    /usr/bin/python3 tests/fuzz/make_seeds.py tests/fuzz/corpus
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

root = sys.argv[1]


def save(sub, name, data):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
    with open(os.path.join(root, sub, name), "wb") as f:
        f.write(data)


def npy(name, array, version=None):
    import io
    buf = io.BytesIO()
    if version is None:
        np.save(buf, array)
    else:
        np.lib.format.write_array(buf, array, version=version)
    save("npy", name, buf.getvalue())


npy("f32_2x3.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
npy("f64_scalar.npy", np.array(1.5))
npy("i16_be.npy", np.arange(3, dtype=">i2"))
npy("bool_2x2x2.npy", np.ones((2, 2, 2), bool))
npy("u8_empty.npy", np.zeros((0, 4), np.uint8))
npy("f16_fortran.npy", np.asfortranarray(np.arange(6, dtype=np.float16).reshape(2, 3)))
npy("i64_v2.npy", np.arange(4, dtype=np.int64), version=(2, 0))
npy("unicode_v3.npy", np.array(["ab"], dtype="<U2"), version=(3, 0))

# TensorProtos in the typed fields.
t = helper.make_tensor("f", TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6])
save("tensor_proto", "typed_float.pb", t.SerializeToString())
t = helper.make_tensor("h", TensorProto.FLOAT16, [3], np.array([1, -2, 0.5], np.float16).view(np.uint16).tolist())
save("tensor_proto", "typed_f16.pb", t.SerializeToString())
t = helper.make_tensor("b", TensorProto.BOOL, [2, 2], [1, 0, 0, 1])
save("tensor_proto", "typed_bool.pb", t.SerializeToString())
t = helper.make_tensor("i", TensorProto.INT64, [4], [1, -1, 1 << 40, 0])
save("tensor_proto", "typed_int64.pb", t.SerializeToString())
t = helper.make_tensor("d", TensorProto.DOUBLE, [2], [0.25, -8])
save("tensor_proto", "typed_double.pb", t.SerializeToString())
t = helper.make_tensor("u", TensorProto.UINT64, [2], [1, 1 << 63])
save("tensor_proto", "typed_uint64.pb", t.SerializeToString())
t = TensorProto()
t.name, t.data_type = "e", TensorProto.FLOAT
t.dims.extend([4])
t.data_location = TensorProto.EXTERNAL
for k, v in (("location", "weights.bin"), ("offset", "16"), ("length", "16")):
    e = t.external_data.add()
    e.key, e.value = k, v
save("tensor_proto", "external.pb", t.SerializeToString())


def model(nodes, inputs, outputs, inits, name, opset=13, domains=()):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, 1) for d in domains])
    m.ir_version = 8
    save("onnx_import", name + ".onnx", m.SerializeToString())


f32 = TensorProto.FLOAT
x4 = helper.make_tensor_value_info("x", f32, [1, 2, 4, 4])
# Conv + BatchNormalization (folded) + Relu.
w = numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")
scale = numpy_helper.from_array(np.array([1, 2], np.float32), "scale")
bias = numpy_helper.from_array(np.array([0, 1], np.float32), "bias")
mean = numpy_helper.from_array(np.array([0.5, 0], np.float32), "mean")
var = numpy_helper.from_array(np.array([1, 4], np.float32), "var")
model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
       helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"]),
       helper.make_node("Relu", ["bn"], ["y"])],
      [x4], [helper.make_tensor_value_info("y", f32, [1, 2, 4, 4])],
      [w, scale, bias, mean, var], "conv_bn_relu")
# Shape -> Gather -> Concat -> Reshape (folded), with a dynamic batch.
xd = helper.make_tensor_value_info("x", f32, ["n", 2, 4, 4])
idx = numpy_helper.from_array(np.array(0, np.int64), "idx")
minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
model([helper.make_node("Shape", ["x"], ["s"]),
       helper.make_node("Gather", ["s", "idx"], ["n0"], axis=0),
       helper.make_node("Unsqueeze", ["n0", "axes"], ["n1"]),
       helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
       helper.make_node("Reshape", ["x", "shape"], ["y"])],
      [xd], [helper.make_tensor_value_info("y", f32, ["n", 32])],
      [idx, minus1, numpy_helper.from_array(np.array([0], np.int64), "axes")], "shape_chain")
# Constant, ConstantOfShape, MatMul, Identity and an unused branch.
x2 = helper.make_tensor_value_info("x", f32, [2, 3])
model([helper.make_node("Constant", [], ["dims"], value=numpy_helper.from_array(np.array([3, 2], np.int64))),
       helper.make_node("ConstantOfShape", ["dims"], ["k"],
                        value=numpy_helper.from_array(np.array([0.5], np.float32))),
       helper.make_node("MatMul", ["x", "k"], ["m"]),
       helper.make_node("Identity", ["m"], ["y"]),
       helper.make_node("Sigmoid", ["x"], ["unused"])],
      [x2], [helper.make_tensor_value_info("y", f32, [2, 2])], [], "constant_matmul")
# ONNX Runtime's quantized contrib operators (com.microsoft), read as
# DequantizeLinear -> f32 operator -> QuantizeLinear.
u8 = TensorProto.UINT8
qparams = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
           numpy_helper.from_array(np.array(128, np.uint8), "z")]
model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
       helper.make_node("QLinearAdd", ["q", "s", "z", "q", "s", "z", "s", "z"], ["a"], domain="com.microsoft"),
       helper.make_node("QLinearSigmoid", ["a", "s", "z", "s"], ["g"], domain="com.microsoft"),
       helper.make_node("QLinearGlobalAveragePool", ["g", "s", "z", "s", "z"], ["p"], domain="com.microsoft"),
       helper.make_node("QLinearConcat", ["s", "z", "p", "s", "z", "p", "s", "z"], ["y"], axis=1,
                        domain="com.microsoft")],
      [x4], [helper.make_tensor_value_info("y", u8, [1, 4, 1, 1])], qparams, "qlinear_contrib",
      domains=["com.microsoft"])


# loom serve's gRPC requests (serve_grpc): inference.ModelInferRequest
# messages, typed and raw, built with stubs that grpc_tools (python3-grpc-tools)
# generates from serve/grpc_predict_v2.proto into a temporary folder.
def serve_grpc_seeds():
    import tempfile
    from grpc_tools import protoc
    serve_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "serve")
    with tempfile.TemporaryDirectory() as out:
        if protoc.main(["protoc", "-I" + serve_dir, "--python_out=" + out,
                        os.path.join(serve_dir, "grpc_predict_v2.proto")]) != 0:
            raise SystemExit("make_seeds.py: protoc failed on serve/grpc_predict_v2.proto")
        sys.path.insert(0, out)
        import grpc_predict_v2_pb2 as pb
        sys.path.pop(0)

    def seed(name, request):
        save("serve_grpc", name, request.SerializeToString())

    r = pb.ModelInferRequest(model_name="add", id="1")
    r.inputs.add(name="x", datatype="FP32", shape=[2, 3]).contents.fp32_contents.extend([1, 2, 3, 4, 5, 6])
    r.outputs.add(name="y")
    seed("typed_fp32", r)
    r = pb.ModelInferRequest(model_name="m", model_version="1")
    r.inputs.add(name="a", datatype="INT8", shape=[3]).contents.int_contents.extend([-128, 0, 127])
    r.inputs.add(name="b", datatype="UINT16", shape=[1, 2]).contents.uint_contents.extend([0, 65535])
    r.inputs.add(name="c", datatype="BOOL", shape=[2]).contents.bool_contents.extend([True, False])
    r.inputs.add(name="d", datatype="INT64", shape=[1]).contents.int64_contents.append(-(1 << 40))
    r.inputs.add(name="e", datatype="FP64", shape=[]).contents.fp64_contents.append(0.5)
    r.inputs.add(name="f", datatype="UINT64", shape=[1]).contents.uint64_contents.append(1 << 63)
    r.parameters["priority"].int64_param = 1
    seed("typed_mixed", r)
    r = pb.ModelInferRequest(model_name="m")
    r.inputs.add(name="h", datatype="FP16", shape=[2])
    r.inputs.add(name="i", datatype="INT32", shape=[2, 2])
    r.inputs.add(name="z", datatype="BF16", shape=[0, 4])
    r.raw_input_contents.extend([np.array([1, -2], np.float16).tobytes(),
                                 np.arange(4, dtype=np.int32).tobytes(), b""])
    r.outputs.add(name="y").parameters["binary_data"].bool_param = True
    seed("raw_mixed", r)
    r = pb.ModelInferRequest(model_name="m")
    r.inputs.add(name="x", datatype="FP32", shape=[2, 3]).contents.fp32_contents.extend([1, 2, 3, 4, 5])
    seed("count_mismatch", r)


serve_grpc_seeds()
