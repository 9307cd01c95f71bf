"""Whole-graph functional execution: fp32 equals chained kernels, error ordering by format,
int8 against an explicit int32 reference, determinism, index inputs, size refusal."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from accelsim.errors import AccelsimError
from accelsim.kernels.execute import (
    calibrate_batchnorm,
    compare_to_fp32,
    last_uses,
    make_inputs,
    op_params,
    run_graph,
    run_op_in_format,
)
from accelsim.kernels.forward import run_op
from accelsim.kernels.quantize import dequantize, quantize_int8
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.ops import make_op
from accelsim.workload.zoo import build_model

FLOAT_FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")


def tiny_cnn(image: int = 16) -> Graph:
    """conv-bn-relu, maxpool, a residual block with a strided grouped conv, pool, linear."""
    g = GraphBuilder("tiny_cnn")
    x = g.input("image", (3, image, image))
    x = g.relu(g.batchnorm(g.conv2d(x, out_channels=16, kernel=3, padding=1, bias=False)))
    x = g.maxpool2d(x, kernel=2)
    y = g.relu(g.conv2d(x, out_channels=16, kernel=3, padding=1, groups=2))
    y = g.conv2d(y, out_channels=32, kernel=3, stride=2, padding=1)
    s = g.conv2d(x, out_channels=32, kernel=1, stride=2, bias=False)
    x = g.relu(g.add(s, y))
    x = g.global_avgpool(x)
    g.linear(x, out_features=10)
    return g.build()


def test_fp32_run_equals_hand_chained_kernels() -> None:
    graph = tiny_cnn()
    env = make_inputs(graph, 2, seed=3)
    for i, op in enumerate(graph.ops):
        params = op_params(op, i, seed=3)
        if op.kind == "batchnorm":  # inference mode with statistics of this batch
            params.update(calibrate_batchnorm(env[op.inputs[0]]))
        env[op.name] = run_op(op, [env[t] for t in op.inputs], params)
    out = run_graph(graph, 2, "fp32", seed=3)
    assert list(out) == list(graph.outputs) == ["linear0"]
    assert out["linear0"].shape == (2, 10) and out["linear0"].dtype == np.float32
    np.testing.assert_array_equal(out["linear0"], env["linear0"])


def _errors(graph: Graph, batch: int) -> dict[str, float]:
    return {p: compare_to_fp32(graph, batch, p, per_layer=False)["output_relative_error"]
            for p in (*FLOAT_FORMATS, "int8")}


# NB: not resnet18 at image 32: its layer4 is 1x1, and batch-statistics batchnorm over 2 values
# turns any perturbation into a sign flip (errors of 30-80% for every format).
@pytest.mark.parametrize("graph", [tiny_cnn(), build_model("resnet18", image_size=64)],
                         ids=["tiny_cnn", "resnet18_64"])
def test_relative_error_ordering_by_format(graph: Graph) -> None:
    e = _errors(graph, 2)
    assert e["fp32"] == 0.0
    assert 0.0 < e["tf32"] < e["bf16"]
    assert 0.0 < e["fp16"] < e["bf16"] < e["fp8_e4m3"] < e["fp8_e5m2"]
    assert e["bf16"] < e["int8"] < e["fp8_e4m3"]


def test_int8_error_is_small_but_not_zero() -> None:
    e = compare_to_fp32(tiny_cnn(), 2, "int8")
    assert 0.0 < e["output_relative_error"] < 0.05
    assert set(e["layer_relative_error"]) == {op.name for op in tiny_cnn().ops}


def test_same_seed_same_result_other_seed_differs() -> None:
    graph = tiny_cnn()
    for p in ("bf16", "int8"):
        a, b = run_graph(graph, 2, p, seed=7), run_graph(graph, 2, p, seed=7)
        np.testing.assert_array_equal(a["linear0"], b["linear0"])
    c = run_graph(graph, 2, "bf16", seed=8)
    assert not np.array_equal(a["linear0"], c["linear0"])
    # the fp32 reference inside compare_to_fp32 is the plain fp32 run of the same seed
    ref = run_graph(graph, 2, "fp32", seed=7)["linear0"]
    got = run_graph(graph, 2, "fp16", seed=7)["linear0"]
    err = compare_to_fp32(graph, 2, "fp16", seed=7)["output_relative_error"]
    assert err == pytest.approx(np.linalg.norm(got - ref) / np.linalg.norm(ref), rel=1e-5)


def _int32_loop_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-tensor activations, per-output-row weights, python-int accumulation."""
    sx = np.float32(np.abs(x).max() / 127)
    qx = np.clip(np.rint(x.astype(np.float64) / sx), -127, 127).astype(int)
    sw = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    qw = np.clip(np.rint(w.astype(np.float64) / sw[:, None].astype(np.float64)), -127, 127)
    y = np.zeros((x.shape[0], w.shape[0]))
    for n, o in itertools.product(range(x.shape[0]), range(w.shape[0])):
        acc = 0
        for k in range(x.shape[1]):
            acc += int(qx[n, k]) * int(qw[o, k])
        assert -(2**31) <= acc < 2**31
        y[n, o] = acc * float(sx) * float(sw[o]) + b[o]
    return y


def test_int8_linear_equals_int32_loop_reference() -> None:
    rng = np.random.default_rng(0)
    op = make_op("fc", "linear", ("x",), ((9,),), dict(out_features=5))
    x = rng.standard_normal((3, 9)).astype(np.float32)
    p = {"weight": rng.standard_normal((5, 9)).astype(np.float32),
         "bias": rng.standard_normal(5).astype(np.float32)}
    got = run_op_in_format(op, [x], p, "int8")
    np.testing.assert_allclose(got, _int32_loop_linear(x, p["weight"], p["bias"]), rtol=1e-6,
                               atol=1e-6)
    assert not np.array_equal(got, run_op(op, [x], p))  # it did quantize


def _fake_quant_reference(op, xs, params, w_axis: int = 0) -> np.ndarray:
    """fp32 kernel on per-tensor dequantized inputs and per-channel dequantized weights."""
    xq = [dequantize(*quantize_int8(x)) for x in xs]
    pq = {k: (dequantize(*quantize_int8(v, axis=w_axis), axis=w_axis) if k == "weight" else v)
          for k, v in params.items()}
    return run_op(op, xq, pq)


@pytest.mark.parametrize(
    "kind,shape,attrs,w_axis",
    [
        ("conv2d", (4, 9, 8), dict(out_channels=6, kernel=3, stride=2, padding=1, groups=2), 0),
        ("conv2d", (4, 7, 7), dict(out_channels=4, kernel=3, padding=2, dilation=2, groups=4), 0),
        ("conv3d", (2, 5, 4, 6), dict(out_channels=3, kernel=(3, 1, 2), stride=(1, 2, 1)), 0),
        ("conv_transpose3d", (3, 3, 2, 4), dict(out_channels=2, kernel=2, stride=2), 1),
        ("linear", (4, 6), dict(out_features=5), 0),
    ],
)
def test_int8_weighted_ops_equal_fp32_on_quantized_values(kind, shape, attrs, w_axis) -> None:
    rng = np.random.default_rng(1)
    op = make_op("op", kind, ("x",), (shape,), attrs)
    x = rng.standard_normal((2, *shape)).astype(np.float32)
    p = {k: rng.standard_normal(s).astype(np.float32) for k, s in op.param_shapes.items()}
    got = run_op_in_format(op, [x], p, "int8")
    np.testing.assert_allclose(got, _fake_quant_reference(op, [x], p, w_axis), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("kind,shapes", [("matmul", ((3, 4), (4, 5))),
                                         ("bmm", ((2, 3, 4), (2, 4, 5)))])
def test_int8_matmul_and_bmm(kind: str, shapes: tuple) -> None:
    rng = np.random.default_rng(2)
    op = make_op("mm", kind, ("a", "b"), shapes, {})
    xs = [rng.standard_normal((2, *s)).astype(np.float32) for s in shapes]
    got = run_op_in_format(op, xs, {}, "int8")
    np.testing.assert_allclose(got, _fake_quant_reference(op, xs, {}), rtol=1e-5, atol=1e-5)


def test_tf32_rounds_only_matmul_like_ops() -> None:
    g = GraphBuilder("t")
    x = g.gelu(g.input("x", (8, 16)))
    g.linear(x, out_features=4)
    r = compare_to_fp32(g.build(), 2, "tf32")["layer_relative_error"]
    assert r["gelu0"] == 0.0 and r["linear0"] > 0.0
    r = compare_to_fp32(g.build(), 2, "bf16")["layer_relative_error"]
    assert r["gelu0"] > 0.0


def test_index_inputs_token_and_position_ids() -> None:
    g = GraphBuilder("emb")
    tok = g.embedding(g.input("ids", (6,), "index"), num_embeddings=11, embedding_dim=4)
    pos = g.embedding(g.input("pos_ids", (6,), "index"), num_embeddings=6, embedding_dim=4)
    graph = g.build((g.add(tok, pos),))
    inputs = make_inputs(graph, 3, seed=0)
    assert inputs["ids"].dtype == np.int64 and 0 <= inputs["ids"].min()
    assert inputs["ids"].max() < 11
    np.testing.assert_array_equal(inputs["pos_ids"], np.tile(np.arange(6), (3, 1)))
    for p in ("fp32", "bf16", "fp8", "int8"):
        assert run_graph(graph, 3, p)["add0"].shape == (3, 6, 4)


def test_last_uses_free_intermediates_and_keep_outputs() -> None:
    g = GraphBuilder("t")
    x = g.input("x", (4,))
    a = g.relu(x)
    b = g.sigmoid(a)
    c = g.add(a, b)
    g.tanh(x)  # dead branch: freed as soon as it is made
    graph = g.build((c,))
    assert last_uses(graph) == {"x": 3, "relu0": 2, "sigmoid0": 2, "add0": 4, "tanh0": 3}
    assert run_graph(graph, 2, "fp16")["add0"].shape == (2, 4)


def test_models_too_large_are_refused() -> None:
    g = GraphBuilder("huge")
    g.linear(g.input("x", (32000,)), out_features=20000)  # 640 M params, 2.6 GB in fp32
    with pytest.raises(AccelsimError, match="fit"):
        run_graph(g.build(), 1, "fp32")


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(AccelsimError, match="precision"):
        run_graph(tiny_cnn(), 1, "fp6")
