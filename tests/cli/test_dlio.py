"""A DLIO workload configuration run by the MLPerf Storage emulation (issue 23 item 7, DLIO
part): `accelsim simulate FILE.yaml` reads DLIO's dataset, reader, train and metric sections
(tests/fixtures/dlio_unet3d_a100.yaml is DLIO's own unet3d_a100.yaml) and `--dlio-summary`
writes summary.json in DLIO's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.errors import ConfigError
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.dlio import load_dlio
from accelsim.profiles.emulation import load_emulation
from tests.helpers.cli import one_line_error, run_cli
from tests.helpers.paths import ROOT

UNET3D = ROOT / "tests" / "fixtures" / "dlio_unet3d_a100.yaml"
# The keys DLIO's StatsCounter writes that a simulation can fill (no wall clock, no cpuinfo).
SUMMARY_KEYS = {"num_accelerators", "num_hosts", "metric", "num_files_train", "num_files_eval",
                "num_samples_per_file", "host_cpu_count", "host_memory_GB",
                "data_size_per_host_GB", "potential_caching", "epochs"}
METRIC_KEYS = {"train_au_percentage", "train_au_mean_percentage", "train_au_meet_expectation",
               "train_au_stdev_percentage", "train_throughput_samples_per_second",
               "train_throughput_mean_samples_per_second",
               "train_throughput_stdev_samples_per_second", "train_io_mean_MB_per_second",
               "train_io_stdev_MB_per_second"}


def test_dlio_config_reads_as_the_builtin_emulation() -> None:
    """DLIO's unet3d_a100.yaml gives the figures hw_profiles/ took from the same file."""
    cfg = load_dlio(UNET3D)
    emu, ds = cfg.emulation, cfg.dataset
    builtin = load_emulation("a100", "unet3d")
    assert (emu.batch_size, emu.computation_time_s, emu.read_threads, emu.au_target) == (
        builtin.batch_size, builtin.computation_time_s, builtin.read_threads,
        builtin.au_target)
    kits = load_dataset("mlperf-unet3d")
    assert (ds.file_count, ds.samples_per_file, ds.file_size_mean_bytes,
            ds.file_size_stdev_bytes, ds.format) == (
        kits.file_count, kits.samples_per_file, kits.file_size_mean_bytes,
        kits.file_size_stdev_bytes, kits.format)
    assert cfg.model == "unet3d" and cfg.epochs == 5 and ds.decoded_sample_bytes == 2097152
    assert "checkpoint.model_size" in cfg.ignored and "reader.batch_size" not in cfg.ignored


def test_simulate_yaml_writes_dlio_summary(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    out_file = tmp_path / "summary.json"
    code, out, err = run_cli(capsys, "simulate", str(UNET3D), "--hw", "dgx-a100", "--devices",
                             "4", "--dlio-summary", str(out_file))
    assert code == 0, err
    assert "DLIO emulation" in out and "summary.json" in out
    summary = json.loads(out_file.read_text())
    assert SUMMARY_KEYS <= set(summary) and set(summary["metric"]) == METRIC_KEYS
    m = summary["metric"]
    assert summary["num_accelerators"] == 4 and summary["num_files_train"] == 168
    # the page cache serves 23 GiB on a 1.8 TiB host: compute-bound, AU 100%
    assert m["train_au_mean_percentage"] == pytest.approx(100.0)
    assert m["train_au_meet_expectation"] == "success" and summary["potential_caching"] == [1]
    tput = m["train_throughput_mean_samples_per_second"]
    assert tput == pytest.approx(4 * 7 / 0.636, rel=1e-6)
    assert m["train_io_mean_MB_per_second"] == pytest.approx(tput * 146600628 / 2**20)
    assert m["train_au_percentage"] == [m["train_au_mean_percentage"]]


def test_storage_bound_dlio_run_fails_the_au(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    text = UNET3D.read_text().replace("num_files_train: 168", "num_files_train: 80000")
    cfg = tmp_path / "unet3d_big.yaml"
    cfg.write_text(text)
    code, out, err = run_cli(capsys, "simulate", str(cfg), "--hw", "dgx-a100", "--storage",
                             "hdd", "--storage-count", "1", "--steps", "12", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["summary"]["metric"]["train_au_meet_expectation"] == "fail"
    assert got["accelerator_utilization"] < 0.9 and got["summary"]["potential_caching"] == [0]


def test_bad_dlio_configs_are_one_line_errors(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    cases = [("  computation_time: 0.636\n", "", "train.computation_time"),
             ("  batch_size: 7\n", "  batch_size: seven\n", "reader.batch_size"),
             ("metric:\n  au: 0.90\n", "metric:\n  au: 90\n", "metric.au")]
    for old, new, words in cases:
        path = tmp_path / "bad.yaml"
        path.write_text(UNET3D.read_text().replace(old, new))
        with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
            load_dlio(path)
        err = one_line_error(capsys, "simulate", str(path), "--hw", "dgx-a100")
        assert words in err
    err = one_line_error(capsys, "simulate", "resnet50", "--hw", "a100", "--dlio-summary",
                         str(tmp_path / "s.json"))
    assert "DLIO workload .yaml" in err
    err = one_line_error(capsys, "simulate", str(UNET3D), "--hw", "dgx-a100", "--batch", "8")
    assert "DLIO configuration takes only" in err
