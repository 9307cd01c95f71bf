"""The training plan (accelsim.explore.plan_train): on a synthetic cluster whose throughput is
known in closed form (each configuration's compute bound times a scaling efficiency below 1),
its best rows equal the exhaustive grid's for every objective with a bound, with fewer runs;
a deadline below every bound prunes all unsimulated; an AU floor and a power limit bind; bad
input is one line. One real plan, small, checks the figures it reads."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from accelsim.explore import plan_train
from accelsim.explore.plan_train import TrainLimits, make_train_plan
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.hardware import resolve_hardware
from accelsim.profiles.prices import device_price
from accelsim.workload.scenario import resolve_workload
from tests.helpers.cli import one_line_error, run_cli

HW = ["dgx-h100", "hgx-h200"]
BATCHES, DEVICES, NODES = [64, 128, 256], [2, 4, 8], [1, 2, 4, 8, 16]
EPOCHS = 10
NO_LIMITS = TrainLimits()


def efficiency(nodes: int, devices: int, batch: int) -> float:
    """Share of the compute bound a configuration reaches: worse with more GPUs and smaller
    batches (communication per sample), never 1."""
    return 0.95 / (1.0 + 0.02 * (nodes * devices) ** 0.5 * 64 / batch)


class FakeCluster:
    """`run(cfg, detail=False)` with throughput = bound x efficiency; power 700 W a GPU."""

    def __init__(self) -> None:
        self.calls = 0
        self.sc = resolve_workload("resnet50-train")

    def __call__(self, cfg, detail=False):
        self.calls += 1
        system, profile = resolve_hardware(cfg.hardware)
        batch, precision = cfg.scenario.batch_size, cfg.scenario.precision
        k, n = cfg.devices, cfg.train["nodes"]
        step_s = plan_train._device_bound(self.sc, system, profile, batch, precision)
        thr = n * k * batch / step_s * efficiency(n, k, batch)
        price = device_price(profile.name).usd_per_device_hour
        power_w = 700.0 * n * k
        return SimpleNamespace(record={
            "throughput_samples_per_s": thr, "average_power_w": power_w,
            "energy_j_per_sample": power_w / thr, "accelerator_utilization": 0.8 + 0.1 / n,
            "cost": {"usd_per_hour": price * n * k}, "bottleneck": "compute"})


def _plan(objective: str, limits: TrainLimits = NO_LIMITS, top: int = 3):
    fake = FakeCluster()
    p = make_train_plan("resnet50-train", HW, BATCHES, ["bf16"], DEVICES, NODES, objective,
                        EPOCHS, limits, top=top, run=fake)
    return p, fake


def _exhaustive(objective: str, limits: TrainLimits = NO_LIMITS) -> list[tuple]:
    """Every configuration simulated (a bound that never prunes), the best rows' keys."""
    saved = plan_train._optimistic
    plan_train._optimistic = lambda row, key: None
    try:
        p, _ = _plan(objective, limits, top=3)
    finally:
        plan_train._optimistic = saved
    return [(r["hardware"], r["batch"], r["devices"], r["nodes"]) for r in p.best[:3]]


@pytest.mark.parametrize("objective", ["cost", "time-to-train", "throughput",
                                       "samples-per-dollar"])
def test_branch_and_bound_finds_the_exhaustive_best(objective: str) -> None:
    p, fake = _plan(objective)
    got = [(r["hardware"], r["batch"], r["devices"], r["nodes"]) for r in p.best[:3]]
    assert got == _exhaustive(objective)
    assert fake.calls == p.simulated < len(p.rows) // 2  # the bound prunes most of the grid


def test_time_to_train_is_the_epochs_over_the_throughput() -> None:
    p, _ = _plan("time-to-train")
    samples = EPOCHS * load_dataset("imagenet-raw").sample_count
    for r in p.best:
        assert r["time_to_train_s"] == pytest.approx(samples / r["throughput_samples_per_s"])
        assert r["usd_per_run"] == pytest.approx(r["usd_per_hour"] * r["time_to_train_s"] / 3600)


def test_a_deadline_below_every_bound_prunes_everything_unsimulated() -> None:
    p, fake = _plan("cost", TrainLimits(deadline_s=1.0))
    assert p.best == [] and fake.calls == 0
    assert all("deadline" in r["reason"] for r in p.rows)


def test_power_and_au_limits_bind() -> None:
    power = TrainLimits(max_power_w=700.0 * 16)
    p, _ = _plan("time-to-train", power)
    assert p.best and all(r["power_w"] <= 700.0 * 16 for r in p.best)
    assert any(r["violates"] == "power" for r in p.rows)
    au = TrainLimits(min_au=0.86)  # AU 0.8 + 0.1 / nodes: one node only
    p, _ = _plan("time-to-train", au)
    assert p.best and {r["nodes"] for r in p.best} == {1}


def test_bad_training_plans_are_one_line(capsys) -> None:
    base = ("plan", "resnet50-train", "--hw", "dgx-h100")
    assert "must be above 0" in one_line_error(capsys, *base, "--minimize", "cost",
                                               "--deadline-h", "0")
    assert "from 0 to 1" in one_line_error(capsys, *base, "--minimize", "cost", "--min-au",
                                           "2")
    assert "inference plan" in one_line_error(capsys, *base, "--minimize", "cost", "--p99-ms",
                                              "5")
    assert "training scenario" in one_line_error(capsys, "plan", "resnet50", "--hw", "h100",
                                                 "--minimize", "time-to-train")
    assert "training scenario's plan" in one_line_error(capsys, "plan", "resnet50", "--hw",
                                                        "h100", "--maximize", "throughput",
                                                        "--nodes", "2")
    assert "latency" in one_line_error(capsys, *base, "--minimize", "latency")


def test_a_real_plan_reads_its_records(capsys) -> None:
    code, out, _ = run_cli(capsys, "plan", "resnet50-train", "--hw", "dgx-h100", "--nodes",
                           "1,2", "--steps", "5", "--epochs", "2", "--minimize",
                           "time-to-train", "--json")
    assert code == 0
    data = json.loads(out)
    best = data["best"][0]
    assert best["nodes"] == 2 and best["devices"] == 8  # twice the GPUs: sooner
    assert best["throughput_samples_per_s"] <= best["bound_throughput"]
    assert data["simulated"] == 2


def test_the_figure_draws_every_feasible_row_and_a_non_dominated_front(tmp_path) -> None:
    from accelsim.explore.plan_train import train_front
    from accelsim.plots.plan_train import train_plan_figure
    from accelsim.plots.style import save_figure

    p, _ = _plan("cost", top=40)
    rows = p.feasible
    front = train_front(rows, "usd_per_run")
    assert front == p.front
    for r in rows:  # no row is both sooner and cheaper than a front row
        for f in front:
            assert not (r["time_to_train_s"] < f["time_to_train_s"]
                        and r["usd_per_run"] < f["usd_per_run"])
    fig = train_plan_figure(p, deadline_h=3.0)
    points = sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    assert points == len(rows) + 1  # every feasible row, and the chosen one ringed
    out = save_figure(fig, tmp_path / "plan.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("change, says", [
    (dict(systems="dgx-h100"), "non-empty list"),
    (dict(batches=[0]), "batches[0] = 0"),
    (dict(nodes=[1.5]), "whole number"),
    (dict(epochs=True), "whole number"),
    (dict(objective=3), "objective 3"),
    (dict(knobs={"nodes": 2}), "set by the call itself"),
    (dict(limits="deadline"), "TrainLimits"),
])
def test_bad_api_arguments_are_one_accelsim_error(change, says) -> None:
    from accelsim.errors import AccelsimError

    call = dict(workload="resnet50-train", systems=["dgx-h100"], batches=[64],
                precisions=["bf16"], devices=None, nodes=[1], objective="cost")
    call.update(change)
    with pytest.raises(AccelsimError, match=re.escape(says)) as err:
        make_train_plan(**call, run=FakeCluster())
    assert "\n" not in str(err.value)


def test_limits_refuse_what_is_no_limit() -> None:
    from accelsim.errors import AccelsimError

    with pytest.raises(AccelsimError, match="deadline_s"):
        TrainLimits(deadline_s=float("nan"))
    with pytest.raises(AccelsimError, match="share from 0 to 1"):
        TrainLimits(min_au=2.0)
