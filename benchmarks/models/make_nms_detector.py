#!/usr/bin/python3
"""Writes a small single-stage detector that ends in NonMaxSuppression (issue 26).

usage: make_nms_detector.py OUT [--images 3]

OUT/nms_detector.onnx (opset 13): image [1, 3, 64, 64] -> Conv 3x3 (16) -> Relu
-> Conv 3x3 stride 2 (16) -> Relu -> Conv 1x1 (5): per cell of the 32x32 grid
a box [cx, cy, w, h] (sigmoid offsets around the cell's centre, sizes from
exp) and a score (sigmoid); NonMaxSuppression (center_point_box 1, at most 100
boxes, IoU 0.45, score 0.9) on the 1024 boxes, then the kept boxes and
scores gathered: outputs `selected` [K, 3] (int64), `boxes` [K, 4], `scores`
[K]. The boxes are computed from the image, so K is known only when it runs.
Weights come from a fixed seed. Also writes OUT/image<k>.npy inputs.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(rng):
    def w(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    grid = 32
    ys, xs = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
    centres = np.stack([(xs + 0.5) * 2, (ys + 0.5) * 2], axis=-1).reshape(1, grid * grid, 2).astype(np.float32)
    inits = [
        w("w1", (16, 3, 3, 3), 0.4), w("b1", (16,), 0.1),
        w("w2", (16, 16, 3, 3), 0.15), w("b2", (16,), 0.1),
        w("w3", (5, 16, 1, 1), 0.5), w("b3", (5,), 0.2),
        numpy_helper.from_array(centres, "centres"),
        numpy_helper.from_array(np.array([1, 5, grid * grid], np.int64), "flat"),
        numpy_helper.from_array(np.array([4.0], np.float32), "spread"),
        numpy_helper.from_array(np.array([2.0], np.float32), "half"),
        numpy_helper.from_array(np.array([100], np.int64), "max_out"),
        numpy_helper.from_array(np.array([0.45], np.float32), "iou"),
        numpy_helper.from_array(np.array([0.9], np.float32), "min_score"),
        numpy_helper.from_array(np.array(2, np.int64), "column"),
        numpy_helper.from_array(np.array([grid * grid, 4], np.int64), "boxes_2d"),
        numpy_helper.from_array(np.array([grid * grid], np.int64), "scores_1d"),
        numpy_helper.from_array(np.array([2, 2, 1], np.int64), "parts"),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c2"], ["r2"]),
        n("Conv", ["r2", "w3", "b3"], ["head"]),
        n("Reshape", ["head", "flat"], ["cells"]),             # [1, 5, 1024]
        n("Transpose", ["cells"], ["per_cell"], perm=[0, 2, 1]),  # [1, 1024, 5]
        n("Split", ["per_cell", "parts"], ["xy", "wh", "logit"], axis=2),
        n("Sigmoid", ["xy"], ["xy_s"]),
        n("Sub", ["xy_s", "half"], ["xy_c"]),                   # (-2 .. -1): shifts of up to a cell
        n("Mul", ["xy_c", "spread"], ["xy_off"]),
        n("Add", ["xy_off", "centres"], ["centre"]),
        n("Exp", ["wh"], ["wh_e"]),
        n("Mul", ["wh_e", "spread"], ["size"]),
        n("Concat", ["centre", "size"], ["boxes"], axis=2),      # [1, 1024, 4], cx cy w h
        n("Sigmoid", ["logit"], ["score3"]),
        n("Transpose", ["score3"], ["scores_in"], perm=[0, 2, 1]),  # [1, 1, 1024]
        n("NonMaxSuppression", ["boxes", "scores_in", "max_out", "iou", "min_score"], ["selected"],
          center_point_box=1),
        n("Gather", ["selected", "column"], ["keep"], axis=1),
        n("Reshape", ["boxes", "boxes_2d"], ["all_boxes"]),
        n("Gather", ["all_boxes", "keep"], ["kept_boxes"], axis=0),
        n("Reshape", ["scores_in", "scores_1d"], ["all_scores"]),
        n("Gather", ["all_scores", "keep"], ["kept_scores"], axis=0),
    ]
    graph = helper.make_graph(
        nodes, "nms_detector",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["K", 3]),
         helper.make_tensor_value_info("kept_boxes", TensorProto.FLOAT, ["K", 4]),
         helper.make_tensor_value_info("kept_scores", TensorProto.FLOAT, ["K"])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom-bench")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(2026)
    onnx.save(model(rng), os.path.join(a.out, "nms_detector.onnx"))
    for k in range(a.images):
        np.save(os.path.join(a.out, f"image{k}.npy"), rng.standard_normal((1, 3, 64, 64)).astype(np.float32))
    print(f"wrote {a.out}/nms_detector.onnx and {a.images} images")


if __name__ == "__main__":
    main()
