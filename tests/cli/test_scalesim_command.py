"""`accelsim scalesim -c CFG -t TOPOLOGY [-p OUTDIR] [-i conv|gemm]` (issue 23 item 7): SCALE-Sim's
entry point on the shipped sample files. References: SCALE-Sim's own rules, computed here from
the topology CSV (a layer's MACs: ofmap pixels x filters x window, the ofmap side
ceil((in - filter + stride) / stride) of its `topology_utils`; Overall Util = MACs / (Total
Cycles x R x C)), its report folder OUTDIR/run_name/ and its CSV dialect; and a 1 x 1
stride-1 conv is the GEMM M = H x W, N = filters, K = channels."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.helpers.cli import one_line_error, run_cli
from tests.helpers.paths import ROOT

CFG = ROOT / "workloads" / "scalesim" / "array_ws_16x16.cfg"
TOPOLOGY = ROOT / "workloads" / "scalesim" / "topology_conv.csv"
REPORTS = ("COMPUTE_REPORT", "BANDWIDTH_REPORT", "DETAILED_ACCESS_REPORT")


def read_report(path: Path) -> list[dict[str, str]]:
    """A SCALE-Sim report: ', ' between fields, a trailing comma on every line."""
    lines = path.read_text().splitlines()
    assert all(line.endswith(",") for line in lines)
    rows = [[c.strip() for c in line[:-1].split(", ")] for line in lines]
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def topology_layers() -> list[dict[str, int]]:
    with TOPOLOGY.open(newline="") as f:
        rows = [[c.strip() for c in r if c.strip()] for r in csv.reader(f)]
    keys = ("h", "w", "r", "s", "c", "f", "stride")
    return [dict(zip(keys, map(int, r[1:]), strict=True)) for r in rows[1:] if r]


def run(capsys, *args: str) -> list[Path]:
    code, out, err = run_cli(capsys, "scalesim", *args)
    assert code == 0, err
    return [Path(line) for line in out.splitlines()]


def test_the_reports_land_in_outdir_run_name_with_scalesims_util(capsys, tmp_path):
    paths = run(capsys, "-c", str(CFG), "-t", str(TOPOLOGY), "-p", str(tmp_path / "runs"))
    run_name = "accelsim"  # the sample .cfg's [general] run_name
    assert paths == [tmp_path / "runs" / run_name / f"{name}.csv" for name in REPORTS]
    compute = read_report(paths[0])
    layers = topology_layers()
    assert [int(r["LayerID"]) for r in compute] == list(range(len(layers)))
    for row, layer in zip(compute, layers, strict=True):
        st = layer["stride"]
        side_h = -(-(layer["h"] - layer["r"] + st) // st)  # ceil((H - R + stride) / stride)
        side_w = -(-(layer["w"] - layer["s"] + st) // st)
        macs = side_h * side_w * layer["f"] * layer["r"] * layer["s"] * layer["c"]
        total = int(row["Total Cycles"])
        assert total >= -(-macs // 256)  # no faster than every PE busy every cycle
        assert float(row["Overall Util %"]) == pytest.approx(100 * macs / (total * 16 * 16),
                                                             rel=1e-9)
    for name, path in zip(REPORTS[1:], paths[1:], strict=True):
        assert len(read_report(path)) == len(layers), name


def test_a_gemm_topology_with_i_gemm_gives_the_1x1_convs_row(capsys, tmp_path):
    conv = topology_layers()[1]  # conv2: 1 x 1, stride 1
    assert (conv["r"], conv["s"], conv["stride"]) == (1, 1, 1)
    gemm = tmp_path / "gemm.csv"
    gemm.write_text(f"Layer, M, N, K,\nconv2, {conv['h'] * conv['w']}, {conv['f']}, "
                    f"{conv['c']},\n")
    conv_paths = run(capsys, "-c", str(CFG), "-t", str(TOPOLOGY), "-p", str(tmp_path / "a"))
    gemm_paths = run(capsys, "-c", str(CFG), "-t", str(gemm), "-p", str(tmp_path / "b"),
                     "-i", "gemm")
    for a, b in zip(conv_paths, gemm_paths, strict=True):
        row = read_report(a)[1]
        row["LayerID"] = "0"
        assert read_report(b) == [row], a.name


def test_the_same_reports_as_simulate_scalesim_report(capsys, tmp_path):
    paths = run(capsys, "-c", str(CFG), "-t", str(TOPOLOGY), "-p", str(tmp_path))
    code, _, err = run_cli(capsys, "simulate", str(TOPOLOGY), "--hw", str(CFG), "--json",
                           "--scalesim-report", str(tmp_path / "sim"))
    assert code == 0, err
    for path in paths:
        assert path.read_bytes() == (tmp_path / "sim" / path.name).read_bytes()


def test_bad_input_is_one_line_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "out"
    err = one_line_error(capsys, "scalesim", "-c", str(CFG), "-t", str(TOPOLOGY), "-i", "gemm",
                         "-p", str(out))
    assert "conv form" in err
    calc = tmp_path / "calc.cfg"
    calc.write_text(CFG.read_text().replace("InterfaceBandwidth: USER",
                                            "InterfaceBandwidth: CALC"))
    err = one_line_error(capsys, "scalesim", "-c", str(calc), "-t", str(TOPOLOGY), "-p",
                         str(out))
    assert "CALC" in err
    unnamed = tmp_path / "unnamed.cfg"
    unnamed.write_text(CFG.read_text().replace("run_name = accelsim", ""))
    err = one_line_error(capsys, "scalesim", "-c", str(unnamed), "-t", str(TOPOLOGY), "-p",
                         str(out))
    assert "run_name" in err
    err = one_line_error(capsys, "scalesim", "-t", str(TOPOLOGY))
    assert "-c" in err
    assert not out.exists() or not any(out.rglob("*.csv"))
