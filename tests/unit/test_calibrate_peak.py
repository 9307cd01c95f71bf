"""Issue 27, item 1: the peak the host really runs at, and no calibrated file that stops
`simulate` with an internal error."""

import dataclasses
import tomllib
from pathlib import Path

import pytest

from accelsim.calibrate.host import host_facts
from accelsim.calibrate.peak import host_peak, probe_threads, sustained_rates
from accelsim.calibrate.write import cpu_profile, measured_stack, toml_text, write_profile
from accelsim.errors import AccelsimError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import load_stack
from tests.helpers.cli import run_cli

SHIPPED = "benchmarks/results/calibrate_host"


def _facts(**changes):
    return dataclasses.replace(host_facts(), cores=2, simd_width_bits=512, has_fma=True,
                               clock_hz=2.596e9, max_clock_hz=None, **changes)


def test_probe_names_give_their_threads():
    assert probe_threads("numpy_1_thread", 8) == 1
    assert probe_threads("torch_2_threads", 8) == 2
    assert probe_threads("numpy_default_threads", 8) == 8


def test_a_probe_above_the_nameplate_peak_sets_the_clock():
    # 2 cores x 16 lanes x 2 FMA x 2 = 64 FLOP per cycle per core; at 2.596 GHz, 166.1 GFLOP/s
    # a core. A probe of 205 GFLOP/s on one thread implies 3.203 GHz (the cores boost).
    peak = host_peak(2.596e9, 2, 16, 2, {"numpy_1_thread": 90e9, "torch_1_thread": 205e9,
                                         "torch_2_threads": 380e9})
    assert peak.boosted and peak.best_probe == "torch_1_thread"
    assert peak.clock_hz == pytest.approx(205e9 / 64)
    assert peak.peak_flops_per_s == pytest.approx(2 * 205e9)
    assert "the cores boost" in peak.source
    # a probe below the nameplate leaves the reported clock (the peak is a ceiling)
    slow = host_peak(2.596e9, 2, 16, 2, {"numpy_1_thread": 100e9, "numpy_2_threads": 150e9})
    assert not slow.boosted and slow.clock_hz == 2.596e9
    assert slow.peak_flops_per_s == pytest.approx(2 * 64 * 2.596e9)
    # no probe at all: the nameplate
    assert host_peak(2e9, 4, 8, 2, {}).peak_flops_per_s == pytest.approx(4 * 32 * 2e9)


def test_no_probe_runs_faster_than_the_peak_written(tmp_path):
    rates = {"numpy_1_thread": 205e9, "numpy_2_threads": 300e9}
    data, peak = cpu_profile(_facts(), 2e10, "today", "", rates)
    path = write_profile(tmp_path / "host-cpu.toml", data, "test")
    profile = load_profile(path)  # the schema takes the base clock below the clock
    written = profile.compute.vector_peak_flops_per_s["fp32"]
    assert written == pytest.approx(peak, rel=1e-3)
    assert all(written * (1 + 1e-3) >= rate / probe_threads(name, 2) * 2
               for name, rate in rates.items())
    assert data["compute"]["base_clock_mhz"] == pytest.approx(2596.0)
    assert data["compute"]["clock_mhz"] == pytest.approx(205e9 / 64 / 1e6, rel=1e-3)
    sources = tomllib.loads(path.read_text())["sources"]
    assert sources["compute.clock_mhz"].startswith("derived:")
    assert sources["compute.base_clock_mhz"].startswith("measured:")


def test_the_probe_measures_a_positive_rate_per_thread_count():
    rates = sustained_rates(cores=2, repeats=2)
    assert rates and all(rate > 1e8 for rate in rates.values())


def _crash_files(tmp_path, conv_fp32: float):
    """A CPU profile at the base clock and a PyTorch-like stack (no weight casts, packing
    at 10x the stream) with `conv_fp32` of its peak: the mechanism of issue 27's exit 70."""
    data, _ = cpu_profile(_facts(), 2.4e10, "today", "")
    hw = write_profile(tmp_path / "host-cpu.toml", data, "test")
    stack = measured_stack("PyTorch-like", {"gemm_fp32": 0.8, "conv_fp32": conv_fp32,
                                            "pack_fp32": 10.0}, 5e-6, False, 2.596, "vm",
                           "today", "test")
    return hw, stack


def test_a_peak_figure_above_1_is_refused_by_simulate_in_one_line_not_exit_70(tmp_path,
                                                                                capsys):
    hw, stack = _crash_files(tmp_path, 1.24)
    stack["cpu_efficiency"]["conv_fp32"] = 1.24  # as written before issue 27 (no clamp)
    sw = tmp_path / "pytorch-host.toml"
    sw.write_text(toml_text(stack, "test"))
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", str(hw), "--software",
                             str(sw), "--batch", "1")
    assert code == 2, err
    assert "cpu_efficiency.conv_fp32" in err and "1.24" in err and len(err.splitlines()) == 1
    # the guard calibrate runs on what it wrote says the same, as its own one-line error
    from accelsim.calibrate.guard import check_simulates

    with pytest.raises(AccelsimError, match=r"refused to keep pytorch-host.toml.*conv_fp32"):
        check_simulates(hw, sw)


def test_calibrate_writes_a_fitted_figure_above_the_peak_clamped_with_a_note(tmp_path, capsys):
    hw, stack = _crash_files(tmp_path, 1.24)
    assert stack["cpu_efficiency"]["conv_fp32"] == 1.0
    assert "capped at 1 from 1.24" in stack["sources"]["cpu_efficiency.conv_fp32"]
    assert "a term the model lacks" in stack["sources"]["cpu_efficiency.conv_fp32"]
    assert stack["cpu_efficiency"]["pack_fp32"] == 10.0  # a DRAM figure: cache residency
    sw = write_profile(tmp_path / "pytorch-host.toml", stack, "test")
    load_stack(sw)
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", str(hw), "--software",
                             str(sw), "--batch", "1")
    assert code == 0, err


def test_the_guard_turns_a_broken_invariant_into_one_line(tmp_path, monkeypatch):
    from accelsim.calibrate import guard
    from accelsim.devices.invariants import InvariantError

    def broken(*args, **kwargs):
        raise InvariantError("invariant 'peak' violated: row 0 'conv1' (conv2d): 3.7e11 "
                             "FLOP/s above its unit's peak 3.3e11 FLOP/s; inputs: device=x")

    monkeypatch.setattr(guard, "estimate", broken)
    with pytest.raises(AccelsimError) as err:
        guard.check_simulates(Path(f"{SHIPPED}/host-cpu.toml"), Path(f"{SHIPPED}/numpy-host.toml"))
    text = str(err.value)
    assert "invariant 'peak' violated: row 0 'conv1'" in text and "inputs:" not in text
    assert "\n" not in text


def test_a_bf16_dot_product_instruction_doubles_the_bf16_vector_peak(tmp_path):
    # (issue 27, item 3: a wider bf16 path is a mechanism, not a GEMM figure of 1.34)
    with_dot = _facts(flags=frozenset({"avx512f", "fma", "avx512_bf16"}))
    data, peak = cpu_profile(with_dot, 2e10, "today", "")
    profile = load_profile(write_profile(tmp_path / "a.toml", data, "test"))
    assert profile.compute.vector_peak_flops_per_s["bf16"] == pytest.approx(2 * peak, rel=1e-3)
    assert "avx512_bf16" in data["sources"]["compute.vector.peak_tflops_bf16"]
    data, _ = cpu_profile(_facts(flags=frozenset({"avx512f", "fma"})), 2e10, "today", "")
    assert "peak_tflops_bf16" not in data["compute"]["vector"]
