"""Small ONNX models built with `onnx.helper` for the importer's tests (nothing downloaded).

Each builder returns a `ModelProto` equivalent to a piece of the zoo: a ResNet basic block, the
MNIST MLP, a BERT encoder layer (post-LN) and a GPT-2-style causal block, plus a tiny CNN for the
command line. Weights are seeded normals (or zeros with `zero=True`); the batch is symbolic.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Net:
    """Accumulates nodes and initialisers; `tensor` names are unique by counter."""

    def __init__(self, seed: int = 0, zero: bool = False) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.zero = zero
        self.k = 0

    def name(self, base: str) -> str:
        self.k += 1
        return f"{base}_{self.k}"

    def init(self, base: str, value: np.ndarray) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, base: str, *shape: int, scale: float = 0.1) -> str:
        value = np.zeros(shape, np.float32) if self.zero else \
            (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.init(base, value)

    def op(self, op_type: str, *inputs: str, n_out: int = 1, **attrs: object) -> str:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=outs[0], **attrs))
        return outs[0]

    def conv_bn(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1,
                relu: bool = True) -> str:
        w = self.weight("w", c_out, c_in, k, k, scale=math.sqrt(2 / (c_in * k * k)))
        y = self.op("Conv", x, w, kernel_shape=[k, k], strides=[stride, stride],
                    pads=[k // 2] * 4)
        stats = [self.init("s", np.full(c_out, v, np.float32)) for v in (1.0, 0.1, 0.05, 0.9)]
        y = self.op("BatchNormalization", y, *stats, epsilon=1e-5)
        return self.op("Relu", y) if relu else y

    def linear(self, x: str, d_in: int, d_out: int) -> str:
        """MatMul by a (in, out) weight + Add of a bias, as PyTorch exports nn.Linear on 3-D."""
        y = self.op("MatMul", x, self.weight("w", d_in, d_out, scale=1 / math.sqrt(d_in)))
        return self.op("Add", y, self.weight("b", d_out))

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[str],
              opset: int = OPSET) -> onnx.ModelProto:
        outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
        graph = helper.make_graph(self.nodes, "test", inputs, outs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return typed_outputs(m)


def typed_outputs(m: onnx.ModelProto) -> onnx.ModelProto:
    """Give the graph outputs the types (and shapes) ONNX infers for them, then check."""
    inferred = onnx.shape_inference.infer_shapes(m).graph
    types = {v.name: v.type for v in (*inferred.value_info, *inferred.output)}
    for o in m.graph.output:
        o.type.CopyFrom(types[o.name])
    onnx.checker.check_model(m)
    return m


def image_input(c: int, hw: int, batch: int | str = "N") -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, c, hw, hw])


def basic_block(c_in: int = 64, width: int = 64, stride: int = 1, hw: int = 56,
                zero: bool = False) -> onnx.ModelProto:
    """A ResNet basic block (the zoo's resnet18 layerN.0), downsampling when it must."""
    n = Net(zero=zero)
    y = n.conv_bn("image", c_in, width, 3, stride)
    y = n.conv_bn(y, width, width, 3, relu=False)
    skip = "image"
    if stride != 1 or c_in != width:
        skip = n.conv_bn("image", c_in, width, 1, stride, relu=False)
    out = n.op("Relu", n.op("Add", skip, y))
    return n.model([image_input(c_in, hw)], [out])


def tiny_cnn(zero: bool = False, batch: int | str = "N") -> onnx.ModelProto:
    """conv-bn-relu, maxpool, conv-bn-relu, global pool, flatten, fc: (3, 16, 16) -> 10."""
    n = Net(zero=zero)
    y = n.conv_bn("image", 3, 8, 3)
    y = n.op("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = n.conv_bn(y, 8, 16, 3, stride=2)
    y = n.op("Flatten", n.op("GlobalAveragePool", y), axis=1)
    y = n.op("Gemm", y, n.weight("fc", 10, 16), n.weight("fcb", 10), transB=1)
    return n.model([image_input(3, 16, batch)], [y])


def mnist_mlp(hidden: int = 512) -> onnx.ModelProto:
    """The zoo's `mlp`: flatten, Gemm (transB) + ReLU, MatMul + Add + ReLU, Gemm: 784-512-512-10."""
    n = Net()
    y = n.op("Flatten", "image", axis=1)
    y = n.op("Relu", n.op("Gemm", y, n.weight("w", hidden, 784), n.weight("b", hidden),
                          transB=1))
    y = n.op("Relu", n.linear(y, hidden, hidden))
    y = n.op("Gemm", y, n.weight("w", 10, hidden), n.weight("b", 10), transB=1)
    return n.model([image_input(1, 28)], [y])


def _gelu(n: Net, x: str, erf: bool) -> str:
    if not erf:
        return n.op("Gelu", x, approximate="tanh")  # opset 20
    half, one, root2 = (n.init("c", np.array(v, np.float32)) for v in (0.5, 1.0, math.sqrt(2)))
    e = n.op("Add", n.op("Erf", n.op("Div", x, root2)), one)
    return n.op("Mul", n.op("Mul", x, e), half)


def _heads(n: Net, x: str, heads: int, hd: int, perm: list[int]) -> str:
    shape = n.init("shape", np.array([0, 0, heads, hd], np.int64))
    return n.op("Transpose", n.op("Reshape", x, shape), perm=perm)


def attention(n: Net, x: str, d: int, heads: int, seq: int | None = None,
              padding_mask: bool = False) -> str:
    """Multi-head self-attention on (N, S, D) with q/k/v/o MatMul + Add, HF-style; with `seq`,
    a constant causal mask (S, S) is added to the scores; with `padding_mask`, HF BERT's
    (1 - mask) * -10000 from the graph input "mask" (N, S), and the scale is a Mul."""
    hd = d // heads
    q = _heads(n, n.linear(x, d, d), heads, hd, [0, 2, 1, 3])
    kt = _heads(n, n.linear(x, d, d), heads, hd, [0, 2, 3, 1])  # K^T in one transpose
    v = _heads(n, n.linear(x, d, d), heads, hd, [0, 2, 1, 3])
    s = n.op("MatMul", q, kt)
    if padding_mask:
        s = n.op("Mul", s, n.init("c", np.array(1 / math.sqrt(hd), np.float32)))
        m = n.op("Cast", n.op("Unsqueeze", "mask", n.init("ax", np.array([1, 2], np.int64))),
                 to=TensorProto.FLOAT)
        m = n.op("Mul", n.op("Sub", n.init("one", np.array(1.0, np.float32)), m),
                 n.init("big", np.array(-10000.0, np.float32)))
        s = n.op("Add", s, m)
    else:
        s = n.op("Div", s, n.init("c", np.array(math.sqrt(hd), np.float32)))
    if seq is not None:
        mask = np.triu(np.full((seq, seq), -1e9, np.float32), k=1)
        s = n.op("Add", s, n.init("mask", mask))
    a = n.op("MatMul", n.op("Softmax", s, axis=-1), v)
    a = n.op("Reshape", n.op("Transpose", a, perm=[0, 2, 1, 3]),
             n.init("shape", np.array([0, 0, d], np.int64)))
    return n.linear(a, d, d)


def layernorm(n: Net, x: str, d: int) -> str:
    g = n.init("ln_g", np.ones(d, np.float32))
    return n.op("LayerNormalization", x, g, n.weight("ln_b", d), axis=-1, epsilon=1e-12)


def bert_layer(d: int = 768, heads: int = 12, seq: int | str = "seq",
               erf_gelu: bool = True, padding_mask: bool = False) -> onnx.ModelProto:
    """One post-LN BERT encoder layer on hidden states (N, S, D): the zoo's encoder.layer.i."""
    n = Net()
    x = "hidden"
    x = layernorm(n, n.op("Add", x, attention(n, x, d, heads, padding_mask=padding_mask)), d)
    f = n.linear(_gelu(n, n.linear(x, d, 4 * d), erf_gelu), 4 * d, d)
    x = layernorm(n, n.op("Add", x, f), d)
    inputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["N", seq, d])]
    if padding_mask:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT64, ["N", seq]))
    return n.model(inputs, [x], opset=OPSET if erf_gelu else 20)


def gpt_block(d: int = 64, heads: int = 4, seq: int = 16, vocab: int = 100) -> onnx.ModelProto:
    """Token embedding, a pre-LN causal block and an LM head tied to the embedding
    (MatMul by the transposed table), like GPT-2."""
    n = Net()
    wte = n.weight("wte", vocab, d)
    x = n.op("Gather", wte, "ids")
    x = n.op("Add", x, attention(n, layernorm(n, x, d), d, heads, seq))
    f = n.linear(_gelu(n, n.linear(layernorm(n, x, d), d, 4 * d), True), 4 * d, d)
    x = layernorm(n, n.op("Add", x, f), d)
    logits = n.op("MatMul", x, n.op("Transpose", wte, perm=[1, 0]))
    inp = helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", seq])
    return n.model([inp], [logits])


def with_unsupported() -> onnx.ModelProto:
    """Scores (N, 1, 10) through a ReLU, a LeakyReLU (unmapped, mid-graph), a Sigmoid, then
    NonMaxSuppression (unmapped, data-dependent output) over boxes (N, 10, 4)."""
    n = Net()
    s = n.op("Sigmoid", n.op("LeakyRelu", n.op("Relu", "scores"), alpha=0.1))
    sel = n.op("NonMaxSuppression", "boxes", s, n.init("k", np.array([5], np.int64)))
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["N", 10, 4]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 1, 10])]
    m = n.model(inputs, [s])
    m.graph.output.append(helper.make_empty_tensor_value_info(sel))
    return typed_outputs(m)
