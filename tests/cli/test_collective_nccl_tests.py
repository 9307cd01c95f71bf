"""`accelsim collective` in nccl-tests' format: its flags, its table against a real nccl-tests
output (tests/fixtures/nccl_tests_all_reduce_gb200_nvl72.txt), and the one parser both go
through."""

from __future__ import annotations

import json

import pytest

from accelsim.errors import AccelsimError
from accelsim.interconnect.nccl_tests import (
    NCCL_COLUMNS,
    nccl_buffer,
    nccl_sizes,
    parse_nccl_tests,
)
from tests.helpers.cli import one_line_error, run_cli
from tests.helpers.paths import ROOT

REAL = ROOT / "tests" / "fixtures" / "nccl_tests_all_reduce_gb200_nvl72.txt"


def _header(text: str) -> list[str]:
    """The column-name line of an nccl-tests table, split."""
    return next(line.split() for line in text.splitlines() if "#wrong" in line)


def test_real_nccl_tests_output_parses() -> None:
    table = parse_nccl_tests(REAL.read_text())
    assert list(table.rows.columns) == NCCL_COLUMNS
    assert len(table.rows) == 5
    first = table.rows.iloc[0]
    assert (first["size_bytes"], first["count"], first["type"], first["redop"],
            first["root"]) == (536870912, 134217728, "float", "sum", -1)
    assert first["time_us"] == pytest.approx(1806.7)
    assert first["in_place_busbw_gb_s"] == pytest.approx(576.74)
    assert table.avg_bus_bandwidth_gb_s == pytest.approx(745.53)
    # nccl-tests' footer is the mean of both bus bandwidths of every row
    both = table.rows[["busbw_gb_s", "in_place_busbw_gb_s"]].to_numpy().mean()
    assert both == pytest.approx(table.avg_bus_bandwidth_gb_s, abs=0.01)


def test_accelsim_table_has_nccl_tests_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "collective", "--hw", "dgx-h100", "--nccl-tests",
                             "-b", "512M", "-e", "8G", "-f", "2", "-g", "8")
    assert code == 0, err
    real = REAL.read_text()
    assert _header(out) == _header(real)
    units = [line.split() for text in (out, real) for line in text.splitlines()
             if "(elements)" in line]
    assert units[0] == units[1]
    ours, theirs = parse_nccl_tests(out), parse_nccl_tests(real)
    assert ours.rows.shape == theirs.rows.shape
    assert list(ours.rows["size_bytes"]) == list(theirs.rows["size_bytes"])
    assert list(ours.rows["count"]) == list(theirs.rows["count"])
    assert ours.rows["wrong"].isna().all()  # not validated: N/A, as nccl-tests -c 0
    row_width = {len(line) for line in out.splitlines() if not line.startswith("#")}
    assert row_width == {len(real.splitlines()[6])}
    both = ours.rows[["busbw_gb_s", "in_place_busbw_gb_s"]].to_numpy().mean()
    assert ours.avg_bus_bandwidth_gb_s == pytest.approx(both, rel=1e-3)
    assert "# Avg bus bandwidth    : " in out and "# Out of bounds values : 0 OK" in out


def test_nccl_table_matches_own_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The same model behind both outputs: bus bandwidths agree at two decimals."""
    args = ("collective", "--hw", "dgx-a100", "--op", "reducescatter", "-b", "1M", "-e",
            "64M", "-f", "4")
    _, own, _ = run_cli(capsys, *args, "--json")
    _, out, _ = run_cli(capsys, *args, "--nccl-tests", "-d", "bfloat16", "-o", "max")
    rows = json.loads(own)["rows"]
    table = parse_nccl_tests(out).rows
    assert list(table["size_bytes"]) == [r["size_bytes"] for r in rows]
    assert list(table["busbw_gb_s"]) == [round(r["bus_bandwidth_gb_s"], 2) for r in rows]
    assert set(table["type"]) == {"bfloat16"} and set(table["redop"]) == {"max"}
    assert list(table["count"]) == [r["size_bytes"] // 2 // 8 for r in rows]


def test_nccl_sizes_and_counts() -> None:
    assert nccl_sizes(8, 128, step_factor=2) == [8, 16, 32, 64, 128]
    assert nccl_sizes(1, 3, step_bytes=1) == [1, 2, 3]
    assert nccl_sizes() == [32 * 2**20]  # nccl-tests' defaults: 32M to 32M
    assert nccl_sizes(8, 24, step_factor=1, step_bytes=8) == [8, 16, 24]  # -f 1: -i steps
    assert nccl_buffer("allreduce", 10, "float", 8).size_bytes == 8
    # all-gather: per-rank count, 16-byte aligned
    b = nccl_buffer("allgather", 1000, "float", 8)
    assert (b.count, b.size_bytes) == (28, 28 * 8 * 4)
    b = nccl_buffer("alltoall", 100, "half", 8)
    assert (b.count, b.size_bytes) == (6, 96)
    with pytest.raises(AccelsimError):
        nccl_sizes(1, 2**40, step_bytes=1)


def test_nccl_flags_refused_with_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, "collective", "--hw", "dgx-h100", "--sizes", "8B:1KB",
                         "-b", "8")
    assert "one way" in err
    err = one_line_error(capsys, "collective", "--hw", "dgx-h100", "--nccl-tests", "--json")
    assert "choose one" in err


def test_parser_reads_older_formats_and_mpi_prefixes() -> None:
    old = ("#       size         count    type   redop     time   algbw   busbw  error     time"
           "   algbw   busbw  error\n"
           "        1024           256   float     sum    20.24    0.05    0.05  2e-07    20.13"
           "    0.05    0.05  2e-07\n")
    bcast = "[1,0]<stdout>:           8             2   float       0    45.82    0.00    0.00" \
            "    N/A    38.17    0.00    0.00    N/A\n# Avg bus bandwidth    : 0.5 \n"
    a, b = parse_nccl_tests(old).rows.iloc[0], parse_nccl_tests(bcast)
    assert (a["redop"], a["root"], a["wrong"]) == ("sum", None, 2e-07)
    assert (b.rows.iloc[0]["root"], b.rows.iloc[0]["redop"]) == (0, None)
    assert b.avg_bus_bandwidth_gb_s == 0.5
    with pytest.raises(AccelsimError):
        parse_nccl_tests("no table here")


def test_measured_log_is_compared_at_its_sizes(capsys: pytest.CaptureFixture[str],
                                               tmp_path) -> None:
    code, out, err = run_cli(capsys, "collective", "--hw", "dgx-h100", "--measured", str(REAL),
                             "--json")
    assert code == 0, err
    got = json.loads(out)
    real = parse_nccl_tests(REAL.read_text()).rows
    assert [r["size_bytes"] for r in got["rows"]] == list(real["size_bytes"])
    assert [r["measured_busbw_gb_s"] for r in got["rows"]] == list(real["busbw_gb_s"])
    assert "72 ranks" in got["note"]  # the log's rank 71: an NVL72 rack, not 8 H100s
    # accelsim's own nccl-tests table, read back as a measurement: no error beyond rounding
    _, own, _ = run_cli(capsys, "collective", "--hw", "dgx-a100", "--nccl-tests", "-b", "1M",
                        "-e", "1G", "-f", "8")
    log = tmp_path / "own.log"
    log.write_text(own)
    code, out, _ = run_cli(capsys, "collective", "--hw", "dgx-a100", "--measured", str(log))
    assert code == 0 and "median |busbw error| 0.0%" in out and "NB:" not in out
    err = one_line_error(capsys, "collective", "--hw", "dgx-a100", "--measured",
                         str(ROOT / "README.md"))
    assert "no nccl-tests rows" in err
