"""The serving plan of a decoder (accelsim.explore.plan_llm): on a synthetic server whose
capacity is known in closed form, its answer equals the exhaustive grid's, with fewer runs;
replicas are ceil(rate / capacity); a configuration that misses its targets at its own load
gets a replica more; the bounds prune; bad input is refused in one line. One real plan, small,
checks the records it reads."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest

from accelsim.errors import AccelsimError
from accelsim.explore.plan_llm import make_serving_plan
from accelsim.profiles.prices import device_price
from tests.helpers.cli import one_line_error

HW = {"dgx-h100": "h100", "hgx-h200": "h200"}
SW, TPS, PPS, CAPS = ["vllm", "tensorrt-llm"], [1, 2, 4], [1, 2], [16, 32, 64, 128, 256]
RATE, TTFT_MS, TPOT_MS = 90.0, 500.0, 50.0


def _capacity(hw: str, sw: str, tp: int, pp: int, cap: int) -> float:
    """Requests/s one replica serves within the targets: unimodal in the cap (peak at 128),
    sub-linear in the GPUs."""
    base = {"dgx-h100": 20.0, "hgx-h200": 24.0}[hw] * (1.1 if sw == "tensorrt-llm" else 1.0)
    shape = {16: 0.4, 32: 0.6, 64: 0.85, 128: 1.0, 256: 0.9}[cap]
    return base * (tp * pp) ** 0.8 * shape


class FakeServer:
    """`run(cfg, detail=False)` of a server whose figures are the closed forms above; p99s at
    a load grow with load / capacity and meet the targets up to `meets_up_to` of capacity."""

    def __init__(self, meets_up_to: float = 1.0) -> None:
        self.meets_up_to, self.calls = meets_up_to, 0

    def __call__(self, cfg, detail=False):
        self.calls += 1
        llm, serve = cfg.llm, cfg.serve
        c = _capacity(cfg.hardware, cfg.software, llm["tp"], llm["pp"], serve["max_batch"])
        util = serve["rate_per_s"] / (c * self.meets_up_to)
        record = {
            "workload": {"params": 1e9, "active_params": 1e9, "weight_precision": "fp16",
                         "prompt_tokens": 512, "output_tokens": 128},
            "hardware": {"compute_precision": "fp16"},
            "memory": {"fits": True, "capacity_bytes": 80e9},
            "max_rate_meeting_slo_per_s": c,
            "cost": {"usd_per_device_hour": device_price(HW[cfg.hardware]).usd_per_device_hour},
            "ttft_p99_s": 0.9 * TTFT_MS * 1e-3 * util, "tpot_p99_s": 0.9 * TPOT_MS * 1e-3 * util,
            "bottleneck": "memory"}
        return SimpleNamespace(record=record)


def _plan(server: FakeServer, objective: str = "cost", **kw):
    return make_serving_plan("llama-3.1-8b", list(HW), SW, ["fp16"], TPS, PPS, CAPS, RATE,
                             512, 128, TTFT_MS, TPOT_MS, objective, run=server, **kw)


def _exhaustive_cost() -> float:
    """The naive answer: every configuration's replicas and rent, the cheapest."""
    best = math.inf
    for hw, sw, tp, pp, cap in itertools.product(HW, SW, TPS, PPS, CAPS):
        replicas = math.ceil(RATE / _capacity(hw, sw, tp, pp, cap))
        best = min(best, replicas * tp * pp * device_price(HW[hw]).usd_per_device_hour)
    return best


def test_cost_plan_equals_the_exhaustive_answer_with_fewer_runs():
    server = FakeServer()
    plan = _plan(server)
    grid = len(HW) * len(SW) * len(TPS) * len(PPS) * len(CAPS)
    assert len(plan.rows) == grid
    assert plan.best[0]["usd_per_hour"] == pytest.approx(_exhaustive_cost())
    assert server.calls == plan.simulated < 0.6 * grid  # verifying runs included
    for row in plan.rows:
        if row["status"] in ("searched", "simulated") and row["served_rate_per_s"] is None:
            assert row["replicas"] == math.ceil(RATE / row["capacity_per_replica_per_s"])


@pytest.mark.parametrize("objective, key", [("tokens-per-dollar", "tokens_per_usd"),
                                            ("throughput", "tokens_per_s_per_gpu")])
def test_capacity_objectives_equal_the_exhaustive_answer(objective, key):
    plan = _plan(FakeServer(), objective)
    price = {hw: device_price(d).usd_per_device_hour for hw, d in HW.items()}
    best = max(_capacity(hw, sw, tp, pp, cap) * 128 / (tp * pp)
               / (price[hw] / 3600.0 if key == "tokens_per_usd" else 1.0)
               for hw, sw, tp, pp, cap in itertools.product(HW, SW, TPS, PPS, CAPS))
    assert plan.best[0][key] == pytest.approx(best)


def test_a_miss_at_its_own_load_adds_a_replica():
    # served, p99 = 0.9 x target x load / (0.8 x capacity): met up to 0.8 / 0.9 of capacity
    plan = _plan(FakeServer(meets_up_to=0.8))
    served = [r for r in plan.rows if r["status"] == "simulated"]
    assert served and any(r["replicas"] > math.ceil(RATE / r["capacity_per_replica_per_s"])
                          for r in served)
    for row in served:
        c = row["capacity_per_replica_per_s"]
        need = math.ceil(RATE / c)
        while RATE / need > 0.8 / 0.9 * c:
            need += 1
        if need - math.ceil(RATE / c) <= 2:  # within the plan's retries
            assert row["replicas"] == need and row["violates"] is None
            assert row["ttft_p99_s"] <= TTFT_MS * 1e-3
            assert row["tpot_p99_s"] <= TPOT_MS * 1e-3


def test_cost_limit_and_splits_the_system_cannot_hold():
    plan = _plan(FakeServer(), max_usd_per_hour=1.0)  # below any one GPU's rent
    assert plan.best == []
    wide = make_serving_plan("llama-3.1-8b", ["dgx-h100"], ["vllm"], ["fp16"], [8], [2], [64],
                             RATE, 512, 128, TTFT_MS, None, "cost", run=FakeServer())
    assert wide.simulated == 0 and wide.rows[0]["reason"].startswith("tp x pp above")


def test_the_tpot_bound_prunes_unsimulated_caps():
    # llama-3.1-8b's 16 GB of fp16 weights read once a token on one L4 (300 GB/s) > 5 ms
    plan = make_serving_plan("llama-3.1-8b", ["l4"], ["vllm"], ["fp16"], [1], [1], [8, 16, 32],
                             2.0, 128, 16, None, 5.0, "cost", requests=50)
    assert plan.simulated == 0 and plan.best == []
    assert all("above the TPOT target" in r["reason"] for r in plan.rows)


def test_bad_input(capsys):
    with pytest.raises(AccelsimError, match="needs a target"):
        make_serving_plan("llama-3.1-8b", ["dgx-h100"], ["vllm"], ["fp16"], [1], [1], [8],
                          1.0, 128, 16, None, None, "cost")
    for rate in (0.0, float("nan"), float("inf")):
        with pytest.raises(AccelsimError, match="offered load"):
            make_serving_plan("llama-3.1-8b", ["dgx-h100"], ["vllm"], ["fp16"], [1], [1], [8],
                              rate, 128, 16, 500, None, "cost")
    with pytest.raises(AccelsimError, match="objective"):
        make_serving_plan("llama-3.1-8b", ["dgx-h100"], ["vllm"], ["fp16"], [1], [1], [8],
                          1.0, 128, 16, 500, None, "samples-per-dollar")
    for args, says in (
            (["llama-3.1-8b", "--hw", "h100", "--minimize", "cost", "--ttft-ms", "500"], "--rate"),
            (["llama-3.1-8b", "--hw", "h100", "--minimize", "cost", "--rate", "2",
              "--ttft-ms", "500", "--batch", "4"], "--batch is read by an inference plan"),
            (["resnet50", "--hw", "h100", "--maximize", "throughput", "--rate", "5"],
             "--rate is read by a decoder's serving plan"),
            (["llama-3.1-8b", "--hw", "h100", "--maximize", "samples-per-dollar", "--rate",
              "2", "--ttft-ms", "500"], "tokens-per-dollar")):
        assert says in one_line_error(capsys, "plan", *args)
