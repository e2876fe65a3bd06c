#!/usr/bin/env python3
"""Writes the hand-made ONNX test cases of this folder (opsets 18-21).

Debian's onnx 1.12 writes models up to opset 17, so these cases are built
with onnx.helper and their opset_import set by hand; their expected outputs
are computed here with numpy, from the operator specification, not by any
ONNX runtime. Each case is a folder in the layout of the ONNX backend test
data (model.onnx, test_data_set_0/input_<i>.pb, output_<i>.pb), so that
`loom test-onnx` runs them like Debian's. Run from anywhere:

    /usr/bin/python3 tests/onnx/opset18_21/make_cases.py

The files it writes are checked in; rerunning it rewrites them identically.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import case_writer  # noqa: E402  (tests/onnx/case_writer.py)
RNG = np.random.default_rng(26)

def write_case(name, opset, nodes, inputs, outputs, initializers=()):
    """inputs/outputs/initializers: lists of (name, numpy array)."""
    case_writer.write_case(HERE, "loom tests/onnx/opset18_21/make_cases.py", name, opset, nodes, inputs, outputs, initializers)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def main():
    # Reduce* (opset 18): 'axes' is an input for every reduction.
    x = f32(3, 4, 5)
    axes = np.array([0, -1], dtype=np.int64)
    write_case("test_reduce_mean_axes_input_opset18", 18,
               [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)],
               [("x", x), ("axes", axes)], [("y", x.mean(axis=(0, 2), keepdims=True))])
    write_case("test_reduce_sum_square_axes_input_opset18", 18,
               [helper.make_node("ReduceSumSquare", ["x", "axes"], ["y"], keepdims=0)],
               [("x", x), ("axes", np.array([1], dtype=np.int64))], [("y", (x * x).sum(axis=1))])
    # No axes and noop_with_empty_axes: the input unchanged.
    write_case("test_reduce_max_empty_axes_noop_opset18", 18,
               [helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)],
               [("x", x)], [("y", x)])
    write_case("test_reduce_l2_all_axes_opset18", 18,
               [helper.make_node("ReduceL2", ["x"], ["y"], keepdims=0)],
               [("x", x)], [("y", np.array(np.sqrt((x * x).sum()), dtype=np.float32))])

    # Split (opset 18): num_outputs, the last part smaller (7 = 3 + 3 + 1).
    s = f32(2, 7)
    write_case("test_split_num_outputs_uneven_opset18", 18,
               [helper.make_node("Split", ["s"], ["a", "b", "c"], axis=1, num_outputs=3)],
               [("s", s)], [("a", s[:, 0:3]), ("b", s[:, 3:6]), ("c", s[:, 6:7])])

    # Pad (opset 18): 'axes' names the padded axes; (19) wrap mode.
    p = f32(2, 3, 4)
    pads = np.array([1, 0, 2, 1], dtype=np.int64)  # axis 0: (1, 2), axis -1: (0, 1)
    pad_axes = np.array([0, -1], dtype=np.int64)
    value = np.array(1.5, dtype=np.float32)
    write_case("test_pad_axes_input_opset18", 18,
               [helper.make_node("Pad", ["p", "pads", "value", "axes"], ["y"], mode="constant")],
               [("p", p), ("pads", pads), ("value", value), ("axes", pad_axes)],
               [("y", np.pad(p, ((1, 2), (0, 0), (0, 1)), mode="constant", constant_values=1.5))])
    wrap_pads = np.array([0, 1, 2, 0, 2, 1], dtype=np.int64)
    write_case("test_pad_wrap_opset19", 19,
               [helper.make_node("Pad", ["p", "pads"], ["y"], mode="wrap")],
               [("p", p), ("pads", wrap_pads)],
               [("y", np.pad(p, ((0, 0), (1, 2), (2, 1)), mode="wrap"))])

    # ScatterElements / ScatterND (opset 18): max and min reductions, with
    # repeated indices so that the reduction decides.
    data = f32(3, 3)
    idx = np.array([[0, 0, 2], [1, 1, 1]], dtype=np.int64)
    upd = f32(2, 3)
    want = data.copy()
    for i in range(2):
        for j in range(3):
            want[idx[i, j], j] = max(want[idx[i, j], j], upd[i, j])
    write_case("test_scatter_elements_max_opset18", 18,
               [helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], axis=0, reduction="max")],
               [("data", data), ("idx", idx), ("upd", upd)], [("y", want)])
    nd_idx = np.array([[2], [0], [2]], dtype=np.int64)
    nd_upd = f32(3, 3)
    want_nd = data.copy()
    for k in range(3):
        want_nd[nd_idx[k, 0]] = np.minimum(want_nd[nd_idx[k, 0]], nd_upd[k])
    write_case("test_scatternd_min_opset18", 18,
               [helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], reduction="min")],
               [("data", data), ("idx", nd_idx), ("upd", nd_upd)], [("y", want_nd)])

    # Resize (opset 19): nearest, asymmetric, 'axes' naming every axis in
    # order and antialias 0 (any subset of axes is taken since; see below).
    r = f32(1, 2, 2, 3)
    scales = np.array([1, 1, 2, 2], dtype=np.float32)
    write_case("test_resize_nearest_axes_all_opset19", 19,
               [helper.make_node("Resize", ["r", "", "scales"], ["y"], mode="nearest",
                                 coordinate_transformation_mode="asymmetric", nearest_mode="floor",
                                 axes=[0, 1, 2, 3], antialias=0)],
               [("r", r), ("scales", scales)], [("y", r.repeat(2, axis=2).repeat(2, axis=3))])

    # Opset 21 forms of operators whose definitions only gained types:
    # Reshape, Transpose, Squeeze, Flatten, Cast, Shape with start/end.
    t = f32(2, 3, 4)
    write_case("test_reshape_transpose_opset21", 21,
               [helper.make_node("Transpose", ["t"], ["tt"], perm=[2, 0, 1]),
                helper.make_node("Reshape", ["tt", "shape"], ["y"])],
               [("t", t), ("shape", np.array([4, -1], dtype=np.int64))],
               [("y", t.transpose(2, 0, 1).reshape(4, 6))])
    write_case("test_shape_start_end_cast_opset21", 21,
               [helper.make_node("Shape", ["t"], ["s"], start=1, end=-1),
                helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)],
               [("t", t)], [("y", np.array([3], dtype=np.float32))])

    # QuantizeLinear / DequantizeLinear (opset 21) per axis, block_size 0.
    q = f32(2, 3) * 4
    scale = np.array([0.5, 0.25, 1.0], dtype=np.float32)
    zp = np.array([128, 120, 100], dtype=np.uint8)
    quant = np.clip(np.rint(q / scale) + zp.astype(np.float32), 0, 255).astype(np.uint8)
    write_case("test_quantize_linear_axis_opset21", 21,
               [helper.make_node("QuantizeLinear", ["q", "scale", "zp"], ["y"], axis=1)],
               [("q", q), ("scale", scale), ("zp", zp)], [("y", quant)])
    write_case("test_dequantize_linear_axis_opset21", 21,
               [helper.make_node("DequantizeLinear", ["y", "scale", "zp"], ["d"], axis=1)],
               [("y", quant), ("scale", scale), ("zp", zp)],
               [("d", ((quant.astype(np.float32) - zp.astype(np.float32)) * scale).astype(np.float32))])

    # LayerNormalization (opset 17 operator) at opset 20 with its stash
    # outputs Mean and InvStdDev.
    ln = f32(2, 3, 4)
    gamma = f32(4)
    beta = f32(4)
    mean = ln.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(((ln - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    write_case("test_layer_norm_stash_outputs_opset20", 20,
               [helper.make_node("LayerNormalization", ["ln", "gamma", "beta"], ["y", "mean", "inv"],
                                 axis=-1, epsilon=1e-5)],
               [("ln", ln), ("gamma", gamma), ("beta", beta)],
               [("y", ((ln - mean) * inv * gamma + beta).astype(np.float32)),
                ("mean", mean.astype(np.float32)), ("inv", inv.astype(np.float32))])

    # AveragePool (opset 19): dilations.
    ap = f32(1, 1, 5, 5)
    pooled = np.zeros((1, 1, 3, 3), dtype=np.float32)
    for i in range(3):
        for j in range(3):
            pooled[0, 0, i, j] = ap[0, 0, i:i + 3:2, j:j + 3:2].mean()
    write_case("test_averagepool_dilations_opset19", 19,
               [helper.make_node("AveragePool", ["ap"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])],
               [("ap", ap)], [("y", pooled)])

    resize18_cases()
    group_col2im_cases()


# --- Resize's opset-18 attributes: antialias, axes, keep_aspect_ratio_policy.
# The expected outputs come from a 1-D resampler written here from the
# operator's text, applied axis by axis (the filters are separable): the
# sampling position of each output element by the coordinate transformation;
# for antialias the linear (triangle) or cubic filter stretched by
# 1 / scale when downscaling, its weights normalized to sum 1; the taps are
# the filter's width of input elements nearest the position (a position on a
# whole number taken as ratio 1 from the element before it, ties to the
# lower index), chosen here by sorting distances, with positions past the
# edges reading the edge element.

def _cubic_weight(u, a):
    u = abs(u)
    if u <= 1:
        return ((a + 2) * u - (a + 3)) * u * u + 1
    if u < 2:
        return ((u - 5) * u + 8) * u * a - 4 * a
    return 0.0


def _resample_axis(x, axis, out_len, scale, mode, antialias=False, cubic_a=-0.75):
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    in_len = x.shape[-1]
    out = np.zeros(x.shape[:-1] + (out_len,), dtype=np.float64)
    for o in range(out_len):
        pos = (o + 0.5) / scale - 0.5  # half_pixel
        base = np.floor(pos)
        ratio = pos - base
        if ratio == 0:
            base, ratio = base - 1, 1.0
        if mode == "linear":
            s = min(scale, 1.0) if antialias else 1.0
            width = 2 * int(np.ceil(1 / s)) if antialias else 2
            weight = lambda d: max(0.0, 1 - abs(d) * s)
        else:
            s = min(scale, 1.0) if antialias else 1.0
            width = 2 * int(np.ceil(2 / s)) if antialias else 4
            weight = lambda d: _cubic_weight(d * s, cubic_a)
        near = sorted(range(int(base) - width, int(base) + width + 2), key=lambda i: (abs(pos - i), i))
        taps = sorted(near[:width])
        w = np.array([weight(i - pos) for i in taps])
        if antialias:
            w = w / w.sum()
        idx = np.clip(taps, 0, in_len - 1)
        out[..., o] = (x[..., idx] * w).sum(axis=-1)
    return np.moveaxis(out, -1, axis)


def resize18_cases():
    rng = np.random.default_rng(1818)
    grid = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    for mode in ("linear", "cubic"):
        y = grid
        for axis in (2, 3):
            y = _resample_axis(y, axis, 2, 0.6, mode, antialias=True)
        write_case(f"test_resize_downsample_scales_{mode}_antialias_opset18", 18,
                   [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, antialias=1)],
                   [("x", grid), ("scales", np.array([1, 1, 0.6, 0.6], dtype=np.float32))],
                   [("y", y.astype(np.float32))])
    x = rng.standard_normal((1, 2, 7, 9)).astype(np.float32)
    y = _resample_axis(_resample_axis(x, 2, 3, 3 / 7, "linear", True), 3, 4, 4 / 9, "linear", True)
    write_case("test_resize_downsample_sizes_linear_antialias_opset18", 18,
               [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", antialias=1)],
               [("x", x), ("sizes", np.array([1, 2, 3, 4], dtype=np.int64))], [("y", y.astype(np.float32))])
    # keep_aspect_ratio_policy on axes [2, 3] of a 4 x 6 input, sizes [3, 3]:
    # not_larger takes min(3/4, 3/6) = 0.5 for both (2 x 3 out), not_smaller
    # max = 0.75 (3 x round_half_up(4.5) = 5 out).
    x = rng.standard_normal((1, 1, 4, 6)).astype(np.float32)
    for policy, scale, out in (("not_larger", 0.5, (2, 3)), ("not_smaller", 0.75, (3, 5))):
        y = _resample_axis(_resample_axis(x, 2, out[0], scale, "linear"), 3, out[1], scale, "linear")
        write_case(f"test_resize_keep_aspect_{policy}_axes_opset18", 18,
                   [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                                     keep_aspect_ratio_policy=policy, axes=[2, 3])],
                   [("x", x), ("sizes", np.array([3, 3], dtype=np.int64))], [("y", y.astype(np.float32))])
    # 'axes' naming one axis (counted from the back), cubic upscaling.
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    y = _resample_axis(x, 2, 7, 1.5, "cubic")
    write_case("test_resize_axes_last_cubic_opset18", 18,
               [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic", axes=[-1])],
               [("x", x), ("scales", np.array([1.5], dtype=np.float32))], [("y", y.astype(np.float32))])



# --- GroupNormalization (18: scale and bias per group; 21: per channel) and
# Col2Im (18). Expected outputs: group statistics with numpy's mean and
# (population) var over each group's channels and positions; Col2Im by
# adding each column's value at the image position its block and kernel
# offset give (an explicit loop over blocks and offsets).

def _col2im(cols, image, block, dil, pads, strides):
    n, ck, nblocks = cols.shape
    r = len(image)
    kprod = int(np.prod(block))
    c = ck // kprod
    grid = [(image[d] + pads[d] + pads[r + d] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(r)]
    assert int(np.prod(grid)) == nblocks
    out = np.zeros((n, c) + tuple(image), dtype=np.float64)
    for ni in range(n):
        for ci in range(c):
            for kl, koff in enumerate(np.ndindex(*block)):
                for bl, boff in enumerate(np.ndindex(*grid)):
                    pos = [boff[d] * strides[d] - pads[d] + koff[d] * dil[d] for d in range(r)]
                    if all(0 <= pos[d] < image[d] for d in range(r)):
                        out[(ni, ci) + tuple(pos)] += cols[ni, ci * kprod + kl, bl]
    return out.astype(np.float32)


def group_col2im_cases():
    rng = np.random.default_rng(2118)
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    groups = 3
    g = x.reshape(2, groups, -1).astype(np.float64)
    norm = ((g - g.mean(axis=-1, keepdims=True)) / np.sqrt(g.var(axis=-1, keepdims=True) + 1e-4)).reshape(x.shape)
    s18, b18 = rng.standard_normal(groups).astype(np.float32), rng.standard_normal(groups).astype(np.float32)
    y18 = norm * np.repeat(s18, 2)[None, :, None, None] + np.repeat(b18, 2)[None, :, None, None]
    write_case("test_group_normalization_opset18", 18,
               [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups,
                                 epsilon=1e-4)],
               [("x", x), ("scale", s18), ("bias", b18)], [("y", y18.astype(np.float32))])
    s21, b21 = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    y21 = norm * s21[None, :, None, None] + b21[None, :, None, None]
    write_case("test_group_normalization_per_channel_opset21", 21,
               [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups,
                                 epsilon=1e-4, stash_type=1)],
               [("x", x), ("scale", s21), ("bias", b21)], [("y", y21.astype(np.float32))])
    # Col2Im: a 5 x 6 image from 2 x 2 blocks, stride 1 (overlaps add up),
    # and a 3-D one with dilations, pads and strides.
    cols = rng.standard_normal((1, 2 * 4, 4 * 5)).astype(np.float32)
    write_case("test_col2im_overlapping_opset18", 18,
               [helper.make_node("Col2Im", ["cols", "image", "block"], ["y"])],
               [("cols", cols), ("image", np.array([5, 6], dtype=np.int64)),
                ("block", np.array([2, 2], dtype=np.int64))],
               [("y", _col2im(cols, [5, 6], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1]))])
    image, block, dil, pads, strides = [4, 5, 6], [2, 2, 3], [1, 2, 1], [1, 0, 1, 0, 1, 2], [2, 1, 2]
    grid = [(image[d] + pads[d] + pads[3 + d] - (dil[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(3)]
    cols3 = rng.standard_normal((2, 1 * 12, int(np.prod(grid)))).astype(np.float32)
    write_case("test_col2im_3d_dilations_pads_strides_opset18", 18,
               [helper.make_node("Col2Im", ["cols", "image", "block"], ["y"], dilations=dil, pads=pads,
                                 strides=strides)],
               [("cols", cols3), ("image", np.array(image, dtype=np.int64)),
                ("block", np.array(block, dtype=np.int64))],
               [("y", _col2im(cols3, image, block, dil, pads, strides))])


if __name__ == "__main__":
    main()
