"""Bad input on the surfaces added after the first hardening round (issue 24): measurement
CSVs, SCALE-Sim reports, sweep stores and grids, compare, JSON and CSV output, output folders,
Dask addresses and lost workers, numbers, knob values (imported models:
test_bad_input_models.py; input files: tests/unit/test_input_files.py). Each case here once
crashed, hung, wrote where it was not asked or answered with nonsense; now it is one clean
line (exit 2) or a sane answer."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from accelsim.devices.systolic.scalesim.config import cfg_text
from accelsim.explore.grid import make_grid
from accelsim.results.csvtext import csv_text
from accelsim.results.jsontext import json_text
from tests.helpers.cli import one_line_error, run_cli
from tests.helpers.paths import ROOT

EXAMPLE_CSV = ROOT / "workloads" / "validate-example.csv"


def strict_json(text: str) -> object:
    """Parse as a JSON parser other than Python's would: NaN and Infinity are errors."""
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


# --- exit codes and JSON --------------------------------------------------------------------


def rejected_rows_csv(tmp_path: Path) -> Path:
    lines = EXAMPLE_CSV.read_text().splitlines()
    header = lines[0].split(",")
    model = header.index("sim_model")
    rows = []
    for line in lines[1:3]:
        cells = line.split(",")
        cells[model] = "no_such_model"
        rows.append(",".join(cells))
    path = tmp_path / "bad.csv"
    path.write_text("\n".join([lines[0], *rows]) + "\n")
    return path


def test_validate_with_every_row_rejected_exits_2(capsys, tmp_path):
    # exited 0, and its --json printed NaN for the median and worst error
    path = rejected_rows_csv(tmp_path)
    err = one_line_error(capsys, "validate", str(path), "--json")
    assert "none of its 2 rows could be predicted" in err and "no_such_model" in err


def test_compare_with_every_device_left_out_exits_2(capsys):
    # exited 0 with all-null rows (sweep refused the same case)
    err = one_line_error(capsys, "compare", "resnet18", "--hw", "t4,a100", "--precision",
                         "fp4", "--no-fallback", "--json")
    assert "every one of the 2 devices was left out" in err


def test_json_never_holds_nan_or_infinity():
    text = json_text({"a": float("inf"), "b": [1.0, float("nan")], "c": np.float64("-inf"),
                      "d": np.int64(3)})
    assert strict_json(text) == {"a": None, "b": [1.0, None], "c": None, "d": 3,
                                 "not_finite": ["a", "b[1]", "c"]}


def test_a_request_arriving_at_1e308_s_is_refused(capsys, tmp_path):
    # energy per token came out as Infinity: not JSON
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n1e308,20,3\n")
    err = one_line_error(capsys, "simulate", "llama2_7b", "--hw", "a100", "--mode", "serve",
                         "--requests-file", str(trace), "--json")
    assert "line 3 arrival_s" in err and str(trace) in err


# --- CSV output -----------------------------------------------------------------------------


def test_a_name_beginning_with_equals_is_text_in_compare_csv(capsys, tmp_path):
    profile = tmp_path / "=1+2.toml"
    profile.write_text((ROOT / "hw_profiles" / "devices" / "a100.toml").read_text())
    out = tmp_path / "c.csv"
    code, _, err = run_cli(capsys, "compare", "resnet18", "--hw", f"t4,{profile}", "--csv",
                           str(out))
    assert code == 0, err
    cells = [line.split(",")[0] for line in out.read_text().splitlines()]
    assert cells[2] == f"{profile}"  # a path: begins with /
    assert not any(c.startswith(("=", "+", "-", "@")) for line in out.read_text().splitlines()
                   for c in line.split(","))


def test_csv_text_quotes_formula_cells_and_leaves_numbers():
    import pandas as pd

    frame = pd.DataFrame({"name": ["=HYPERLINK(1)", "+x", "-y", "@z", "ok"],
                          "value": [-5.0, 1.0, 2.0, 3.0, 4.0]})
    lines = csv_text(frame).splitlines()
    assert lines[1:] == ["'=HYPERLINK(1),-5.0", "'+x,1.0", "'-y,2.0", "'@z,3.0", "ok,4.0"]


def test_a_sweep_row_named_with_equals_is_text_in_sweep_csv(capsys, tmp_path):
    profile = tmp_path / "=cmd.toml"
    profile.write_text((ROOT / "hw_profiles" / "devices" / "t4.toml").read_text())
    out = tmp_path / "s.csv"
    code, _, err = run_cli(capsys, "sweep", "mlp", "--hw", str(profile), "--batch", "1",
                           "--csv", str(out), "--quiet")
    assert code == 0, err
    text = out.read_text()
    assert not any(c.startswith("=") for line in text.splitlines() for c in line.split(","))


# --- output folders and files ---------------------------------------------------------------


def test_validate_fit_out_under_a_file_is_one_line(capsys, tmp_path):
    # was a NotADirectoryError traceback
    (tmp_path / "file").write_text("x")
    err = one_line_error(capsys, "validate", str(EXAMPLE_CSV), "--fit", "--out",
                         str(tmp_path / "file" / "sub"))
    assert "validate --out" in err and "cannot create the folder" in err


@pytest.mark.parametrize("command", [("validate", str(EXAMPLE_CSV), "--fit"),
                                     ("calibrate", "--budget", "tiny")])
def test_an_empty_out_is_refused_not_the_current_folder(capsys, tmp_path, monkeypatch,
                                                        command):
    # calibrate --out "" calibrated into the current folder
    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, *command, "--out", "")
    assert "--out ''" in err
    assert list(tmp_path.iterdir()) == []


def test_validate_fit_does_not_write_through_a_symlink(capsys, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    code, _, err = run_cli(capsys, "validate", str(EXAMPLE_CSV), "--fit", "--out", str(out),
                           "--json")
    assert code == 0, err
    written = sorted(out.iterdir())
    assert written
    for p in written:
        p.unlink()
        p.symlink_to(victim)
    code, _, err = run_cli(capsys, "validate", str(EXAMPLE_CSV), "--fit", "--out", str(out),
                           "--json")
    assert code == 0, err
    assert victim.read_text() == "keep me"
    assert all(not p.is_symlink() and p.is_file() for p in written)


def test_scalesim_report_does_not_write_through_a_symlink(capsys, tmp_path):
    cfg = tmp_path / "a.cfg"
    cfg.write_text(cfg_text(16, 16, 2, 2, 2, 4, "ws"))
    topo = tmp_path / "t.csv"
    topo.write_text("Layer, M, N, K,\nfc1, 64, 64, 64,\n")
    rep = tmp_path / "rep"
    rep.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (rep / "COMPUTE_REPORT.csv").symlink_to(victim)
    code, _, err = run_cli(capsys, "simulate", str(topo), "--hw", str(cfg), "--json",
                           "--scalesim-report", str(rep))
    assert code == 0, err
    assert victim.read_text() == "keep me"
    report = rep / "COMPUTE_REPORT.csv"
    assert not report.is_symlink() and report.read_text().startswith("LayerID")
    (tmp_path / "file").write_text("x")
    err = one_line_error(capsys, "simulate", str(topo), "--hw", str(cfg), "--scalesim-report",
                         str(tmp_path / "file" / "rep"))
    assert "--scalesim-report" in err


# --- the sweep store ------------------------------------------------------------------------


@pytest.mark.parametrize("stored", ["null", "negative"])
def test_a_damaged_store_row_is_run_again_not_printed(capsys, tmp_path, stored):
    store = tmp_path / "s.sqlite"
    args = ("sweep", "mlp", "--hw", "t4", "--batch", "1,2", "--resume", str(store), "--json",
            "--quiet")
    code, first, err = run_cli(capsys, *args)
    assert code == 0, err
    key = make_grid("mlp", "t4", {"batch": [1, 2]}).points()[0].key
    with sqlite3.connect(store) as db:
        (row,) = db.execute("SELECT row FROM points WHERE key = ?", (key,)).fetchone()
        bad = "null" if stored == "null" else json.dumps(
            {**json.loads(row), "throughput_samples_per_s": -5.0})
        db.execute("UPDATE points SET row = ? WHERE key = ?", (bad, key))
    code, again, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "1 stored points" in err and "were damaged" in err
    assert strict_json(again) == strict_json(first)  # the point was run again
    with sqlite3.connect(store) as db:
        (row,) = db.execute("SELECT row FROM points WHERE key = ?", (key,)).fetchone()
    assert json.loads(row)["throughput_samples_per_s"] > 0  # and its row replaced


# --- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1_0", "１０", "١٠", "1e3"])
def test_sweep_takes_ascii_whole_numbers_only(capsys, value):
    # each was taken as 10 (or 1000) where simulate's options have one rule
    err = one_line_error(capsys, "sweep", "mlp", "--hw", "t4", "--batch", f"1,{value}")
    assert "knob 'batch'" in err and "not a whole number" in err


def test_a_5000_digit_value_is_not_echoed_whole(capsys):
    err = one_line_error(capsys, "sweep", "mlp", "--hw", "t4", "--batch", "9" * 5000)
    assert len(err) < 300


# --- Dask -----------------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["notanaddress", "tcp://", "tcp://host:notaport",
                                     "foo://x:1", "tcp://host:99999"])
def test_a_malformed_scheduler_address_fails_at_once_in_one_line(capsys, address):
    # printed its error, then stalled 20 s and printed a traceback at exit
    start = time.monotonic()
    err = one_line_error(capsys, "sweep", "mlp", "--hw", "t4", "--batch", "1,2",
                         "--scheduler", address, "--quiet")
    assert "Dask scheduler" in err and "tcp://HOST:8786" in err
    assert time.monotonic() - start < 15


_WORKER_STARTED = threading.Event()


def _slow_points(*args: object) -> object:
    """run_points that takes 30 s: the worker is closed meanwhile (picklable by name)."""
    _WORKER_STARTED.set()
    time.sleep(30)
    return []


def test_a_sweep_whose_dask_workers_are_all_lost_finishes_with_failed_rows(monkeypatch):
    # waited silently for ever; then stopped with an error, losing the rows it had
    distributed = pytest.importorskip("distributed")
    from accelsim.explore import dask_run
    from accelsim.explore import run as sweep_run

    monkeypatch.setattr(dask_run, "DASK_LOST_S", 2.0)
    monkeypatch.setattr(dask_run, "DASK_POLL_S", 0.2)
    monkeypatch.setattr(sweep_run, "run_points", _slow_points)
    _WORKER_STARTED.clear()
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                  host="127.0.0.1", protocol="tcp",
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        def lose_the_worker() -> None:
            _WORKER_STARTED.wait(20)
            for w in list(cluster.workers.values()):
                client.sync(w.close, executor_wait=False)  # its task never comes back

        threading.Thread(target=lose_the_worker, daemon=True).start()
        start = time.monotonic()
        df = sweep_run.sweep("mlp", "t4", batch=[1, 2], scheduler=client)
        assert time.monotonic() - start < 25
    assert df["error"].str.contains("every Dask worker of .* was lost").all()
    assert df.attrs["points_unfinished"] == 2


@pytest.mark.parametrize("args", [
    ("collective", "--hw", "dgx-a100", "--sizes", "8B:1_0MB"),
    ("collective", "--hw", "dgx-a100", "--sizes", "８B:8MB"),
    ("collective", "--hw", "dgx-a100", "--sizes", "1e3B"),
    ("simulate", "resnet18", "--hw", "a100", "--batch", "1_0"),
    ("simulate", "resnet18", "--hw", "a100", "--batch", "１０"),
    ("simulate", "bert_base", "--hw", "a100", "--seq-len", "١٢٨"),
    ("sweep", "mlp", "--hw", "t4", "--set", "batch=1,1_0"),
])
def test_every_command_takes_numbers_by_one_rule(capsys, args):
    err = one_line_error(capsys, *args)
    assert "not a" in err


def test_validate_takes_ascii_numbers_only(capsys, tmp_path):
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(EXAMPLE_CSV.read_text())))[:2]
    rows[0]["sim_batch"] = "2_56"  # int() took it as 256
    path = tmp_path / "m.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = run_cli(capsys, "validate", str(path), "--json")
    assert code == 0, err
    reasons = [r["reason"] for r in strict_json(out)["not_expressed"]]
    assert any("sim_batch '2_56' is not a whole number" in r for r in reasons), reasons


# --- nonsense accepted ----------------------------------------------------------------------


@pytest.mark.parametrize("args,says", [
    (("sweep", "mlp", "--hw", "t4,t4", "--batch", "1"), "'t4' is listed twice"),  # ran twice
    (("sweep", "mlp", "--hw", "t4", "--batch", "1,2,1"), "1 is listed twice"),
    (("simulate", "llama2_7b", "--hw", "a100", "--mode", "serve", "--slo-ttft-ms", "0"),
     "slo_ttft_ms"),  # a target no request meets: goodput 0
    (("simulate", "llama2_7b", "--hw", "a100", "--mode", "serve", "--slo-tpot-ms", "0"),
     "slo_tpot_ms"),
    (("simulate", "llama2_7b", "--hw", "a100", "--overlap-tp", "--tp", "1"),
     "overlap_tp' with tp 1"),
])
def test_nonsense_knob_values_are_refused(capsys, args, says):
    assert says in one_line_error(capsys, *args)


def test_an_unused_scenario_dataset_is_still_checked(capsys, tmp_path):
    # a device run reads no data: '../../../etc/passwd' was accepted unread
    path = tmp_path / "s.toml"
    path.write_text((ROOT / "workloads" / "resnet50-infer.toml").read_text().replace(
        'dataset = "imagenet-raw"', 'dataset = "../../../etc/passwd"'))
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert "data.dataset" in err and "not a built-in dataset" in err


def test_an_image_of_a_million_pixels_a_side_is_refused(capsys, tmp_path):
    # was simulated: 6,144 TB of activations, "does not fit"
    path = tmp_path / "s.toml"
    path.write_text((ROOT / "workloads" / "resnet50-infer.toml").read_text().replace(
        "image_size = 224", "image_size = 1000000"))
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert "input.image_size" in err and "65,536" in err


def test_an_upper_case_host_cpu_is_refused_not_replaced(capsys, tmp_path):
    # an unknown name ran on the stand-in host without a word
    path = tmp_path / "sys.toml"
    path.write_text((ROOT / "hw_profiles" / "systems" / "dgx-a100.toml").read_text().replace(
        'cpu = "epyc-7763"', 'cpu = "EPYC-7763"'))
    err = one_line_error(capsys, "simulate", "resnet50-train", "--hw", str(path), "--steps", "5")
    assert "host.cpu" in err and "EPYC-7763" in err


def test_int8_training_says_what_it_costs(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "a100", "--mode", "train",
                             "--precision", "int8", "--steps", "5", "--json")
    assert code == 0, err
    assert any(n.startswith("training at int8") for n in strict_json(out)["notes"])


def test_a_sweep_value_outside_its_knobs_range_fails_before_running(capsys):
    # batch -1 ran as a failed point with batch -1 in the JSON
    err = one_line_error(capsys, "sweep", "mlp", "--hw", "t4", "--batch", "-1,2", "--json")
    assert "knob 'batch' = -1: must be at least 1" in err


@pytest.mark.parametrize("value", ["1e308", "5e-324"])  # 5e-324: predicted / measured overflowed
def test_a_measured_value_of_1e308_is_not_a_measurement(capsys, tmp_path, value):
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(EXAMPLE_CSV.read_text())))[:2]
    rows[0]["value"] = value
    path = tmp_path / "m.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = run_cli(capsys, "validate", str(path), "--json")
    assert code == 0, err
    assert any("must be a positive number from" in r["reason"]
               for r in strict_json(out)["not_expressed"])
