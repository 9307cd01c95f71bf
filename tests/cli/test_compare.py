"""`accelsim compare` and `accelsim.compare`: each row is the separate simulation of its device,
fallbacks and left-out devices say so, roofline points stay under their roofs, files are
valid, and bad input is one line (exit 2)."""

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest

import accelsim
from accelsim.errors import AccelsimError
from accelsim.explore.compare import COLUMNS, compare, compare_runs, roofline_inputs, rows_frame
from accelsim.plots.compare import compare_figure
from accelsim.plots.roofline import roof_flops_per_s, roofline_points
from accelsim.profiles.devices import load_profile
from accelsim.results.summary import METRICS, ROW_COLUMNS
from tests.helpers.cli import run_cli

FIVE = "a100,tpu-v3,alveo-u250,edge-tpu,xeon-8480"
REFERENCE = "tests/reference/hardware_specs.csv"
FIGURES = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}
FIGURES_ONLY = ("throughput_samples_per_s", "latency_s", "energy_j_per_sample",
                "average_power_w", "samples_per_j")


def _missing(x):
    return x is None or (isinstance(x, float) and math.isnan(x))


@pytest.fixture(scope="module")
def int8_runs():
    return compare_runs("resnet50", FIVE, precision="int8", batch=4)


def test_columns_hardware_first_then_the_shared_row(int8_runs):
    frame = rows_frame(int8_runs)
    assert list(frame.columns)[0] == "hardware"
    assert set(ROW_COLUMNS) | {"precision_requested"} <= set(frame.columns)
    assert list(frame["hardware"]) == FIVE.split(",")
    assert list(frame.columns) == list(COLUMNS)


@pytest.mark.parametrize("hw", ["a100", "alveo-u250", "xeon-8480", "edge-tpu"])
def test_each_row_is_the_separate_simulation_of_that_device(int8_runs, hw):
    row = next(r.row for r in int8_runs if r.hardware == hw)
    alone = accelsim.simulate("resnet50", hw=hw, precision="int8", batch=4).summary
    for key in ROW_COLUMNS:
        if key == "error":
            assert _missing(row[key])
        elif isinstance(alone[key], float):
            assert row[key] == pytest.approx(alone[key], rel=1e-12), key
        else:
            assert row[key] == alone[key], key


def test_a_fallback_row_runs_a_format_the_device_has_and_says_so(int8_runs):
    tpu = next(r.row for r in int8_runs if r.hardware == "tpu-v3")
    # tests/reference/hardware_specs.csv: TPU v3 publishes bf16 matrix TFLOPS, no int8
    assert tpu["precision_requested"] == "int8" and tpu["precision"] == "bf16"
    assert tpu["precision"] in load_profile("tpu-v3").supported_precisions()
    assert tpu["notes"].startswith("ran bf16: tpu-v3 cannot run int8 (it runs bf16)")
    alone = accelsim.simulate("resnet50", hw="tpu-v3", precision="bf16", batch=4)
    assert tpu["throughput_samples_per_s"] == pytest.approx(alone.throughput_samples_per_s)
    # a device that runs what was asked for has no fallback note
    a100 = next(r.row for r in int8_runs if r.hardware == "a100")
    assert a100["precision"] == "int8" and "ran " not in (a100["notes"] or "")


def test_fp16_on_the_edge_tpu_falls_back_to_int8():
    frame = accelsim.compare("resnet50", hw=["a100", "edge-tpu"], precision="fp16")
    edge = frame.set_index("hardware").loc["edge-tpu"]
    assert (edge["precision_requested"], edge["precision"]) == ("fp16", "int8")
    assert "ran int8: edge-tpu cannot run fp16 (it runs int8)" in edge["notes"]


def test_without_fallback_the_device_is_left_out_with_the_reason():
    frame = compare("resnet50", "a100,edge-tpu", fallback=False, precision="fp16")
    edge = frame.set_index("hardware").loc["edge-tpu"]
    assert "fp16" in edge["error"] and "int8" in edge["error"]
    assert all(_missing(edge[k]) for k in FIGURES_ONLY)
    assert not _missing(frame.set_index("hardware").loc["a100", "throughput_samples_per_s"])


def test_a_device_that_does_not_fit_is_a_row_without_figures():
    frame = compare("llama2_7b", "t4,h100", batch=8)
    t4 = frame.set_index("hardware").loc["t4"]
    assert not t4["fits"] and _missing(t4["error"])
    assert t4["required_bytes"] > t4["capacity_bytes"]
    assert all(_missing(t4[k]) for k in FIGURES_ONLY)


def test_unknown_hardware_fails_the_whole_comparison():
    with pytest.raises(AccelsimError, match="unknown hardware.*a10O"):
        compare("resnet50", "a100,a10O")
    with pytest.raises(AccelsimError, match="more than once"):
        compare("resnet50", ["a100", "a100"])


def test_an_error_every_device_raises_alike_is_the_inputs():
    with pytest.raises(AccelsimError, match="devices"):
        compare("resnet50", "a100,t4", devices=2)  # a train/serve knob on an infer run
    # a device-specific error is a left-out row: dataflow applies to systolic arrays only
    frame = compare("resnet50", "a100,tpu-v3", dataflow="os", precision="bf16").set_index(
        "hardware")
    assert not _missing(frame.loc["a100", "error"]) and _missing(frame.loc["tpu-v3", "error"])


def _reference(device, field):
    with open(REFERENCE, newline="") as fh:
        return next(float(r["value"]) for r in csv.DictReader(fh)
                    if r["name"] == device and r["field"] == field)


def test_roof_of_the_a100_is_the_datasheets(int8_runs):
    roof = next(r.roof for r in int8_runs if r.hardware == "a100")
    peak = _reference("NVIDIA A100 SXM4 80GB", "int8_tops_dense") * 1e12
    bandwidth = _reference("NVIDIA A100 SXM4 80GB", "memory_bandwidth") * 1e9
    assert roof["peak_flops_per_s"] == pytest.approx(peak)
    assert roof["bandwidth_bytes_per_s"] == pytest.approx(bandwidth)
    assert roof["ridge_flops_per_byte"] == pytest.approx(peak / bandwidth)


@pytest.mark.parametrize("workload,hw,knobs", [
    ("resnet50", FIVE, {"precision": "int8", "batch": 4}),
    ("resnet50", "a100,xeon-8480,orin-dla",
     {"precision": "int8", "batch": 8, "software": "compiled"}),
    ("resnet50", "alveo-u250,xeon-8480,jetson-orin", {"precision": "fp16", "batch": 32}),
    ("resnet18", "a100,jetson-orin", {"precision": "int8", "batch": 2, "mode": "train",
                                      "steps": 1}),
])
def test_roofline_points_stay_under_the_roof(workload, hw, knobs):
    """Every device model charges time_s >= max(flops / peak, dram_bytes / bandwidth), so a
    kernel's point is under min(peak, bandwidth x intensity) up to float rounding (1e-9). The
    one place the model may differ: an NPU runs fused elementwise ops in its post-processing
    unit at no compute time, so a kernel with ops fused into it may exceed the compute roof by
    at most fused_flops / time_s. None of these kernels needs that allowance (where an NPU's
    matmuls run on its vector path, fused work costs time there: jetson-orin at fp16 once
    exceeded the roof by 0.6%; `accelsim.devices.invariants` checks it on every estimate)."""
    layers, roofs, not_drawn = roofline_inputs(compare_runs(workload, hw, **knobs))
    assert not not_drawn and len(roofs) == len(hw.split(","))
    for roof in roofs.to_dict(orient="records"):
        pts, skipped = roofline_points(layers[roof["hardware"]])
        assert len(pts) > 10
        memory_roof = roof["bandwidth_bytes_per_s"] * pts["intensity_flops_per_byte"]
        compute_roof = roof["peak_flops_per_s"] + pts["fused_flops"] / pts["time_s"]
        ceiling = np.minimum(memory_roof, compute_roof) * (1 + 1e-9)
        assert (pts["achieved_flops_per_s"] <= ceiling).all(), roof["hardware"]
        plain = np.minimum(memory_roof, roof["peak_flops_per_s"]) * (1 + 1e-9)
        above = (pts["achieved_flops_per_s"] > plain).any()
        assert not above, roof["hardware"]
        # folding fused rows into their producer loses no FLOPs
        raw = layers[roof["hardware"]]
        drawn_or_not = raw[raw.get("unit", pd.Series("", index=raw.index)) != "host"]
        no_bytes = skipped.get("all on chip, no off-chip bytes", 0)
        if no_bytes == 0:
            assert pts["flops"].sum() == pytest.approx(drawn_or_not["flops"].sum(), rel=1e-9)


def test_roof_is_the_minimum_of_its_two_ceilings():
    roof = {"peak_flops_per_s": 100.0, "bandwidth_bytes_per_s": 10.0}
    assert list(roof_flops_per_s(roof, [1.0, 10.0, 1000.0])) == [10.0, 100.0, 100.0]


def test_the_bar_figure_marks_devices_without_bars_and_picks_log_axes():
    frame = compare("llama2_7b", "a100,t4,edge-tpu,h100", batch=8, precision="fp32",
                    fallback=False)
    fig = compare_figure(frame)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("does not fit" in t for t in texts) and any("left out" in t for t in texts)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any("NVIDIA T4" in t for t in labels)
    for ax, col in zip(fig.axes[:4], ("throughput_samples_per_s", "latency_s",
                                      "energy_j_per_sample", "samples_per_j"), strict=True):
        vals = frame[col].dropna().astype(float)
        assert (ax.get_xscale() == "log") == bool(vals.max() / vals.min() > 100), col


@pytest.mark.slow
def test_cli_writes_table_csv_json_and_figures(capsys, tmp_path):
    files = {ext: tmp_path / f"out{ext}" for ext in FIGURES}
    args = ["compare", "resnet50", "--hw", FIVE, "--precision", "int8", "--batch", "4",
            "--csv", str(tmp_path / "t.csv")]
    code, out, err = run_cli(capsys, *args, "--plot", str(files[".png"]),
                             "--roofline", str(files[".svg"]))
    assert code == 0, err
    head = out.splitlines()[:2]  # a long header's unit on its second line
    assert "throughput" in head[0] and "samples/s" in head[1] and "bf16 (asked int8)" in out
    assert "tpu-v3: ran bf16" in out
    code, out, err = run_cli(capsys, *args, "--json", "--plot", str(files[".pdf"]))
    assert code == 0, err
    rows = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    table = pd.read_csv(tmp_path / "t.csv")
    assert [r["hardware"] for r in rows] == list(table["hardware"]) == FIVE.split(",")
    assert rows[0]["notes"] is None and set(METRICS) <= set(rows[0])
    for ext, path in files.items():
        data = path.read_bytes()
        assert data.startswith(FIGURES[ext]) and len(data) > 20_000, ext
        if ext == ".svg":
            assert b"<svg" in data and b"ridge point" in data


@pytest.mark.parametrize("args,needle", [
    (("--hw", "a100,nosuch"), "unknown hardware"),
    (("--hw", "a100", "--plot", "x.gif"), ".png, .svg, .pdf"),
    (("--hw", "a100", "--roofline", "/no/such/dir/r.png"), "no such folder"),
    (("--hw", "a100,t4", "--steps", "3"), "steps"),
    (("--hw", ","), "at least one"),
])
def test_cli_bad_input_is_one_line(capsys, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "compare", "resnet50", *args)
    assert code == 2 and needle in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_cli_left_out_device_says_why(capsys):
    code, out, _ = run_cli(capsys, "compare", "resnet50", "--hw", "a100,edge-tpu",
                           "--precision", "fp16", "--no-fallback")
    assert code == 0
    assert "left out" in out and "edge-tpu: left out: edge-tpu cannot run fp16" in out
