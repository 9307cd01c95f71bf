"""Sustained clocks under the power limit (accelsim.devices.dvfs), against closed forms, and the
T4 of issue 8: power-limited under sustained tensor-core load with no T4-specific factor."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.devices.dvfs import MIN_CLOCK_FRACTION, throttle
from accelsim.devices.energy import die_energy_scale, dvfs_settings
from accelsim.devices.estimate import estimate, summary
from accelsim.profiles.devices import load_profile
from accelsim.workload.zoo import build_model


def _one(compute_s: float, memory_s: float, die_j: float, offchip_j: float, headroom_w: float,
         floor: float) -> tuple[float, float, float, float]:
    f, t, e, s = throttle(np.array([0]), np.array([compute_s]), np.array([memory_s]),
                          np.zeros(1), np.array([die_j]), np.array([offchip_j]), headroom_w,
                          floor)
    return float(f[0]), float(t[0]), float(e[0]), float(s[0])


def test_a_compute_bound_kernel_runs_at_the_cube_root_clock() -> None:
    """Above the voltage floor power goes as f^3 (f clock x V^2 with V ~ f): 100 J in 1 s with
    27 W of headroom runs at f = (27 / 100)^(1/3) = 0.646, time 1 / f, energy 100 f^2."""
    f, t, e, s = _one(1.0, 0.0, 100.0, 0.0, 27.0, 0.5)
    assert f == pytest.approx(0.27 ** (1 / 3), rel=1e-6)
    assert t == pytest.approx(1 / f, rel=1e-9) and e == pytest.approx(100 * f * f, rel=1e-9)
    assert e / t == pytest.approx(27.0, rel=1e-6) and s == 0.0


def test_below_the_voltage_floor_power_falls_only_with_the_clock() -> None:
    """At V = floor, power = die_j floor^2 f / compute_s: 100 J, floor 0.7, 4.9 W -> f = 0.1."""
    f, t, e, _ = _one(1.0, 0.0, 100.0, 0.0, 4.9, 0.7)
    assert f == pytest.approx(0.1, rel=1e-6)
    assert e == pytest.approx(100 * 0.49, rel=1e-9) and t == pytest.approx(10.0, rel=1e-6)


def test_a_kernel_within_the_limit_keeps_its_clock_and_energy() -> None:
    assert _one(1.0, 0.5, 10.0, 5.0, 100.0, 0.7) == (1.0, 1.0, 15.0, 0.0)


def test_dram_energy_over_the_limit_stretches_at_the_lowest_clock() -> None:
    """A memory-bound kernel whose off-chip energy alone exceeds the headroom: the clock
    cannot help (DRAM time and energy do not scale with it), so time stretches to E / P."""
    f, t, e, s = _one(0.01, 1.0, 1.0, 100.0, 10.0, 0.7)
    assert f == pytest.approx(MIN_CLOCK_FRACTION)
    assert e == pytest.approx(100.0 + 0.49, rel=1e-9)
    assert t + s == pytest.approx(e / 10.0, rel=1e-9)


def test_t4_is_power_limited_under_sustained_tensor_core_load() -> None:
    """Same 12 nm node as V100, same energy per operation (energy.energy_scales: no T4 factor):
    the V100 sustains its boost clock on ResNet-50 fp16 at batch 128, the 70 W T4 does not; the
    T4's device power stays within 70 W and its clock drops below boost."""
    graph = build_model("resnet50")
    t4, v100 = load_profile("t4"), load_profile("v100")
    assert die_energy_scale(t4) == pytest.approx(die_energy_scale(v100))
    hot = estimate(graph, t4, 128, "fp16", "infer", "tensorrt")
    cool = estimate(graph, v100, 128, "fp16", "infer", "tensorrt")
    assert cool.sustained_clock_fraction == 1.0
    assert hot.sustained_clock_fraction < 0.95
    assert hot.device_power_w <= t4.power.tdp_w * (1 + 1e-9)
    assert hot.device_power_w > 0.95 * t4.power.tdp_w  # it runs at its limit
    clock = summary(hot, graph)["clock"]
    assert clock["rated_mhz"] == pytest.approx(1590.0)
    assert clock["sustained_mhz"] == pytest.approx(1590.0 * hot.sustained_clock_fraction)
    assert clock["power_limited_time_share"] > 0.5


def test_the_voltage_floor_is_a_fraction() -> None:
    ref, floor = dvfs_settings()
    assert load_profile(ref).device_class == "gpu" and 0 < floor <= 1
