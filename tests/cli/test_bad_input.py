"""Regressions found by fuzzing the command line (`benchmarks/fidelity/fuzz.py`): each input here
once crashed, hung or was answered with nonsense, and must now give one clean line (exit 2)
or a sane answer."""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from accelsim.cli import main
from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError
from accelsim.physical import BYTES
from accelsim.profiles.datasets import Dataset, load_dataset
from accelsim.sim.readplan import read_plan, sample_file_sizes_bytes
from tests.helpers.cli import one_line_error


def edited(tmp_path, folder, pattern, name, old, new, out_name=None):
    """A copy of a built-in file with the line matching `old` (a regex) replaced by `new`."""
    text = builtin_files(folder, pattern)[name].read_text()
    changed = re.sub(old, new, text, count=1, flags=re.MULTILINE)
    assert changed != text
    path = tmp_path / (out_name or f"{name}.toml")
    path.write_text(changed)
    return path


@pytest.mark.parametrize("folder,pattern,name,old,new,needle", [
    # 1e-10 GB was 0.1 B, rounded to a 0-byte memory
    ("hw_profiles", "devices/*.toml", "a100", r"^capacity_gb = .*", "capacity_gb = 1e-10",
     "offchip_memory.capacity_gb"),
    # scaled by 1e9, 1e308 overflowed to inf; 4.7e307 W of average power came out
    ("hw_profiles", "devices/*.toml", "a100", r"^tdp_w = .*", "tdp_w = 1e308", "power.tdp_w"),
    ("hw_profiles", "devices/*.toml", "t4", r"^bandwidth_gb_s = 320", "bandwidth_gb_s = 5e-324",
     "offchip_memory.bandwidth_gb_s"),
    ("hw_profiles", "devices/*.toml", "a100", r"^peak_tflops_bf16_dense = .*",
     "peak_tflops_bf16_dense = 1e300", "peak_tflops_bf16_dense"),
    # an integer past float range crashed math.isfinite (OverflowError)
    ("hw_profiles", "devices/*.toml", "a100", r"^sm_count = .*", "sm_count = " + "9" * 400,
     "compute.sm_count"),
    ("hw_profiles", "devices/*.toml", "a100", r"^sm_count = .*", "sm_count = 1000000000",
     "compute.sm_count"),
])
def test_physical_ranges_of_device_profiles(capsys, tmp_path, folder, pattern, name, old, new,
                                            needle):
    path = edited(tmp_path, folder, pattern, name, old, new)
    err = one_line_error(capsys, "simulate", "resnet18", "--hw", str(path), "--json")
    assert str(path) in err and needle in err
    assert "physical range" in err or "must be <=" in err or "larger than" in err


@pytest.mark.parametrize("old,new", [
    (r"^peak_tflops_bf16_dense = .*", "peak_tflops_bf16_dense = 1"),
    (r"^clock_mhz = .*", "clock_mhz = 2100"),
    (r"^mxu_count = .*", "mxu_count = 40"),
])
def test_a_tpu_whose_peak_disagrees_with_its_arrays_is_refused(capsys, tmp_path, old, new):
    # the systolic model timed GEMMs from the geometry, past the listed peak: an internal
    # error (the peak invariant) or, without it, a peak silently ignored
    path = edited(tmp_path, "hw_profiles", "devices/*.toml", "tpu-v3", old, new)
    err = one_line_error(capsys, "simulate", "bert_base", "--hw", str(path), "--json")
    assert "compute.matrix.peak_tflops_bf16_dense" in err and "mxu_rows x mxu_cols" in err


def test_a_range_error_says_the_range_in_the_unit_written(tmp_path):
    from accelsim.profiles.devices import load_profile

    path = edited(tmp_path, "hw_profiles", "devices/*.toml", "a100", r"^capacity_gb = .*",
                  "capacity_gb = 1e-10")
    with pytest.raises(AccelsimError, match=r"1e-09 to 1e\+09 gb \(1 B to 1e\+18 B\)"):
        load_profile(path)


def test_a_storage_read_bandwidth_of_5e_324_is_refused(capsys, tmp_path):
    # it was accepted, and --json printed NaN and Infinity
    path = edited(tmp_path, "hw_profiles", "storage/*.toml", "nvme-gen4",
                  r"^read_bandwidth_mb_s = .*", "read_bandwidth_mb_s = 5e-324")
    err = one_line_error(capsys, "simulate", "resnet50-train", "--hw", "dgx-a100", "--storage",
                         str(path), "--steps", "2", "--json")
    assert "read_bandwidth_mb_s" in err and "physical range" in err


@pytest.mark.parametrize("old,new,needle", [
    (r"^file_size_mean_bytes = .*", "file_size_mean_bytes = 1e300", "file_size_mean_bytes"),
    (r"^file_size_stdev_bytes = .*", "file_size_stdev_bytes = 1e16", "100 x"),
    (r"^prep_ms_per_sample_per_core = .*", "prep_ms_per_sample_per_core = 1e300",
     "prep_ms_per_sample_per_core"),
])
def test_dataset_ranges(capsys, tmp_path, old, new, needle):
    path = edited(tmp_path, "hw_profiles", "datasets/*.toml", "imagenet-raw", old, new)
    err = one_line_error(capsys, "simulate", "resnet50-train", "--hw", "dgx-a100", "--dataset",
                         str(path), "--steps", "2")
    assert needle in err


def test_a_huge_file_size_gives_no_negative_energy(capsys, tmp_path):
    # sizes past int64 wrapped negative: negative bytes, energy and power
    ds = Dataset("x", "x", "raw", 1000, 1000, 1, "lognormal", 1e18, 1e20, 4096, 0.0)
    sizes = sample_file_sizes_bytes(ds, 100_000, 0)
    assert sizes.min() >= 1 and sizes.max() <= BYTES.high
    path = edited(tmp_path, "hw_profiles", "datasets/*.toml", "imagenet-raw",
                  r"^file_size_mean_bytes = .*", "file_size_mean_bytes = 1e17")
    assert main(["simulate", "resnet50-train", "--hw", "dgx-a100", "--dataset", str(path),
                 "--steps", "2", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["energy_breakdown_j"]["total"] > 0 and record["average_power_w"] > 0


def test_the_read_plan_is_sized_by_the_steps_run_not_the_dataset():
    # batch 1 and 16,384 IO threads sized a 156 GiB array for one step (MemoryError)
    ds = load_dataset("imagenet-raw")
    plan = read_plan(ds, devices=8, batch=1, io_threads=16384, steps=1, epochs=1, seed=0)
    assert plan.requests.shape == (1, 8, 16384) and plan.samples.sum() == 8
    # ... and the first steps are those of the whole epoch
    whole = read_plan(load_dataset("synthetic-small"), 2, 7, 3, None, 1, 5)
    part = read_plan(load_dataset("synthetic-small"), 2, 7, 3, 5, 1, 5)
    for name in ("requests", "bytes", "samples"):
        assert np.array_equal(getattr(part, name), getattr(whole, name)[:5])


def test_click_usage_errors_are_one_line(capsys):
    for args in (["simulate", "resnet50", "--hw", "a100", "--batch", "x"],
                 ["simulate", "resnet50", "--hw", "a100", "--bogus"],
                 ["describe", "resnet50", "--software", "eager"], ["bogus"]):
        err = one_line_error(capsys, *args)
        assert err.startswith("accelsim: error: ") and "--help" in err


def test_a_newline_in_a_path_stays_on_one_line(capsys, tmp_path):
    err = one_line_error(capsys, "simulate", "resnet50", "--hw", str(tmp_path / "a\nb.toml"))
    assert "a\\nb.toml" in err


@pytest.mark.parametrize("flag,suffix", [("--trace", ".json"), ("--csv", ".csv"),
                                         ("--resume", ".sqlite")])
def test_an_output_name_too_long_is_one_line(capsys, tmp_path, flag, suffix):
    # OSError ENAMETOOLONG escaped as an internal error
    out = str(tmp_path / ("o" * 300 + suffix))
    cmd = "simulate" if flag == "--trace" else "compare" if flag == "--csv" else "sweep"
    args = [cmd, "mlp", "--hw", "a100", flag, out] + (["-q"] if cmd == "sweep" else [])
    assert "File name too long" in one_line_error(capsys, *args)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_as_resume_store_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "s.sqlite"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "accelsim.cli", "sweep", "mlp", "--hw", "a100",
                           "--resume", str(fifo), "-q"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr


def test_execute_refuses_a_forward_pass_too_large_to_run(capsys):
    # unet3d --execute ran for 108 s and ended in a 27 GiB MemoryError
    err = one_line_error(capsys, "describe", "unet3d", "--execute", "--json")
    assert "--execute" in err and "FLOPs" in err


def test_an_elided_run_whose_ratio_rounds_to_one_is_refused_at_once(capsys):
    # the run never advanced: an endless loop
    t0 = time.perf_counter()
    err = one_line_error(capsys, "sweep", "mlp", "--hw", "a100", "--batch",
                         "1000000000,1000000001,1000000003,...,2000000000", "-q")
    assert "ratio" in err and time.perf_counter() - t0 < 10


def test_a_system_naming_an_unknown_device_names_its_file(capsys, tmp_path):
    path = edited(tmp_path, "hw_profiles", "systems/*.toml", "workstation", r'^device = .*',
                  'device = "no-such-device"')
    err = one_line_error(capsys, "simulate", "mlp", "--hw", str(path))
    assert str(path) in err and "accelerator.device" in err and "no-such-device" in err


def test_a_system_device_path_is_read_relative_to_the_system_file(capsys, tmp_path):
    (tmp_path / "card.toml").write_bytes(builtin_files("hw_profiles", "devices/*.toml")["t4"]
                                         .read_bytes())
    path = edited(tmp_path, "hw_profiles", "systems/*.toml", "workstation", r'^device = .*',
                  'device = "card.toml"', "sys.toml")
    assert main(["simulate", "mlp", "--hw", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"]["name"] == "card"


@pytest.mark.parametrize("old,new,needle", [
    (r"^batch_size = .*", "batch_size = 99999999999", "batch_size"),
    (r"^image_size = .*", "image_size = 99999999999", "input.image_size"),
    (r"^io_threads = .*", "io_threads = 99999999999", "pipeline.io_threads"),
])
def test_scenario_counts_have_the_knobs_ceilings(capsys, tmp_path, old, new, needle):
    path = edited(tmp_path, "workloads", "*.toml", "resnet50-train", old, new)
    err = one_line_error(capsys, "simulate", str(path), "--hw", "dgx-a100", "--steps", "2")
    assert needle in err


def test_a_model_of_a_million_layers_is_refused(capsys, tmp_path):
    # a 10-million-layer MLP hung; 1,000,000 (under the input ceiling) took minutes and GBs
    path = tmp_path / "deep.toml"
    path.write_text('model = "mlp"\nmode = "infer"\nbatch_size = 1\nprecision = "fp32"\n'
                    "[input]\nlayers = 1000000\n")
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert "input.layers" in err and "10,000" in err
    err = one_line_error(capsys, "sweep", "lstm", "--hw", "a100", "--set", "layers=1000000",
                         "-q")
    assert "layers" in err


def test_an_integer_of_5000_digits_is_one_line(capsys, tmp_path):
    # Python refuses to convert it (ValueError inside the TOML parser): an internal error
    path = edited(tmp_path, "workloads", "*.toml", "resnet50-infer", r"^batch_size = .*",
                  "batch_size = " + "9" * 5000)
    err = one_line_error(capsys, "simulate", str(path), "--hw", "a100")
    assert str(path) in err and "not valid TOML" in err
