"""One fallback rule (issue 23 item 6): `sweep` runs a point on a device that lacks the
precision asked for at the closest one, as `compare` does, and says so in its row;
`--no-fallback` (fallback=False) keeps the point failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.explore.compare import compare
from accelsim.explore.run import sweep
from tests.helpers.cli import run_cli


def test_sweep_falls_back_as_compare_does() -> None:
    df = sweep("resnet50", "t4,a100", batch=8, precision="bf16")
    t4, a100 = df.iloc[0], df.iloc[1]
    assert t4["error"] is None and t4["precision"] == "bf16"  # the knob as given
    assert t4["compute_precision"] == "fp16"
    assert t4["notes"].startswith("ran fp16: t4 cannot run bf16")
    assert a100["compute_precision"] == "bf16" and a100["error"] is None
    same = compare("resnet50", "t4", batch=8, precision="bf16").iloc[0]
    assert same["precision"] == "fp16"
    assert t4["throughput_samples_per_s"] == pytest.approx(same["throughput_samples_per_s"])
    assert same["notes"].split(";")[0] == t4["notes"].split(";")[0]  # one note, one wording


def test_no_fallback_keeps_the_error() -> None:
    df = sweep("resnet50", "t4", batch=8, precision="bf16", fallback=False)
    assert "cannot run bf16" in df.iloc[0]["error"]
    assert df.iloc[0]["throughput_samples_per_s"] is None


def test_cli_fallback_and_no_fallback(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    args = ("sweep", "resnet50", "--hw", "t4,a100", "--batch", "8", "--precision", "bf16",
            "-q", "--json")
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "1 of 2 points ran the closest precision" in err
    points = json.loads(out)["points"]
    assert points[0]["compute_precision"] == "fp16" and points[0]["error"] is None
    code, out, err = run_cli(capsys, *args, "--no-fallback")
    assert code == 0 and "1 of 2 points failed" in err
    assert "cannot run bf16" in json.loads(out)["points"][0]["error"]


def test_resume_store_keeps_the_rules_apart(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    sweep("resnet50", "t4", batch=8, precision="bf16", fallback=False, resume=store)
    again = sweep("resnet50", "t4", batch=8, precision="bf16", resume=store)
    assert again.attrs["points_run"] == 1 and again.iloc[0]["error"] is None
