"""`accelsim plan` (accelsim.explore.plan): its answer equals the full grid's best, found with
fewer simulations; limits respected; the front non-dominated; bad input refused."""

from __future__ import annotations

import itertools

import pytest

from accelsim.errors import AccelsimError
from accelsim.explore.plan import OBJECTIVES, make_plan
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

HW, PREC, BATCHES, COUNTS = ["h100", "t4"], ["fp16", "int8"], [1, 2, 4, 8, 16, 32, 64], [1, 2]
KNOBS = {"software": "tensorrt"}  # little host time: the batch, not the host, sets latency


def _grid_best(objective: str, p99_s: float, max_usd_h: float | None = None):
    """The naive answer: simulate every configuration, keep the best that meets the limits."""
    key, up = OBJECTIVES[objective]
    best = None
    for hw, prec, batch, n in itertools.product(HW, PREC, BATCHES, COUNTS):
        rec = run_simulation(make_config("resnet50", hw, batch=batch, precision=prec,
                                         **KNOBS), detail=False).record
        if not rec["memory"]["fits"] or rec["latency_s"] > p99_s:
            continue
        usd_h = rec["cost"]["usd_per_hour"] * n
        if max_usd_h is not None and usd_h > max_usd_h:
            continue
        thr = rec["throughput_samples_per_s"] * n
        value = {"throughput_samples_per_s": thr,
                 "samples_per_usd": thr * 3600 / usd_h}[key]
        if best is None or (value > best[0] if up else value < best[0]):
            best = (value, hw, prec, batch, n)
    return best


@pytest.mark.parametrize("objective, p99_ms, max_usd_h", [
    ("samples-per-dollar", 20.0, None), ("throughput", 5.0, 6.0)])
def test_plan_matches_the_full_grid(objective, p99_ms, max_usd_h):
    plan = make_plan("resnet50", HW, BATCHES, PREC, COUNTS, objective, p99_ms=p99_ms,
                     max_usd_per_hour=max_usd_h, knobs=KNOBS)
    want = _grid_best(objective, p99_ms * 1e-3, max_usd_h)
    got = plan.best[0]
    key, _ = OBJECTIVES[objective]
    assert (got["hardware"], got["precision"], got["batch"]) == want[1:4]
    assert got[key] == pytest.approx(want[0])
    assert plan.simulated <= len(HW) * len(PREC) * len(BATCHES) * 2 // 3
    assert len(plan.rows) == len(HW) * len(PREC) * len(BATCHES) * len(COUNTS)


def test_limits_and_front():
    plan = make_plan("resnet50", HW, BATCHES, PREC, COUNTS, "throughput", p99_ms=10,
                     max_usd_per_hour=5.0, knobs=KNOBS)
    for r in plan.feasible:
        assert r["latency_s"] <= 0.010 and r["usd_per_hour"] <= 5.0
    front = plan.front
    assert front
    for a in front:  # no feasible row beats a front row on both
        assert not any(b["throughput_samples_per_s"] > a["throughput_samples_per_s"]
                       and b["usd_per_hour"] <= a["usd_per_hour"] for b in plan.feasible)
    assert plan.best[0] in front


def test_unrunnable_precision_left_out():
    plan = make_plan("resnet50", ["v100"], [1, 2], ["bf16"], [1], "throughput")
    assert plan.simulated == 1 and not plan.best
    assert all("does not run bf16" in r["reason"] for r in plan.rows)


def test_bad_objective():
    with pytest.raises(AccelsimError, match="objective"):
        make_plan("resnet50", ["t4"], [1], ["fp16"], [1], "speed")
