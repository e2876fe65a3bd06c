#!/usr/bin/env python3
"""Builds Loom's model zoo: six ONNX models with random weights, written the
way framework exporters write them, plus one random input per model.

usage: python3 benchmarks/models/make_zoo.py OUTDIR [--only NAME,...]

Writes OUTDIR/<name>.onnx, OUTDIR/<name>_input.npy and OUTDIR/zoo.json (the
list the benchmark script reads: file, input name, bound shape, opset,
outputs). `--only` writes the named models alone (the same bytes as in a full
run; tests use it to make the small ones). Needs python3-onnx and python3-numpy (Debian). Everything is
deterministic: each model has its own fixed seed.

What makes the models look exported rather than hand-made:
- opsets 11 to 17 across the zoo, each model using that opset's operator forms
  (Unsqueeze axes as an attribute before 13 and as an input from 13, Resize
  with an roi input, Clip-free HardSigmoid/HardSwish from 14, ...);
- BatchNormalization kept after every Conv that has one (running statistics,
  epsilon and momentum written out), never folded;
- the batch dimension of the input is the symbolic 'N', and reshapes get their
  target shape from Shape -> Gather -> Unsqueeze -> Concat chains as tracing
  exporters emit them, so shapes are known only once N is bound
  (`loom compile --input-shape input=1,3,224,224`); text_encoder's sequence
  length 'T' is symbolic too, and its input is written at T = 128;
- the layer norm of the transformer is the ReduceMean/Sub/Pow/ReduceMean/Add/
  Sqrt/Div/Mul/Add pattern and its GELU the Erf-based one;
- every Conv spells out dilations, group, kernel_shape, pads and strides.

Weights are He-initialised (Xavier-like for the transformer) and BatchNorm
statistics are in a realistic range, so activations stay of order one and a
relative-difference check against another runtime is meaningful.
"""
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Accumulates nodes and initializers of one graph with unique names."""

    def __init__(self, name, opset, seed):
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.used = {}

    def fresh(self, base):
        n = self.used.get(base, 0)
        self.used[base] = n + 1
        return f"{base}_{n}" if n else base

    def weight(self, base, array):
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, outputs=1, base=None, **attrs):
        base = base or op_type.lower()
        outs = [self.fresh(f"{base}_out") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self.fresh(f"/{base}/{op_type}"), **attrs))
        return outs[0] if outputs == 1 else outs

    def constant(self, value, dtype=np.int64):
        """A Constant node, as tracing exporters write scalars and shapes."""
        arr = np.asarray(value, dtype=dtype)
        out = self.fresh("const")
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=self.fresh("/Constant"),
            value=numpy_helper.from_array(arr, out + "_value")))
        return out

    # --- layers -----------------------------------------------------------
    def conv(self, x, cin, cout, k, stride=1, group=1, bias=False, pad=None,
             gain=2.0, base="conv"):
        pad = (k - 1) // 2 if pad is None else pad
        fan_in = cin // group * k * k
        w = self.rng.normal(0.0, math.sqrt(gain / fan_in),
                            (cout, cin // group, k, k)).astype(np.float32)
        ins = [x, self.weight(f"{base}.weight", w)]
        if bias:
            ins.append(self.weight(f"{base}.bias",
                                   self.rng.normal(0.0, 0.05, cout).astype(np.float32)))
        return self.op("Conv", ins, base=base, dilations=[1, 1], group=group,
                       kernel_shape=[k, k], pads=[pad] * 4, strides=[stride, stride])

    def bn(self, x, c, eps=1e-5, gamma=(0.7, 1.3), base="bn"):
        r = self.rng
        scale = r.uniform(*gamma, c).astype(np.float32)
        shift = r.normal(0.0, 0.1, c).astype(np.float32)
        mean = r.normal(0.0, 0.2, c).astype(np.float32)
        var = r.uniform(0.6, 1.6, c).astype(np.float32)
        ins = [x] + [self.weight(f"{base}.{n}", a) for n, a in
                     (("weight", scale), ("bias", shift),
                      ("running_mean", mean), ("running_var", var))]
        return self.op("BatchNormalization", ins, base=base, epsilon=eps, momentum=0.9)

    def linear_gemm(self, x, cin, cout, gain=2.0, base="fc"):
        """torch.nn.Linear on a 2-D input: Gemm with the weight transposed."""
        w = self.rng.normal(0.0, math.sqrt(gain / cin), (cout, cin)).astype(np.float32)
        b = self.rng.normal(0.0, 0.05, cout).astype(np.float32)
        return self.op("Gemm", [x, self.weight(f"{base}.weight", w),
                                self.weight(f"{base}.bias", b)],
                       base=base, alpha=1.0, beta=1.0, transB=1)

    def linear_matmul(self, x, cin, cout, gain=1.0, base="linear"):
        """torch.nn.Linear on a 3-D input (or as older exporters write it): MatMul + Add."""
        w = self.rng.normal(0.0, math.sqrt(gain / cin), (cin, cout)).astype(np.float32)
        b = self.rng.normal(0.0, 0.02, cout).astype(np.float32)
        y = self.op("MatMul", [x, self.weight(f"{base}.weight_t", w)], base=base)
        return self.op("Add", [y, self.weight(f"{base}.bias", b)], base=base)

    def unsqueeze0(self, x):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.constant([0])])
        return self.op("Unsqueeze", [x], axes=[0])

    def dim(self, shape, i):
        """One dimension of a Shape output as a 1-element tensor (Gather + Unsqueeze)."""
        return self.unsqueeze0(self.op("Gather", [shape, self.constant(i)], axis=0))

    def reshape_chain(self, x, keep, rest):
        """Reshape x to (x.shape[k] for k in keep) + rest, the target computed at run time."""
        shape = self.op("Shape", [x])
        parts = [self.dim(shape, k) for k in keep] + [self.constant(rest)]
        return self.op("Reshape", [x, self.op("Concat", parts, axis=0)])

    def finish(self, x_info, outputs, producer="loom-zoo"):
        graph = helper.make_graph(self.nodes, self.name, [x_info], outputs,
                                  initializer=self.inits)
        model = helper.make_model(graph, producer_name=producer, producer_version="1",
                                  opset_imports=[helper.make_opsetid("", self.opset)])
        onnx.checker.check_model(model, full_check=True)
        return model


def image_input(c, h, w):
    return helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", c, h, w])


def out_info(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


# --- (a) MobileNetV3-small ------------------------------------------------
def make_divisible(v, d=8):
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def mobilenetv3_small():
    b = Builder("mobilenetv3_small", 14, seed=11)
    eps = 1e-3
    x = b.conv("input", 3, 16, 3, stride=2, base="features.0.conv")
    x = b.op("HardSwish", [b.bn(x, 16, eps, base="features.0.bn")])
    # kernel, expanded, out, squeeze-excite, activation, stride
    cfg = [(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2),
           (3, 88, 24, False, "RE", 1), (5, 96, 40, True, "HS", 2),
           (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
           (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1),
           (5, 288, 96, True, "HS", 2), (5, 576, 96, True, "HS", 1),
           (5, 576, 96, True, "HS", 1)]
    cin = 16
    for i, (k, exp, cout, se, act, s) in enumerate(cfg, start=1):
        p = f"features.{i}.block"
        nl = "Relu" if act == "RE" else "HardSwish"
        y = x
        if exp != cin:
            y = b.conv(y, cin, exp, 1, base=f"{p}.expand")
            y = b.op(nl, [b.bn(y, exp, eps, base=f"{p}.expand.bn")])
        y = b.conv(y, exp, exp, k, stride=s, group=exp, base=f"{p}.dw")
        y = b.op(nl, [b.bn(y, exp, eps, base=f"{p}.dw.bn")])
        if se:
            sq = make_divisible(exp // 4)
            z = b.op("GlobalAveragePool", [y], base=f"{p}.se")
            z = b.op("Relu", [b.conv(z, exp, sq, 1, bias=True, base=f"{p}.se.fc1")])
            z = b.conv(z, sq, exp, 1, bias=True, gain=1.0, base=f"{p}.se.fc2")
            z = b.op("HardSigmoid", [z], alpha=1.0 / 6.0, beta=0.5)
            y = b.op("Mul", [y, z], base=f"{p}.se")
        y = b.conv(y, exp, cout, 1, gain=1.0, base=f"{p}.project")
        y = b.bn(y, cout, eps, gamma=(0.4, 0.8) if (s == 1 and cin == cout) else (0.7, 1.3),
                 base=f"{p}.project.bn")
        x = b.op("Add", [x, y], base=f"{p}.residual") if (s == 1 and cin == cout) else y
        cin = cout
    x = b.conv(x, 96, 576, 1, base="features.12.conv")
    x = b.op("HardSwish", [b.bn(x, 576, eps, base="features.12.bn")])
    x = b.op("GlobalAveragePool", [x], base="avgpool")
    x = b.reshape_chain(x, keep=[0], rest=[-1])          # x.view(x.size(0), -1)
    x = b.op("HardSwish", [b.linear_gemm(x, 576, 1024, base="classifier.0")])
    x = b.linear_gemm(x, 1024, 1000, gain=1.0, base="classifier.3")
    b.nodes[-1].output[0] = "logits"
    return b.finish(image_input(3, 224, 224), [out_info("logits", ["N", 1000])]), (3, 224, 224)


# --- (b) ResNet-18 --------------------------------------------------------
def resnet18():
    b = Builder("resnet18", 11, seed=12)
    x = b.conv("input", 3, 64, 7, stride=2, base="conv1")
    x = b.op("Relu", [b.bn(x, 64, base="bn1")])
    x = b.op("MaxPool", [x], base="maxpool", ceil_mode=0, kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    cin = 64
    for li, cout in enumerate([64, 128, 256, 512], start=1):
        for bi in range(2):
            p = f"layer{li}.{bi}"
            s = 2 if (bi == 0 and li > 1) else 1
            y = b.conv(x, cin, cout, 3, stride=s, base=f"{p}.conv1")
            y = b.op("Relu", [b.bn(y, cout, base=f"{p}.bn1")])
            y = b.conv(y, cout, cout, 3, base=f"{p}.conv2")
            y = b.bn(y, cout, gamma=(0.3, 0.6), base=f"{p}.bn2")
            idn = x
            if s != 1 or cin != cout:
                idn = b.conv(x, cin, cout, 1, stride=s, gain=1.0, base=f"{p}.downsample.0")
                idn = b.bn(idn, cout, base=f"{p}.downsample.1")
            x = b.op("Relu", [b.op("Add", [y, idn], base=p)])
            cin = cout
    x = b.op("GlobalAveragePool", [x], base="avgpool")
    x = b.op("Flatten", [x], axis=1)
    x = b.linear_gemm(x, 512, 1000, gain=1.0, base="fc")
    b.nodes[-1].output[0] = "logits"
    return b.finish(image_input(3, 224, 224), [out_info("logits", ["N", 1000])]), (3, 224, 224)


# --- (c) FPN-style detector -----------------------------------------------
def detector():
    b = Builder("detector", 12, seed=13)

    def cbr(x, cin, cout, s, name):
        y = b.conv(x, cin, cout, 3, stride=s, base=f"{name}.conv")
        return b.op("Relu", [b.bn(y, cout, base=f"{name}.bn")])

    x = cbr("input", 3, 32, 2, "backbone.stem.0")                  # stride 2
    c2 = cbr(x, 32, 64, 2, "backbone.stem.1")                      # stride 4, 80x80
    c3 = cbr(cbr(c2, 64, 128, 2, "backbone.stage3.0"), 128, 128, 1, "backbone.stage3.1")   # 40x40
    c4 = cbr(cbr(c3, 128, 256, 2, "backbone.stage4.0"), 256, 256, 1, "backbone.stage4.1")  # 20x20
    f = 96
    l2 = b.conv(c2, 64, f, 1, bias=True, gain=1.0, base="fpn.lateral2")
    l3 = b.conv(c3, 128, f, 1, bias=True, gain=1.0, base="fpn.lateral3")
    p4 = b.conv(c4, 256, f, 1, bias=True, gain=1.0, base="fpn.lateral4")
    # F.interpolate(p4, size=l3.shape[-2:], mode="nearest") as opset 11/12 exporters write it
    sizes = b.op("Concat", [
        b.op("Slice", [b.op("Shape", [p4]), b.constant([0]), b.constant([2]), b.constant([0])]),
        b.op("Slice", [b.op("Shape", [l3]), b.constant([2]), b.constant([4]), b.constant([0])])],
        axis=0)
    roi = b.constant(np.zeros(0), dtype=np.float32)
    no_scales = b.constant(np.zeros(0), dtype=np.float32)
    up4 = b.op("Resize", [p4, roi, no_scales, sizes], base="fpn.up4", mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor",
               cubic_coeff_a=-0.75)
    p3 = b.op("Add", [l3, up4], base="fpn.p3")
    # learned 2x upsampling: ConvTranspose kernel 4, stride 2, pad 1
    wt = b.rng.normal(0.0, math.sqrt(1.0 / (f * 4)), (f, f, 4, 4)).astype(np.float32)
    up3 = b.op("ConvTranspose", [p3, b.weight("fpn.up3.weight", wt),
                                 b.weight("fpn.up3.bias", np.zeros(f, np.float32))],
               base="fpn.up3", dilations=[1, 1], group=1, kernel_shape=[4, 4],
               pads=[1, 1, 1, 1], strides=[2, 2])
    p2 = b.op("Add", [l2, up3], base="fpn.p2")
    # one head shared by the three levels (the weights are the same initializers)
    anchors, per = 3, 5                                            # objectness + 4 classes
    wh = b.rng.normal(0.0, math.sqrt(2.0 / (f * 9)), (f, f, 3, 3)).astype(np.float32)
    wo = b.rng.normal(0.0, math.sqrt(1.0 / (f * 9)), (anchors * per, f, 3, 3)).astype(np.float32)
    head_w = b.weight("head.conv.weight", wh)
    head_b = b.weight("head.conv.bias", b.rng.normal(0.0, 0.05, f).astype(np.float32))
    out_w = b.weight("head.cls.weight", wo)
    out_b = b.weight("head.cls.bias", np.full(anchors * per, -1.0, np.float32))
    conv_attrs = dict(dilations=[1, 1], group=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                      strides=[1, 1])
    levels = []
    for name, p in (("p2", p2), ("p3", p3), ("p4", p4)):
        h = b.op("Relu", [b.op("Conv", [p, head_w, head_b], base=f"head.{name}", **conv_attrs)])
        h = b.op("Sigmoid", [b.op("Conv", [h, out_w, out_b], base=f"head.{name}.cls",
                                  **conv_attrs)])
        levels.append(b.reshape_chain(h, keep=[0, 1], rest=[-1]))   # h.view(n, c, -1)
    b.op("Concat", levels, axis=2, base="detections")
    b.nodes[-1].output[0] = "detections"
    return b.finish(image_input(3, 320, 320),
                    [out_info("detections", ["N", anchors * per, 8400])]), (3, 320, 320)


# --- transformer pieces (vit_tiny, text_encoder) ------------------------
def layer_norm(b, x, d, base):
    """LayerNorm over the last axis as exporters of opset < 17 write it."""
    mean = b.op("ReduceMean", [x], base=base, axes=[-1], keepdims=1)
    dev = b.op("Sub", [x, mean], base=base)
    sq = b.op("Pow", [dev, b.constant(2.0, np.float32)], base=base)
    var = b.op("ReduceMean", [sq], base=base, axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.constant(1e-6, np.float32)], base=base)],
               base=base)
    y = b.op("Div", [dev, std], base=base)
    g = b.rng.uniform(0.8, 1.2, d).astype(np.float32)
    y = b.op("Mul", [y, b.weight(f"{base}.weight", g)], base=base)
    beta = b.rng.normal(0.0, 0.05, d).astype(np.float32)
    return b.op("Add", [y, b.weight(f"{base}.bias", beta)], base=base)


def encoder_layer(b, x, d, heads, mlp, p, i):
    """One pre-norm encoder layer on [N, T, d]: every reshape target comes from
    Shape/Gather/Concat chains on the tensor itself, so N and T may stay open.
    Layer i scales the scores by Div when even and by Mul when odd."""
    hd = d // heads

    def heads_of(t, perm):
        """[N, T, d] -> [N, T, heads, hd] -> transposed; the shape from the tensor itself."""
        s = b.op("Shape", [t])
        target = b.op("Concat", [b.dim(s, 0), b.dim(s, 1), b.constant([heads, hd])], axis=0)
        return b.op("Transpose", [b.op("Reshape", [t, target])], perm=perm)

    h = layer_norm(b, x, d, f"{p}.norm1")
    q = heads_of(b.linear_matmul(h, d, d, base=f"{p}.attn.q"), [0, 2, 1, 3])
    k = heads_of(b.linear_matmul(h, d, d, base=f"{p}.attn.k"), [0, 2, 3, 1])
    v = heads_of(b.linear_matmul(h, d, d, base=f"{p}.attn.v"), [0, 2, 1, 3])
    att = b.op("MatMul", [q, k], base=f"{p}.attn.scores")        # [N, heads, T, T]
    if i % 2 == 0:
        att = b.op("Div", [att, b.constant(math.sqrt(hd), np.float32)], base=f"{p}.attn")
    else:
        att = b.op("Mul", [att, b.constant(1.0 / math.sqrt(hd), np.float32)],
                   base=f"{p}.attn")
    att = b.op("Softmax", [att], base=f"{p}.attn", axis=-1)
    o = b.op("Transpose", [b.op("MatMul", [att, v], base=f"{p}.attn.ctx")],
             perm=[0, 2, 1, 3])
    s = b.op("Shape", [o])
    o = b.op("Reshape", [o, b.op("Concat", [b.dim(s, 0), b.dim(s, 1), b.constant([d])],
                                axis=0)])
    o = b.linear_matmul(o, d, d, gain=0.5, base=f"{p}.attn.proj")
    x = b.op("Add", [x, o], base=f"{p}.residual1")
    h = layer_norm(b, x, d, f"{p}.norm2")
    h = b.linear_matmul(h, d, mlp, gain=2.0, base=f"{p}.mlp.fc1")
    # GELU as exporters write it: x * 0.5 * (1 + erf(x / sqrt(2)))
    e = b.op("Erf", [b.op("Div", [h, b.constant(math.sqrt(2.0), np.float32)], base=f"{p}.gelu")])
    e = b.op("Add", [e, b.constant(1.0, np.float32)], base=f"{p}.gelu")
    h = b.op("Mul", [b.op("Mul", [h, e], base=f"{p}.gelu"), b.constant(0.5, np.float32)],
             base=f"{p}.gelu")
    h = b.linear_matmul(h, mlp, d, gain=0.5, base=f"{p}.mlp.fc2")
    x = b.op("Add", [x, h], base=f"{p}.residual2")
    return x


# --- (d) ViT-style encoder ------------------------------------------------
def vit_tiny():
    b = Builder("vit_tiny", 16, seed=14)
    d, heads, layers, mlp, patch = 192, 3, 4, 768, 16
    hd = d // heads
    tokens = (224 // patch) ** 2
    x = b.conv("input", 3, d, patch, stride=patch, bias=True, pad=0, gain=1.0,
               base="patch_embed.proj")
    x = b.reshape_chain(x, keep=[0, 1], rest=[-1])                 # flatten(2)
    x = b.op("Transpose", [x], perm=[0, 2, 1])                      # [N, 196, 192]
    shape = b.op("Shape", [x])
    n = b.dim(shape, 0)
    cls_shape = b.op("Concat", [n, b.constant([1, d])], axis=0)
    cls = b.weight("cls_token", b.rng.normal(0.0, 0.5, (1, 1, d)).astype(np.float32))
    x = b.op("Concat", [b.op("Expand", [cls, cls_shape]), x], axis=1)
    pos = b.weight("pos_embed", b.rng.normal(0.0, 0.5, (1, tokens + 1, d)).astype(np.float32))
    x = b.op("Add", [x, pos], base="pos_embed")

    for i in range(layers):
        x = encoder_layer(b, x, d, heads, mlp, f"blocks.{i}", i)
    x = layer_norm(b, x, d, "norm")
    x = b.op("Gather", [x, b.constant(0)], base="cls", axis=1)     # x[:, 0]
    x = b.linear_gemm(x, d, 1000, gain=1.0, base="head")
    b.nodes[-1].output[0] = "logits"
    return b.finish(image_input(3, 224, 224), [out_info("logits", ["N", 1000])]), (3, 224, 224)


# --- (e) MLP --------------------------------------------------------------
def mlp():
    b = Builder("mlp", 17, seed=15)
    x = b.op("Relu", [b.linear_matmul("input", 784, 512, gain=2.0, base="fc1")])
    x = b.op("Relu", [b.linear_matmul(x, 512, 256, gain=2.0, base="fc2")])
    x = b.linear_gemm(x, 256, 10, gain=1.0, base="fc3")
    b.nodes[-1].output[0] = "logits"
    x_info = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 784])
    return b.finish(x_info, [out_info("logits", ["N", 10])]), (784,)


# --- (f) Sequence encoder with an open length -----------------------------
def text_encoder():
    """Two encoder layers on [N, T, 64] token embeddings; both N and T are
    symbolic, and nothing in the graph fixes T (no position table), so one
    program can serve every sequence length."""
    b = Builder("text_encoder", 17, seed=16)
    d, heads, layers, mlp = 64, 4, 2, 256
    x = "input"
    for i in range(layers):
        x = encoder_layer(b, x, d, heads, mlp, f"layers.{i}", i)
    x = layer_norm(b, x, d, "norm")
    b.nodes[-1].output[0] = "hidden"
    x_info = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", "T", d])
    return b.finish(x_info, [out_info("hidden", ["N", "T", d])]), (128, d)


MODELS = [("mobilenetv3_small", mobilenetv3_small), ("resnet18", resnet18),
          ("detector", detector), ("vit_tiny", vit_tiny), ("mlp", mlp),
          ("text_encoder", text_encoder)]


def main(argv):
    args = argv[1:]
    only = None
    if len(args) == 3 and args[1] == "--only":
        only = args[2].split(",")
        unknown = [n for n in only if n not in dict(MODELS)]
        if unknown:
            print(f"make_zoo.py: --only: no zoo model {unknown[0]!r} (the zoo has "
                  f"{', '.join(n for n, _ in MODELS)})", file=sys.stderr)
            return 2
        args = args[:1]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: make_zoo.py OUTDIR [--only NAME,...]", file=sys.stderr)
        return 2
    out = args[0]
    os.makedirs(out, exist_ok=True)
    entries = []
    for seed, (name, build) in enumerate(MODELS, start=100):
        if only is not None and name not in only:
            continue  # the same seed as in a full run: the same weights and input
        model, dims = build()
        onnx.save(model, os.path.join(out, f"{name}.onnx"))
        shape = [1, *dims]
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        np.save(os.path.join(out, f"{name}_input.npy"), x)
        ops = sorted({n.op_type for n in model.graph.node})
        entries.append({"name": name, "file": f"{name}.onnx", "opset": model.opset_import[0].version,
                        "input": "input", "shape": shape, "npy": f"{name}_input.npy",
                        "outputs": [o.name for o in model.graph.output],
                        "nodes": len(model.graph.node), "ops": ops})
        print(f"{name}: opset {entries[-1]['opset']}, {len(model.graph.node)} nodes, "
              f"{sum(int(np.prod(t.dims)) for t in model.graph.initializer) / 1e6:.2f} M weights, "
              f"input {'x'.join(map(str, shape))}")
    with open(os.path.join(out, "zoo.json"), "w") as f:
        json.dump({"models": entries}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
