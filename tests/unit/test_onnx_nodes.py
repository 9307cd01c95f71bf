"""ONNX node mappings one at a time, each checked against ONNX's reference evaluator, and the op
kinds added for imported models (sub, div, const_binary, slice, unmapped) against naive loops."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from accelsim.errors import ShapeError
from accelsim.kernels.execute import make_inputs, run_graph
from accelsim.kernels.forward import run_op
from accelsim.workload.counts import count_op
from accelsim.workload.importers.onnx import read_graph
from accelsim.workload.ops import OpKind, make_op
from accelsim.workload.tables import unsupported_ops

I64 = np.int64


def single(tmp_path, shape, nodes, consts=None, outputs=("y",), opset=17):
    """A model: input x (N, *shape) -> `nodes` -> outputs; returns (graph, model)."""
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], outs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type for v in (*inferred.value_info, *inferred.output)}
    for o in model.graph.output:
        o.type.CopyFrom(types[o.name])
    onnx.save(model, tmp_path / "m.onnx")
    return read_graph(tmp_path / "m.onnx"), model


def node(op, *ins, outs=("y",), **kw):
    return helper.make_node(op, list(ins), list(outs), name=f"n_{op}", **kw)


def c(*values, dtype=np.float32):
    return np.array(values, dtype=dtype)


# (input per-sample shape, nodes, constants, expected op kinds in the graph, outputs)
CASES = {
    "slice": ((4, 10), [node("Slice", "x", "s", "e", "a", "st")],
              {"s": c(1, dtype=I64), "e": c(-1, dtype=I64), "a": c(2, dtype=I64),
               "st": c(2, dtype=I64)}, ["slice"]),
    "slice_to_end": ((4, 10), [node("Slice", "x", "s", "e", "a")],
                     {"s": c(0, 2, dtype=I64), "e": c(2**62, 2**62, dtype=I64),
                      "a": c(0, 1, dtype=I64)}, ["slice"]),
    "split": ((3, 8), [node("Split", "x", "sp", outs=("y", "z"), axis=-1)],
              {"sp": c(2, 6, dtype=I64)}, ["slice", "slice"], ("y", "z")),
    "gather_index": ((5, 6), [node("Gather", "x", "i", axis=1)], {"i": np.array(2, I64)},
                     ["slice", "reshape"]),
    "gather_range": ((5, 6), [node("Gather", "x", "i", axis=2)], {"i": c(1, 2, 3, dtype=I64)},
                     ["slice"]),
    "unsqueeze_squeeze": ((3, 4), [node("Unsqueeze", "x", "a", outs=("u",)),
                                   node("Squeeze", "u", "a")],
                          {"a": c(2, dtype=I64)}, ["reshape", "reshape"]),
    "concat_transpose": ((3, 4), [node("Relu", "x", outs=("r",)),
                                  node("Concat", "x", "r", outs=("k",), axis=1),
                                  node("Transpose", "k", perm=[0, 2, 1])], {},
                         ["relu", "concat", "transpose"]),
    "flatten": ((2, 3, 4), [node("Flatten", "x", axis=1)], {}, ["reshape"]),
    "const_operands": ((3, 4), [node("Sub", "one", "x", outs=("a",)),
                                node("Div", "a", "t", outs=("b",)),
                                node("Pow", "b", "two", outs=("p",)),
                                node("Mul", "p", "m")],
                       {"one": c(1.0), "t": c([1.0, 2.0, 4.0, 8.0]), "two": c(2.0),
                        "m": np.arange(12, dtype=np.float32).reshape(1, 3, 4)},
                       ["const_binary"] * 4),
    "two_activations": ((3, 4), [node("Sigmoid", "x", outs=("s",)),
                                 node("Sub", "x", "s", outs=("d",)), node("Div", "d", "s")],
                        {}, ["sigmoid", "sub", "div"]),
    "clip": ((3, 4), [node("Clip", "x", "lo", "hi", outs=("a",)), node("Clip", "a", "lo")],
             {"lo": c(0.0), "hi": c(6.0)}, ["relu6", "relu"]),
    "silu": ((3, 4), [node("Sigmoid", "x", outs=("s",)), node("Mul", "x", "s")], {}, ["silu"]),
    "conv1d": ((4, 16), [node("Conv", "x", "w", "b", pads=[1, 1], strides=[2])],
               {"w": np.random.default_rng(0).standard_normal((6, 4, 3)).astype(np.float32),
                "b": c(*range(6))}, ["reshape", "conv2d", "reshape"]),
    "conv_transpose2d": ((3, 4, 4), [node("ConvTranspose", "x", "w", strides=[2, 2])],
                         {"w": np.random.default_rng(1).standard_normal((3, 5, 2, 2)).astype(
                             np.float32)}, ["reshape", "conv_transpose3d", "reshape"]),
    "pools": ((3, 8, 8), [node("AveragePool", "x", outs=("a",), kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1], count_include_pad=1),
                          node("MaxPool", "a", outs=("m",), kernel_shape=[2, 2], strides=[2, 2]),
                          node("ReduceMean", "m", axes=[2, 3], keepdims=1)], {},
              ["avgpool2d", "maxpool2d", "global_avgpool", "reshape"]),
    "norms": ((3, 5), [node("BatchNormalization", "x", "g", "b", "m", "v", outs=("n",)),
                       node("InstanceNormalization", "n", "g", "b", outs=("i",)),
                       node("Softmax", "i", axis=-1)],
              {"g": c(1.0, 2.0, 0.5), "b": c(0.1, 0.2, 0.3), "m": c(0.0, 0.1, -0.1),
               "v": c(1.0, 0.5, 2.0)}, ["batchnorm", "instancenorm", "softmax"]),
    "batchnorm_1d": ((3,), [node("BatchNormalization", "x", "g", "b", "m", "v")],
                     {"g": c(1.0, 2.0, 0.5), "b": c(0.1, 0.2, 0.3), "m": c(0.0, 0.1, -0.1),
                      "v": c(1.0, 0.5, 2.0)}, ["reshape", "batchnorm", "reshape"]),
    "gemm": ((4,), [node("Gemm", "x", "w", "b", alpha=0.5, beta=2.0)],
             {"w": np.arange(12, dtype=np.float32).reshape(4, 3), "b": c(1.0, 2.0, 3.0)},
             ["linear"]),
    "dynamic_reshape": ((4, 6), [node("Shape", "x", outs=("s",)),
                                 node("Gather", "s", "zero", outs=("n",), axis=0),
                                 node("Unsqueeze", "n", "ax", outs=("nu",)),
                                 node("Concat", "nu", "m1", outs=("t",), axis=0),
                                 node("Identity", "x", outs=("xi",)),
                                 node("Reshape", "xi", "t")],
                        {"zero": np.array(0, I64), "ax": c(0, dtype=I64), "m1": c(-1, dtype=I64)},
                        ["reshape"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_maps_like_the_onnx_reference(tmp_path, case) -> None:
    shape, nodes, consts, expected, *outs = CASES[case]
    g, model = single(tmp_path, shape, nodes, consts, *outs)
    assert [op.kind.value for op in g.ops] == expected and unsupported_ops(g) == []
    ours = run_graph(g, 3, "fp32")
    refs = ReferenceEvaluator(model).run(None, make_inputs(g, 3))
    for name, ref in zip(g.outputs, refs, strict=True):
        np.testing.assert_allclose(ours[name], ref, rtol=1e-5, atol=1e-5)


def test_same_padding_and_unmapped_variants(tmp_path) -> None:
    """Asymmetric SAME padding keeps ONNX's output size (NB: windows half a pixel off);
    a softmax over a middle axis and a reversing slice are unmapped, shaped as ONNX says."""
    w = np.ones((2, 3, 3, 3), np.float32)
    nodes = [node("Conv", "x", "w", outs=("c",), strides=[2, 2], auto_pad="SAME_UPPER"),
             node("Softmax", "c", outs=("s",), axis=1),
             node("Slice", "s", "st", "en", "ax", "sp")]
    consts = {"w": w, "st": c(-1, dtype=I64), "en": c(-9, dtype=I64), "ax": c(3, dtype=I64),
              "sp": c(-1, dtype=I64)}
    g, _ = single(tmp_path, (3, 8, 8), nodes, consts)
    assert [op.kind.value for op in g.ops] == ["conv2d", "unmapped", "unmapped"]
    assert g.ops[0].output_shape == (2, 4, 4) and g.ops[-1].output_shape == (2, 4, 4)
    assert len(unsupported_ops(g)) == 2


# ---- the added op kinds against naive loops ----------------------------------------------


def test_slice_kernel_against_a_loop() -> None:
    op = make_op("s", OpKind.SLICE, ("x",), ((5, 7),),
                 {"axes": (0, -1), "starts": (1, -6), "ends": (5, 100), "steps": (2, 3)})
    x = np.arange(2 * 5 * 7, dtype=np.float32).reshape(2, 5, 7)
    rows, cols = range(1, 5, 2), range(1, 7, 3)
    ref = np.array([[[x[n, i, j] for j in cols] for i in rows] for n in range(2)])
    assert op.output_shape == (2, 2)
    np.testing.assert_array_equal(run_op(op, [x], {}), ref)
    cost = count_op(op)
    assert cost.fwd_flops == 0 and cost.read_elems == cost.write_elems == 4
    with pytest.raises(ShapeError, match="step 0"):
        make_op("s", OpKind.SLICE, ("x",), ((5,),), {"axes": (0,), "starts": (0,),
                                                     "ends": (5,), "steps": (0,)})


@pytest.mark.parametrize(("fn", "reverse"), list(itertools.product(
    ["add", "sub", "mul", "div", "pow"], [False, True])))
def test_const_binary_kernel_against_a_loop(fn, reverse) -> None:
    funcs = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)
    const = rng.uniform(0.5, 2.0, (4,)).astype(np.float32)
    op = make_op("c", OpKind.CONST_BINARY, ("x",), ((3, 4),),
                 {"fn": fn, "reverse": reverse, "const_shape": (4,)})
    y = run_op(op, [x], {"const": const})
    f = funcs[fn]
    for n, i, j in itertools.product(range(2), range(3), range(4)):
        a, b2 = (const[j], x[n, i, j]) if reverse else (x[n, i, j], const[j])
        assert y[n, i, j] == pytest.approx(f(a, b2), rel=1e-5)
    assert op.params == 4 and count_op(op).fwd_flops == 12
    scalar = make_op("c", OpKind.CONST_BINARY, ("x",), ((3, 4),), {"fn": fn, "scalar": 3.0})
    assert scalar.params == 0
    np.testing.assert_allclose(run_op(scalar, [x], {}), f(x, np.float32(3.0)), rtol=1e-6)


@pytest.mark.parametrize("kind", [OpKind.SUB, OpKind.DIV])
def test_sub_div_broadcast_against_a_loop(kind) -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)
    b2 = rng.uniform(0.5, 2.0, (2, 1, 4)).astype(np.float32)
    op = make_op("o", kind, ("a", "b"), ((3, 4), (1, 4)), {})
    y = run_op(op, [a, b2], {})
    for n, i, j in itertools.product(range(2), range(3), range(4)):
        want = a[n, i, j] - b2[n, 0, j] if kind == OpKind.SUB else a[n, i, j] / b2[n, 0, j]
        assert y[n, i, j] == pytest.approx(want, rel=1e-6)


def test_unmapped_has_no_formula_and_keeps_its_parameters() -> None:
    op = make_op("u", OpKind.UNMAPPED, ("x",), ((3,),),
                 {"source_op": "onnx:Foo", "shape": (2, 2), "weights": (("input1", (4, 3)),)})
    assert op.output_shape == (2, 2) and op.params == 12 and count_op(op) is None
