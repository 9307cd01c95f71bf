"""Bad input never hangs or crashes: counts have ceilings, event budgets are checked before a
run, and every data file is read through one reader that refuses what is not a small UTF-8
regular file."""

import os
import subprocess
import sys

import pytest

import accelsim
from accelsim.errors import AccelsimError
from accelsim.profiles.systems import load_system
from accelsim.sim.config import TrainConfig, resolve_config
from accelsim.workload.scenario import resolve_workload
from tests.helpers.cli import one_line_error


@pytest.mark.parametrize("args,needle", [
    (("resnet50", "--hw", "a100", "--batch", "1000000000000"), "'batch'"),
    (("resnet50", "--hw", "a100", "--batch", "99999999999999999999"), "'batch'"),
    (("resnet50", "--hw", "t4", "--mode", "serve", "--rate", "10", "--max-batch", "0"),
     "'max_batch'"),
    (("resnet50", "--hw", "t4", "--mode", "serve", "--rate", "5e-324"), "'rate'"),
    (("resnet50", "--hw", "t4", "--mode", "serve", "--rate", "nan"), "finite"),
    (("resnet50", "--hw", "t4", "--mode", "serve", "--rate", "inf"), "finite"),
    (("resnet50", "--hw", "t4", "--mode", "serve", "--rate", "10", "--requests",
      "1000000000000"), "'requests'"),
    (("resnet50", "--hw", "dgx-a100", "--mode", "serve", "--rate", "10", "--devices", "64"),
     "only 8"),
    (("resnet50-train", "--hw", "dgx-a100", "--steps", "1000000000000"), "'steps'"),
    (("resnet50-train", "--hw", "dgx-a100", "--epochs", "1000000000000"), "'epochs'"),
    (("resnet50-train", "--hw", "dgx-a100", "--io-threads", "99999999999999999999"),
     "'io_threads'"),
    (("resnet50", "--hw", "a100", "--image-size", "99999999999"), "'image_size'"),
])
def test_out_of_range_counts_are_one_line(capsys, args, needle):
    assert needle in one_line_error(capsys, "simulate", *args)


def test_event_estimate_is_close_to_the_real_count():
    sc = resolve_workload("resnet50-train")
    plan = resolve_config(TrainConfig(sc, load_system("dgx-a100"), steps=12, devices=4))
    real = len(accelsim.simulate("resnet50-train", hw="dgx-a100", steps=12, devices=4).events)
    assert plan.estimated_events == pytest.approx(real, rel=0.1)


def test_runs_over_the_event_budget_are_refused_before_they_start():
    with pytest.raises(AccelsimError, match="max_events"):
        accelsim.simulate("resnet50-train", hw="dgx-a100", steps=1000, max_events=10_000)
    with pytest.raises(AccelsimError, match="max_events"):
        accelsim.simulate("resnet50", hw="t4", mode="serve", rate=10.0, requests=5000,
                          max_events=1000)
    # ... and raising the budget runs them.
    r = accelsim.simulate("resnet50-train", hw="dgx-a100", steps=20, max_events=10_000)
    assert r.record["steps"] == 20


@pytest.mark.parametrize("kind", ["directory", "not-utf8", "long-name", "empty-binary"])
def test_unreadable_files_are_one_line(capsys, tmp_path, kind):
    if kind == "directory":
        path = tmp_path / "x.toml"
        path.mkdir()
    elif kind == "not-utf8":
        path = tmp_path / "x.toml"
        path.write_bytes(b"\xff\xfe model = 1")
    elif kind == "long-name":
        path = tmp_path / ("a" * 300 + ".toml")
    else:
        path = tmp_path / "x.toml"
        path.write_bytes(b"\x00" * 10)
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert "x.toml" in err or "aaaa" in err
    err = one_line_error(capsys, "simulate", "resnet50", "--hw", str(path))
    assert "x.toml" in err or "aaaa" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "w.toml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "accelsim.cli", "simulate", str(fifo), "--hw",
                           "a100"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr


def test_a_depthwise_topology_row_with_too_many_channels_is_refused(capsys, tmp_path):
    # SCALE-Sim splits a depthwise ("DP") row into one layer per channel: 16.7 M channels
    # (any count's ceiling) would build 16.7 M layers (minutes, tens of GB).
    path = tmp_path / "dp.csv"
    path.write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                    "Channels, Num Filter, Strides,\nConvDP1, 4, 4, 3, 3, 10001, 1, 1,\n")
    err = one_line_error(capsys, "describe", str(path))
    assert "ConvDP1" in err and "10,000" in err
