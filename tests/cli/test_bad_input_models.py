"""Bad imported models (issue 24): ONNX graphs that no real network has (strides or
dilations of 0, negative pads, dimensions of 0 or past the ceilings, opsets onnx does not
know, weights that contradict their inputs, splits that do not cover their axis, NaN weights,
graphs whose every op takes 0 s), model paths that are not files, and a one-PE SCALE-Sim
array. Each was an internal error or an answer from a model that cannot exist; now it is one
clean line (exit 2) or a sane answer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelsim.devices.systolic.scalesim.config import cfg_text
from tests.helpers.cli import one_line_error, run_cli


def strict_json(text: str) -> object:
    """Parse as a JSON parser other than Python's would: NaN and Infinity are errors."""
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


# --- ONNX physical checks -------------------------------------------------------------------


def onnx_file(tmp_path: Path, nodes: list, inits: dict, in_shape: list, opset: int = 17,
              outputs: tuple[str, ...] = ("y",)) -> Path:
    """A model of `nodes` on input x of `in_shape`, its outputs typed by shape inference
    where it can (a symbolic shape of the input's rank where it cannot)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    g = helper.make_graph(nodes, "g", [x], outs,
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    try:
        inferred = onnx.shape_inference.infer_shapes(m).graph
        types = {v.name: v.type for v in (*inferred.value_info, *inferred.output)}
    except Exception:  # noqa: BLE001 - an opset onnx does not know: leave the shapes symbolic
        types = {}
    for o in m.graph.output:
        t = types.get(o.name)
        if t is not None and t.tensor_type.HasField("shape"):
            o.type.CopyFrom(t)
        else:
            o.type.CopyFrom(helper.make_tensor_type_proto(
                TensorProto.FLOAT, ["N", *(f"d{i}" for i in range(len(in_shape) - 1))]))
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


W = np.ones((8, 3, 3, 3), np.float32)


def conv(**attrs: object) -> list:
    return [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", kernel_shape=[3, 3],
                             **attrs)]


ONNX_CASES = {
    # strides 0 was a ZeroDivisionError
    "conv strides 0": (conv(strides=[0, 0]), {"w": W}, ["N", 3, 32, 32], 17,
                       "node 'conv1' (Conv) has strides [0, 0]"),
    "conv dilation 0": (conv(dilations=[0, 0]), {"w": W}, ["N", 3, 32, 32], 17,
                        "has dilations [0, 0]"),
    "conv negative pads": (conv(pads=[-1, -1, -1, -1]), {"w": W}, ["N", 3, 32, 32], 17,
                           "has pads [-1, -1, -1, -1]"),
    "pool strides 0": ([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2],
                                         strides=[0, 0])], {}, ["N", 3, 8, 8], 17,
                       "node 'mp' (MaxPool) has strides"),
    "huge input": ([helper.make_node("Relu", ["x"], ["y"], name="r")], {},
                   ["N", 65536, 65536, 65536], 17, "elements per sample"),
    "dimension past the ceiling": ([helper.make_node("Relu", ["x"], ["y"], name="r")], {},
                                   ["N", 2**31], 17, "dimension 1 is 2147483648"),
    "zero dimension": ([helper.make_node("Relu", ["x"], ["y"], name="r")], {}, ["N", 0, 4], 17,
                       "dimension 1 is 0"),
    "negative dimension": ([helper.make_node("Relu", ["x"], ["y"], name="r")], {},
                           ["N", -3, 4], 17, "dimension 1 is -3"),
    "opset 1": ([helper.make_node("Relu", ["x"], ["y"], name="r")], {}, ["N", 4], 1,
                "opset 1 is outside"),
    "opset 999": ([helper.make_node("Relu", ["x"], ["y"], name="r")], {}, ["N", 4], 999,
                  "opset 999 is outside"),
    # costed from the input: params 8e12 from a 32-element weight
    "matmul weight vs input": ([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                               {"w": np.ones((32,), np.float32)}, ["N", 1000, 1000], 17,
                               "node 'mm' (MatMul) has a weight (32,)"),
    "matmul 2-D weight vs input": ([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                                   {"w": np.ones((4, 8), np.float32)}, ["N", 16, 64], 17,
                                   "inner dimensions 64 and 4"),
    "conv weight vs channels": (conv(), {"w": np.ones((8, 5, 3, 3), np.float32)},
                                ["N", 3, 32, 32], 17, "does not fit its input of 3 channels"),
    "split not covering": ([helper.make_node("Split", ["x", "sp"], ["y", "z"], name="sp",
                                             axis=-1)],
                           {"sp": np.array([2, 3], np.int64)}, ["N", 3, 8], 17,
                           "splits an axis of 8 into [2, 3]"),
    # every op a reshape: 0 s, and throughput divided by it (ZeroDivisionError)
    "all ops take 0 s": ([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                         {"s": np.array([0, -1], np.int64)}, ["N", 3, 8], 17,
                         "every costed op takes 0 s"),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_physically_impossible_onnx_models_are_one_line_errors(capsys, tmp_path, case):
    nodes, inits, shape, opset, says = ONNX_CASES[case]
    outputs = ("y", "z") if case == "split not covering" else ("y",)
    path = onnx_file(tmp_path, nodes, inits, shape, opset, outputs)
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100", "--json")
    assert says in err and str(path) in err


def test_a_one_pe_output_stationary_array_stays_within_its_peak(capsys, tmp_path):
    # found by the surface fuzzer: SCALE-Sim's "- 1" made the layer one cycle faster than one
    # MAC per cycle, an internal error (the peak invariant)
    cfg = tmp_path / "a.cfg"
    cfg.write_text(cfg_text(1, 1, 64, 64, 64, 10, "os"))
    topo = tmp_path / "t.csv"
    topo.write_text("Layer, M, N, K,\nfc1, 64, 32, 16,\n")
    code, out, err = run_cli(capsys, "simulate", str(topo), "--hw", str(cfg), "--json")
    assert code == 0, err
    assert strict_json(out)["layers"][0]["time_s"] >= 2 * 64 * 32 * 16 / 2e9


def test_an_onnx_weight_holding_nan_is_refused(capsys, tmp_path):
    # --execute reported a NaN error figure
    w = np.ones((4, 3), np.float32)
    w[0, 0] = np.nan
    path = onnx_file(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                     {"w": w}, ["N", 4])
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100", "--execute")
    assert "initialiser 'w' holds NaN" in err


@pytest.mark.parametrize("special", ["zero", "fifo", "dir"])
def test_a_model_path_that_is_not_a_file_is_one_line(capsys, tmp_path, special):
    # a symlink to /dev/zero was KeyError: '' (the importer picked by the target's suffix)
    path = tmp_path / "m.onnx"
    if special == "zero":
        path.symlink_to("/dev/zero")
    elif special == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert str(path) in err
