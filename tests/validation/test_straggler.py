"""The slowest of N devices paces data-parallel steps (`accelsim.sim.straggler`), against
closed forms and a naive Monte Carlo reference: expected normal order statistics, and the
scaling of a compute-bound pipeline, 1 / (1 + spread x E[max of N]), with or without
gradient accumulation (a persistent spread is not averaged away).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from accelsim.devices.null import NullProfile
from accelsim.errors import AccelsimError
from accelsim.profiles.devices import load_profile
from accelsim.sim.config import TrainConfig
from accelsim.sim.run import TrainResult, simulate_training
from accelsim.sim.straggler import (
    class_spread,
    device_slowdowns,
    expected_max,
    expected_order_stats,
)
from tests.helpers.pipeline import fast_system, scenario, shards

SQRT_PI = math.sqrt(math.pi)


def test_order_statistics_of_two_and_three_normals_closed_form() -> None:
    # E[max of 2] = 1/sqrt(pi); E[max of 3] = 3 / (2 sqrt(pi)); the middle of 3 is 0
    assert expected_order_stats(2) == pytest.approx((-1 / SQRT_PI, 1 / SQRT_PI), abs=1e-9)
    assert expected_order_stats(3) == pytest.approx((-1.5 / SQRT_PI, 0.0, 1.5 / SQRT_PI),
                                                    abs=1e-9)
    assert expected_max(1) == pytest.approx(0.0, abs=1e-9)
    assert expected_max(2) == pytest.approx(1 / SQRT_PI, abs=1e-9)


@pytest.mark.parametrize("n", [4, 8, 16, 64])
def test_order_statistics_against_monte_carlo(n: int) -> None:
    draws = np.sort(np.random.default_rng(7).standard_normal((200_000, n)), axis=1)
    stats = np.array(expected_order_stats(n))
    assert stats == pytest.approx(draws.mean(axis=0), abs=0.01)
    assert np.all(np.diff(stats) > 0) and stats.sum() == pytest.approx(0.0, abs=1e-9)
    assert expected_max(n) == pytest.approx(stats[-1], abs=1e-9)


def test_expected_max_of_many_against_monte_carlo() -> None:
    draws = np.random.default_rng(3).standard_normal((20_000, 512)).max(axis=1)
    assert expected_max(512) == pytest.approx(draws.mean(), abs=0.01)


def test_device_slowdowns() -> None:
    assert device_slowdowns(8, 8, 0.0) == (1.0,) * 8
    assert device_slowdowns(1, 1, 0.05) == pytest.approx((1.0,))
    two = device_slowdowns(2, 2, 0.05)
    assert two == pytest.approx((1 - 0.05 / SQRT_PI, 1 + 0.05 / SQRT_PI))
    # one simulated node of 32 holds the slowest of all 512 devices
    node = device_slowdowns(16, 512, 0.03)
    assert node[-1] == pytest.approx(1 + 0.03 * expected_max(512))
    assert node[:-1] == pytest.approx(device_slowdowns(16, 16, 0.03)[:-1])
    for bad in (-0.01, 0.2, math.nan):
        with pytest.raises(ValueError, match="spread"):
            device_slowdowns(4, 4, bad)


def test_spread_is_per_device_class() -> None:
    gpu, note = class_spread(load_profile("v100"))
    assert 0.0 < gpu < 0.2 and "fitted" in note
    assert class_spread(NullProfile())[0] == 0.0


def run(devices: int, spread: float | None, **kw: Any) -> TrainResult:
    fast = fast_system()
    system = replace(fast, device_to_device=replace(fast.device_to_device,
                                                    bandwidth_bytes_per_s=1e300))
    sc = scenario(model="resnet50", batch=64, prefetch_batches=2)
    kw.setdefault("steps", 6)
    return simulate_training(TrainConfig(sc, system, dataset=shards(), devices=devices,
                                         device_profile=NullProfile(op_time_s=1e-5),
                                         device_spread=spread, **kw))


def _efficiency(n: int, spread: float | None, **kw: Any) -> float:
    one, many = run(1, spread, **kw), run(n, spread, **kw)
    return (many.global_batch / many.step_time_s) / (n * one.global_batch / one.step_time_s)


@pytest.mark.parametrize("n, spread, accumulate", [(8, 0.05, 1), (4, 0.1, 1), (8, 0.05, 3)])
def test_compute_bound_scaling_is_one_over_the_slowest(n: int, spread: float,
                                                       accumulate: int) -> None:
    """Infinite bandwidth: the N-device run is paced by its slowest device, whatever the
    accumulation."""
    eff = _efficiency(n, spread, accumulate=accumulate)
    assert eff == pytest.approx(1 / (1 + spread * expected_max(n)), rel=1e-9)


def test_no_spread_for_a_class_without_one_and_a_note_when_multi_device() -> None:
    assert _efficiency(8, None) == pytest.approx(1.0, rel=1e-9)
    res = run(8, 0.05)
    assert any("slowest of 8 devices" in n for n in res.notes)


@pytest.mark.parametrize("bad", [0.5, -0.1, "x", True])
def test_bad_spread_is_one_line(bad: object) -> None:
    with pytest.raises(AccelsimError, match="device_spread"):
        run(2, bad)  # type: ignore[arg-type]


def test_a_faster_or_slower_die_keeps_its_power() -> None:
    """Dies under one power cap: a device `factor` times slower (or faster) draws the nominal
    power, so its energy per step scales with its time (none passes the cap by running fast)."""
    from accelsim.sim.costs import PhaseCost
    from accelsim.sim.straggler import slowed

    cost = PhaseCost(forward_s=0.01, backward_s=0.02, optimizer_s=0.001, forward_j=3.0,
                     backward_j=6.0, optimizer_j=0.2, bucket_ready_s=(0.005, 0.02))
    for factor in (0.66, 1.3):
        c = slowed(cost, factor)
        for phase in ("forward", "backward", "optimizer"):
            assert (getattr(c, f"{phase}_j") / getattr(c, f"{phase}_s")
                    == pytest.approx(getattr(cost, f"{phase}_j") / getattr(cost, f"{phase}_s")))
        assert c.bucket_ready_s == pytest.approx((0.005 * factor, 0.02 * factor))
