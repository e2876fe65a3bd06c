"""Writes one ONNX backend test case folder (model.onnx,
test_data_set_0/input_<i>.pb, output_<i>.pb), the layout `loom test-onnx`
reads: shared by the generators of the hand-made cases
(tests/onnx/opset18_21/make_cases.py, tests/onnx/vulkan_int8/make_cases.py).
Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import os
import shutil

import numpy as np
from onnx import TensorProto, helper, numpy_helper

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.bool_): TensorProto.BOOL,
}


def write_case(root, producer, name, opset, nodes, inputs, outputs, initializers=()):
    """Case `name` under `root`; inputs/outputs/initializers: lists of
    (name, numpy array); one opset of the default domain."""
    folder = os.path.join(root, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "test_data_set_0"))
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], a.shape) for n, a in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers])
    model = helper.make_model(graph, producer_name=producer, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(tensors):
            with open(os.path.join(folder, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
