"""Fuzz cases for the surfaces added after the first round (issue 24): ONNX models (with
external data), SCALE-Sim configurations and topologies, request traces, measurement CSVs,
sweep stores and sweep grids. Each builds its files from a `Picker` (so hypothesis shrinks
them and a seed rebuilds them) and a command line that reads them.

    case = SURFACE_CASES["onnx"](RandomPicker(random.Random(4)))
    case.argv    # ['simulate', '{dir}/m.onnx', '--hw', 'a100', '--json']
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Callable

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from accelsim.datafiles import data_root
from accelsim.devices.systolic.scalesim.config import cfg_text

from .cases import DIR, Case
from .mutate import Picker

# Cell texts at and beyond every edge, as a hostile file would hold them.
CELLS = ("0", "-1", "1", "7", "64", "1e3", "1_0", "\uff11\uff10", "\u0661\u0660", "nan", "inf",
         "-inf", "1e308", "5e-324", "99999999999999999999", "9" * 500, "", " ", "x", "%s",
         "100%", "=1+2", "1.5", "0x10", "\u0000", "16777216", "1000000000000")
DIMS = (1, 2, 3, 8, 16, 0, -1, -7, 65536, 1 << 31)
ONNX_OPS = ("Conv", "MatMul", "Gemm", "Split", "Relu", "MaxPool", "Reshape", "Add", "Softmax",
            "AveragePool", "Transpose")


def _dims(picker: Picker, rank: int) -> list[int | str]:
    good = picker.chance(0.6)
    return ["N", *(picker.choice(DIMS[:5] if good else DIMS) for _ in range(rank - 1))]


def _ints(picker: Picker, n: int, pool: tuple[int, ...]) -> list[int]:
    return [picker.choice(pool) for _ in range(n)]


def onnx_case(picker: Picker) -> Case:
    """One node of a random op, with attributes, shapes, weights and opset pushed to edges;
    sometimes its weight stored as external data that leaves the folder, or bytes damaged."""
    op = picker.choice(ONNX_OPS)
    rank = 4 if op in ("Conv", "MaxPool", "AveragePool") else picker.choice((2, 3))
    shape = _dims(picker, rank)
    attrs: dict[str, object] = {}
    inits: dict[str, np.ndarray] = {}
    inputs, outputs = ["x"], ["y"]
    edge = (1, 2, 3, 0, -1, 1 << 20)
    if op in ("Conv", "MaxPool", "AveragePool"):
        attrs["kernel_shape"] = _ints(picker, 2, (1, 3, 0, -2, 99))
        if picker.chance(0.5):
            attrs["strides"] = _ints(picker, 2, edge)
        if picker.chance(0.4):
            attrs["pads"] = _ints(picker, 4, (0, 1, -1, 5, 1 << 20))
        if op == "Conv":
            if picker.chance(0.3):
                attrs["dilations"] = _ints(picker, 2, edge)
            c_in = shape[1] if isinstance(shape[1], int) and 0 < shape[1] < 64 else 3
            k = [max(1, min(int(v), 5)) for v in attrs["kernel_shape"]]  # type: ignore[union-attr]
            c_w = c_in if picker.chance(0.7) else picker.choice((1, 5, 64))
            inits["w"] = np.ones((picker.choice((4, 8)), c_w, *k), np.float32)
            inputs.append("w")
    elif op in ("MatMul", "Gemm"):
        d_in = shape[-1] if isinstance(shape[-1], int) and 0 < shape[-1] < 4096 else 8
        rows = d_in if picker.chance(0.6) else picker.choice((1, 4, 32, 4096))
        w_shape = picker.choice(((rows, 8), (rows,), (8, rows), (rows, 8, 2)))
        inits["w"] = np.ones(w_shape, np.float32)
        inputs.append("w")
        if op == "Gemm" and picker.chance(0.5):
            attrs["transB"] = picker.choice((0, 1))
    elif op == "Split":
        inits["sp"] = np.array(_ints(picker, 2, (1, 2, 3, 4, 0, -1)), np.int64)
        inputs.append("sp")
        attrs["axis"] = picker.choice((-1, 1, 0, 5))
        outputs = ["y", "z"]
    elif op == "Reshape":
        inits["s"] = np.array(picker.choice(([0, -1], [-1], [0, 2, -1], [0, -1, -1], [0, 0])),
                              np.int64)
        inputs.append("s")
    elif op == "Add":
        inits["b"] = np.ones(_ints(picker, picker.integer(1, 2), (1, 2, 8, 3)), np.float32)
        inputs.append("b")
    elif op == "Softmax":
        attrs["axis"] = picker.choice((-1, 1, 0, 9))
    elif op == "Transpose":
        attrs["perm"] = picker.choice(([0, 2, 1], [1, 0, 2], [0, 1], [0, 0, 1]))[:rank]
    node = helper.make_node(op, inputs, outputs, name=f"n_{op.lower()}", **attrs)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["N", *(f"d{i}" for i in
                                                                        range(rank - 1))])
            for o in outputs]
    graph = helper.make_graph([node], "g", [x], outs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    opset = picker.choice((17, 17, 17, 13, 11, 7, 1, 6, 999, 21))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    files: dict[str, bytes] = {}
    special: dict[str, str] = {}
    note = f"{op} {attrs} x{shape} opset {opset}"
    if inits and picker.chance(0.25):  # the first initialiser as external data
        t = model.graph.initializer[0]
        raw = numpy_helper.to_array(t).tobytes()
        where = picker.choice(("w.bin", "../w.bin", "/etc/passwd", "sub/../../w.bin", "",
                               "link.bin", "fifo.bin", "adir", "w.bin\u0000x", "C:\\w.bin"))
        files["w.bin"] = raw if picker.chance(0.7) else raw[: len(raw) // 2]
        if where == "link.bin":
            special["link.bin"] = "link:/etc/hostname"
        elif where in ("fifo.bin", "adir"):
            special[where] = "fifo" if where == "fifo.bin" else "dir"
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", where), ("offset", picker.choice(("0", "0", "-1", "x", "8"))),
                     ("length", str(len(raw)) if picker.chance(0.8) else "99999999")):
            e = t.external_data.add()
            e.key, e.value = k, v
        note += f"; external data at {where!r}"
    data = model.SerializeToString()
    if picker.chance(0.1):
        data = data[: picker.integer(0, len(data))]
        note += "; truncated"
    files["m.onnx"] = data
    if picker.chance(0.05):
        special = {"m.onnx": picker.choice(("fifo", "dir", "link:/dev/zero"))}
        files.pop("m.onnx")
        note = "the model path is not a file"
    argv = ["simulate", f"{DIR}/m.onnx", "--hw", picker.choice(("a100", "t4", "tpu-v3")),
            "--json"]
    return Case("onnx", argv, files, special, ("m.onnx", "w.bin"), note)


def scalesim_case(picker: Picker) -> Case:
    """A SCALE-Sim .cfg with one value replaced by an edge cell, and a topology whose rows
    hold edge numbers; sometimes a --scalesim-report into a bad folder."""
    cfg = cfg_text(picker.choice((1, 8, 32)), picker.choice((1, 8, 32)), 64, 64, 64, 10,
                   picker.choice(("ws", "os", "is")))
    lines = cfg.splitlines()
    note = []
    for _ in range(picker.integer(0, 2)):
        i = picker.integer(0, len(lines) - 1)
        if ":" in lines[i] or "=" in lines[i]:
            key = lines[i].split(":")[0].split("=")[0]
            lines[i] = f"{key}: {picker.choice(CELLS)}" if picker.chance(0.9) else ""
            note.append(lines[i][:60])
    gemm = picker.chance(0.5)
    header = "Layer, M, N, K," if gemm else (
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,")
    n_cols = 3 if gemm else 7
    rows = []
    for r in range(picker.integer(1, 3)):
        good = ("64", "32", "16") if gemm else ("14", "14", "3", "3", "8", "16", "1")
        cells = [good[c % len(good)] if picker.chance(0.7) else picker.choice(CELLS)
                 for c in range(n_cols + picker.choice((0, 0, 0, -1, 1)))]
        rows.append(", ".join([picker.choice((f"l{r}", f"DP{r}", "", "=cmd")), *cells]) + ",")
    topo = "\n".join([header, *rows]) + "\n"
    argv = ["simulate", f"{DIR}/t.csv", "--hw", f"{DIR}/a.cfg", "--json"]
    if picker.chance(0.3):
        argv += ["--scalesim-report", picker.choice((f"{DIR}/rep", f"{DIR}/t.csv/rep", "",
                                                      f"{DIR}/fifo"))]
    return Case("scalesim", argv, {"a.cfg": "\n".join(lines).encode(), "t.csv": topo.encode()},
                {"fifo": "fifo"}, ("a.cfg", "t.csv"), "; ".join(note + rows)[:300])


def trace_case(picker: Picker) -> Case:
    """A request trace with edge cells, extra or missing cells, or out-of-order rows."""
    header = picker.choice(("arrival_s,prompt_tokens,output_tokens",) * 4 + (
        "arrival_s,prompt_tokens", "prompt_tokens,arrival_s,output_tokens", "", "a,b,c"))
    rows, t = [], 0.0
    for _ in range(picker.integer(0, 6)):
        t += picker.choice((0.0, 0.1, 1.0))
        cells = [f"{t:g}", str(picker.choice((1, 20, 100))), str(picker.choice((1, 5, 9)))]
        if picker.chance(0.4):
            cells[picker.integer(0, 2)] = picker.choice(CELLS)
        if picker.chance(0.15):
            cells.append(picker.choice(CELLS))
        if picker.chance(0.1):
            cells.pop()
        rows.append(",".join(cells))
    text = "\n".join([header, *rows]) + "\n"
    path = f"{DIR}/trace.csv"
    special = {}
    if picker.chance(0.08):
        path = picker.choice(("/dev/zero", f"{DIR}/fifo.csv", f"{DIR}/adir"))
        special = {"fifo.csv": "fifo", "adir": "dir"}
    argv = ["simulate", picker.choice(("llama2_7b", "gpt2")), "--hw", "a100", "--mode", "serve",
            "--requests-file", path, "--json"]
    return Case("trace", argv, {"trace.csv": text.encode("utf-8", "surrogatepass")}, special,
                ("trace.csv", "fifo.csv", "adir", "/dev/zero"), text[:200])


def measurements_case(picker: Picker) -> Case:
    """Two or three rows of the example measurements with cells replaced by edge cells."""
    example = data_root("workloads") / "validate-example.csv"
    rows = list(csv.DictReader(io.StringIO(example.read_text())))
    rows = rows[: picker.integer(1, 3)]
    columns = list(rows[0])
    note = []
    for row in rows:
        for _ in range(picker.integer(0, 2)):
            col = picker.choice(("value", "sim_batch", "sim_model", "sim_profile", "sim_mode",
                                 "sim_precision", "sim_metric", "sim_software", "id"))
            row[col] = picker.choice(CELLS + ("no_model", "a100", "train"))
            note.append(f"{col}={row[col][:20]!r}")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    argv = ["validate", f"{DIR}/m.csv", "--json"]
    if picker.chance(0.2):
        argv += ["--fit", "--folds", "2", "--out", picker.choice((f"{DIR}/out", "",
                                                                   f"{DIR}/m.csv/out"))]
    return Case("measurements", argv, {"m.csv": out.getvalue().encode()}, {}, ("m.csv",),
                "; ".join(note))


def store_case(picker: Picker) -> Case:
    """A sweep resumed from a store whose rows are damaged (null, a list, negative or
    non-finite figures, no hardware, not JSON)."""
    from accelsim.explore.grid import make_grid
    from accelsim.explore.run import point_row

    batches = [1, 2]
    grid = make_grid("mlp", "t4", {"batch": batches})
    db = sqlite3.connect(":memory:")
    db.executescript("""
CREATE TABLE accelsim_sweep (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE points (key TEXT PRIMARY KEY, row TEXT NOT NULL, pid INTEGER NOT NULL,
                     finished_unix_s REAL NOT NULL);
INSERT INTO accelsim_sweep VALUES ('schema', '1');""")
    note = []
    for point in grid.points():
        row = point_row("mlp", "mlp", point)
        damage = picker.choice(("none", "null", "list", "negative", "inf", "nohw", "text",
                                "nan", "huge"))
        if damage == "null":
            text = "null"
        elif damage == "list":
            text = "[1, 2]"
        elif damage == "text":
            text = "{not json"
        elif damage == "nohw":
            text = json.dumps({k: v for k, v in row.items() if k != "hardware"})
        else:
            key = picker.choice(("throughput_samples_per_s", "latency_s", "energy_j_per_sample"))
            value = {"negative": -5.0, "inf": float("inf"), "nan": float("nan"),
                     "huge": 1e300, "none": row.get(key)}[damage]
            text = json.dumps({**row, key: value})
        note.append(damage)
        db.execute("INSERT INTO points VALUES (?, ?, 1, 0)", (point.key, text))
    db.commit()
    data = db.serialize()
    argv = ["sweep", "mlp", "--hw", "t4", "--batch", ",".join(map(str, batches)), "--resume",
            f"{DIR}/s.sqlite", "--json", "-q"]
    return Case("store", argv, {"s.sqlite": bytes(data)}, {}, (), "rows: " + ", ".join(note))


def grid_case(picker: Picker) -> Case:
    """Sweep and compare grids with repeated, non-ASCII or malformed values."""
    values = picker.choice(("1,1", "1,2,1", "1,\uff12", "1,\u0662", "1,1_0", "1,1e3", "1,,2",
                            "1,2,...,8", "1,2,...,1e400", "8,4,...,1", "1, 2", "-1,2", "0,1"))
    hw = picker.choice(("t4", "t4,t4", "t4,a100", "t4,=x", "", ",", "T4"))
    cmd = picker.choice(("sweep", "sweep", "compare"))
    if cmd == "compare":
        argv = ["compare", "mlp", "--hw", hw, "--batch", values.split(",")[-1] or "1", "--json"]
    else:
        argv = ["sweep", "mlp", "--hw", hw, "--batch", values, "--json", "-q"]
    return Case("grid", argv, {}, {}, (), f"hw {hw!r} batch {values!r}")


SURFACE_CASES: dict[str, Callable[[Picker], Case]] = {
    "onnx": onnx_case, "scalesim": scalesim_case, "trace": trace_case,
    "measurements": measurements_case, "store": store_case, "grid": grid_case,
}
