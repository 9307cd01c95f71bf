"""A serving plan for a decoder (issue 25): the cheapest (or the most tokens per dollar)
way to serve an offered load under TTFT and TPOT targets, over GPU systems, serving stacks,
precisions, tensor and pipeline splits and the engine's batch cap.

    plan = make_serving_plan("llama-3.1-8b", ["dgx-h100", "hgx-h200"], ["vllm", "tensorrt-llm"],
                             precisions=["fp16"], tps=[1, 2, 4], pps=[1], caps=[32, 64, 128],
                             rate_per_s=40, prompt_tokens=512, output_tokens=128,
                             slo_ttft_ms=500, slo_tpot_ms=50, objective="cost")
    plan.best[0]["replicas"], plan.best[0]["gpus"], plan.best[0]["usd_per_hour"]

One configuration (system, stack, precision, tp, pp, cap) is one model replica; its capacity
is the highest Poisson rate whose p99 TTFT and p99 TPOT meet the targets
(`accelsim.llm.slo.max_rate_meeting_slo`). The offered load needs
R = ceil(rate / capacity) replicas, R x tp x pp GPUs, at their rent per hour. NB: the load is
split among replicas at random, so each sees a Poisson stream of rate / R exactly (a
thinned Poisson process is Poisson); a router that balances load does better, so R is an
upper bound.

Search (far fewer simulations than the grid):
- unsimulated bounds, from the decoder config's parameter count and the GPU's datasheet: the weights
  per GPU, W / (tp x pp), above the GPU's memory (does not fit); one decode token reads every
  weight of its tensor-parallel group once, so TPOT >= W / (tp x DRAM bandwidth) (the
  pipeline's stages run one after another for one token); one prompt's prefill does
  2 x params x prompt FLOPs over tp GPUs at their peak, so TTFT >= that; a split whose
  bound exceeds its target is pruned;
- the capacity is followed down the caps from the largest while it grows and stops at the
  first fall (NB: assumed unimodal in the cap: a larger cap batches more, each step takes
  longer);
- objective cost: the cheapest replicas are searched first and the best of each split is
  served at its load at once; a split whose one replica rents for more than the cheapest
  served configuration is pruned unsimulated (it cannot be cheaper: it needs one replica at
  least); a system with no price is pruned (no $ figure) unless the objective is throughput;
- the best configurations are then served at their own load (rate / R, the full request
  count); one that misses a target there (the capacity search ran shorter, seeded runs)
  gets one more replica and is served again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any

from accelsim.arguments import keywords, names_or_paths, positive, whole_number, whole_numbers
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.explore.compare import device_roof
from accelsim.explore.evaluate import Evaluator, resumed_notes
from accelsim.explore.plan import Plan, plan_workload
from accelsim.numbers import shown
from accelsim.profiles.hardware import resolve_hardware
from accelsim.profiles.prices import device_price
from accelsim.run import run_simulation
from accelsim.sim.knobs import KNOBS, make_config

# objective name -> (the row's figure, larger is better)
SERVING_OBJECTIVES: dict[str, tuple[str, bool]] = {
    "cost": ("usd_per_hour", False),
    "tokens-per-dollar": ("tokens_per_usd", True),
    "throughput": ("tokens_per_s_per_gpu", True),
}
# requests of each capacity search run, as `simulate`'s own search (accelsim.llm.serve);
# NB: tried 300: short runs end before the queue builds and overstate capacity up to 3x
SEARCH_REQUESTS = 1000
# knobs the plan sets on every run itself (its own arguments)
_PLAN_SETS = ("mode", "rate", "prompt_tokens", "output_tokens", "slo_ttft_ms", "slo_tpot_ms",
              "software", "precision", "tp", "pp", "max_batch", "requests")
VERIFY_TOP = 3  # configurations served at their own load, beside the front
VERIFY_RETRIES = 2  # replicas added at most where the served load misses a target


def make_serving_plan(workload: str | PathLike[str], hardware: Sequence[str | PathLike[str]],
                      software: Sequence[str],
                      precisions: Sequence[str], tps: Sequence[int], pps: Sequence[int],
                      caps: Sequence[int], rate_per_s: float, prompt_tokens: int,
                      output_tokens: int, slo_ttft_ms: float | None,
                      slo_tpot_ms: float | None, objective: str,
                      max_usd_per_hour: float | None = None, requests: int = 2000,
                      knobs: dict[str, Any] | None = None,
                      run: Callable[..., Any] = run_simulation,
                      resume: str | PathLike[str] | None = None) -> Plan:
    """The plan (see the module docstring); bad input raises `AccelsimError` of one line
    naming the argument (a workload or hardware may be a `pathlib.Path`). `resume` (an
    SQLite path) keeps every simulated record and reads back those already there
    (`accelsim.explore.evaluate`; NB: one process: each configuration's search depends on
    the cheapest served before it)."""
    if not isinstance(objective, str) or objective not in SERVING_OBJECTIVES:
        raise AccelsimError(f"objective {shown(objective)} for a serving plan: choose one of "
                            f"{', '.join(SERVING_OBJECTIVES)}")
    if isinstance(rate_per_s, bool) or not isinstance(rate_per_s, int | float) or not (
            rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise AccelsimError(f"rate {shown(rate_per_s)}: the offered load in requests/s, a "
                            "number above 0")
    workload = plan_workload(workload)
    hardware = names_or_paths(hardware, "hardware", "GPU system names or paths")
    software = names_or_paths(software, "software", "serving stack names")
    precisions = names_or_paths(precisions, "precisions", "format names")
    tps = whole_numbers(tps, "tps", 1, KNOBS["tp"].high)
    pps = whole_numbers(pps, "pps", 1, KNOBS["pp"].high)
    caps = whole_numbers(caps, "caps", 1, KNOBS["max_batch"].high)
    prompt_tokens = whole_number(prompt_tokens, "prompt_tokens", 1, KNOBS["prompt_tokens"].high)
    output_tokens = whole_number(output_tokens, "output_tokens", 1, KNOBS["output_tokens"].high)
    requests = whole_number(requests, "requests", 1, KNOBS["requests"].high)
    slo_ttft_ms, slo_tpot_ms, max_usd_per_hour = (
        positive(slo_ttft_ms, "slo_ttft_ms", True), positive(slo_tpot_ms, "slo_tpot_ms", True),
        positive(max_usd_per_hour, "max_usd_per_hour", True))
    knobs = keywords(knobs, "knobs", _PLAN_SETS)
    if slo_ttft_ms is None and slo_tpot_ms is None:
        raise AccelsimError("a serving plan needs a target: --ttft-ms and/or --tpot-ms "
                            "(a replica's capacity is the rate that meets them)")
    plan = Plan([], objective, objectives=SERVING_OBJECTIVES, tiebreak="headroom")
    base = dict(mode="serve", rate=rate_per_s, prompt_tokens=prompt_tokens,
                output_tokens=output_tokens, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
                **(knobs or {}))
    # what every configuration shares (the workload, the knobs) is checked once, here: a
    # bad one is the input's fault, not a configuration to prune
    if make_config(workload, hardware[0], **base).decoder is None:
        raise AccelsimError(f"workload {shown(workload)}: a serving plan needs a decoder config "
                            "(a name of workloads/llm/ or a .json file)")

    ev = Evaluator(run, 1, resume)

    def simulate(hw: str, sw: str, prec: str, tp: int, pp: int, cap: int, rate: float,
                 n: int) -> dict[str, Any]:
        return ev.record(workload, hw, {"software": sw, "precision": prec, "tp": tp,
                                        "pp": pp, "max_batch": cap,
                                        **{**base, "rate": rate, "requests": n}})

    def describe(hw: str, sw: str, prec: str, tp: int, pp: int) -> tuple[Any, str]:
        """(the decoder's config, its weights' format), unsimulated."""
        cfg = make_config(workload, hw, software=sw, precision=prec, tp=tp, pp=pp, **base)
        return cfg.decoder, cfg.llm.get("weight_precision") or prec

    splits = [(hw, sw, prec, tp, pp) for hw in hardware for sw in software
              for prec in precisions for tp in sorted(set(tps)) for pp in sorted(set(pps))]
    rent = {s: _rent_per_replica(s[0], s[3] * s[4], (knobs or {})) for s in splits}
    incumbent = math.inf  # the cheapest served configuration so far (objective cost)
    try:
        # the cheapest replicas first, so that the incumbent prunes early
        for split in sorted(splits, key=lambda s: (rent[s] is None, rent[s] or 0.0)):
            if objective != "throughput" and rent[split] is None:
                for cap in sorted(set(caps)):
                    plan.rows.append(_row(*split, cap, "pruned", (
                        "no price for its device (hw_profiles/prices/; or --usd-per-device-hour)"),
                        None, rate_per_s, 0))
                continue
            if objective == "cost" and rent[split] > incumbent:
                for cap in sorted(set(caps)):
                    plan.rows.append(_row(*split, cap, "pruned", (
                        "one replica's rent alone is above the cheapest configuration served"),
                        None, rate_per_s, 0))
                continue
            mine = _split(plan, simulate, describe, *split, sorted(set(caps)), rate_per_s,
                          prompt_tokens, slo_ttft_ms, slo_tpot_ms)
            if objective == "cost":
                best = min((r for r in mine if r["status"] == "searched"
                            and r["usd_per_hour"] is not None and r["usd_per_hour"] < incumbent),
                           key=lambda r: r["usd_per_hour"], default=None)
                if best is not None:
                    _serve_at_load(best, simulate, rate_per_s, requests, slo_ttft_ms, slo_tpot_ms,
                                   max_usd_per_hour)
                    if best["violates"] is None:
                        incumbent = min(incumbent, best["usd_per_hour"])
        position = {(*s, c): i for i, (s, c) in enumerate(
            (s, c) for s in splits for c in sorted(set(caps)))}
        plan.rows.sort(key=lambda r: position[(r["hardware"], r["software"], r["precision"],
                                               r["tp"], r["pp"], r["max_batch"])])
        for i, row in enumerate(plan.rows):
            row["order"] = i
        _verify(plan, simulate, rate_per_s, requests, slo_ttft_ms, slo_tpot_ms,
                max_usd_per_hour)
    finally:
        ev.close()
    plan.simulated, plan.resumed = ev.simulated + ev.resumed, ev.resumed
    plan.notes += resumed_notes(plan, resume)
    for row in plan.rows:
        if row["status"] not in ("simulated", "searched"):
            plan.pruned[row["reason"]] = plan.pruned.get(row["reason"], 0) + 1
    return plan


def _rent_per_replica(hw: str, gpus: int, knobs: dict[str, Any]) -> float | None:
    """$ an hour of one replica's GPUs (the run's --usd-per-device-hour, else the built-in
    price of the system's device), None where no price is known."""
    each = knobs.get("usd_per_device_hour")
    if each is None:
        _, profile = resolve_hardware(hw)
        price = device_price(profile.name)
        each = None if price is None else price.usd_per_device_hour
    return None if each is None else gpus * float(each)


def _split(plan: Plan, simulate: Callable[..., dict[str, Any]],
           describe: Callable[..., tuple[Any, str]], hw: str, sw: str, prec: str, tp: int,
           pp: int, caps: list[int], rate_per_s: float, prompt_tokens: int,
           slo_ttft_ms: float | None, slo_tpot_ms: float | None) -> list[dict[str, Any]]:
    """The rows of one (system, stack, precision, tp, pp) over the caps, searched from the
    largest cap downward while the capacity grows."""
    rows: list[dict[str, Any]] = []

    def add(cap: int, status: str, reason: str | None, rec: dict[str, Any] | None) -> None:
        rows.append(_row(hw, sw, prec, tp, pp, cap, status, reason, rec, rate_per_s, 0))

    todo = sorted(caps, reverse=True)
    system, _ = resolve_hardware(hw)
    if tp * pp > system.device_count:
        for cap in todo:
            add(cap, "pruned", f"tp x pp above the system's {system.device_count} GPUs", None)
        plan.rows.extend(rows)
        return rows
    first, bound = None, None
    try:
        decoder, weights = describe(hw, sw, prec, tp, pp)
        bound = _bound(hw, prec, tp, pp, decoder.params, decoder.active_params, weights,
                       prompt_tokens, slo_ttft_ms, slo_tpot_ms)
        first = None if bound else simulate(hw, sw, prec, tp, pp, todo[0], rate_per_s,
                                            SEARCH_REQUESTS)
    except PrecisionError as err:
        bound = f"{hw} does not run {prec} ({err})"
    except AccelsimError as err:  # a split the system cannot hold, a stack it lacks
        bound = str(err).split(";")[0][:120]
    if first is None or not first["memory"]["fits"]:
        why = bound or "does not fit"
        if first is not None:
            add(todo[0], "infeasible", why, first)
        for cap in todo[0 if first is None else 1:]:
            add(cap, "pruned", why if bound else "a larger cap did not fit (nor its weights)",
                None)
        plan.rows.extend(rows)
        return rows
    best_rate, stopped_at, rec = -1.0, None, first
    for i, cap in enumerate(todo):
        if stopped_at is not None:
            add(cap, "pruned", stopped_at, None)
            continue
        if i > 0:
            rec = simulate(hw, sw, prec, tp, pp, cap, rate_per_s, SEARCH_REQUESTS)
        capacity = rec.get("max_rate_meeting_slo_per_s")
        if capacity is None:
            add(cap, "infeasible", "no rate meets the targets", rec)
        else:
            add(cap, "searched", None, rec)
        if capacity is not None and capacity < best_rate:
            stopped_at = "below a cap whose capacity was higher (unimodal in the cap)"
        best_rate = max(best_rate, capacity or -1.0)
    plan.rows.extend(rows)
    return rows


def _bound(hw: str, prec: str, tp: int, pp: int, params: float, active_params: float,
           weights: str, prompt_tokens: int, slo_ttft_ms: float | None,
           slo_tpot_ms: float | None) -> str | None:
    """The reason the split cannot fit or meet its targets by the closed-form bounds (from
    the decoder's parameter count and the GPU's datasheet), else None."""
    from accelsim.llm.costs import weight_bytes_per_param

    _, profile = resolve_hardware(hw)
    weight_bytes = params * weight_bytes_per_param(weights)
    mem = profile.offchip_memory
    if mem is not None and weight_bytes / (tp * pp) > mem.capacity_bytes:
        return "its weights alone exceed the GPUs' memory"
    try:
        roof = device_roof(profile, prec)
    except AccelsimError:
        return None  # the run says what it cannot do
    if slo_tpot_ms is not None:
        tpot_floor_s = weight_bytes / (tp * roof["bandwidth_bytes_per_s"])
        if tpot_floor_s > slo_tpot_ms * 1e-3:
            return (f"reading its weights once a token takes {tpot_floor_s * 1e3:.3g} ms, above "
                    "the TPOT target")
    if slo_ttft_ms is not None:
        prefill_floor_s = 2.0 * active_params * prompt_tokens / (tp * roof["peak_flops_per_s"])
        if prefill_floor_s > slo_ttft_ms * 1e-3:
            return (f"one prompt's prefill at peak takes {prefill_floor_s * 1e3:.3g} ms, above "
                    "the TTFT target")
    return None


def _row(hw: str, sw: str, prec: str, tp: int, pp: int, cap: int, status: str,
         reason: str | None, rec: dict[str, Any] | None, rate_per_s: float,
         order: int) -> dict[str, Any]:
    row: dict[str, Any] = {"hardware": hw, "software": sw, "precision": prec, "tp": tp,
                           "pp": pp, "max_batch": cap, "status": status, "reason": reason,
                           "order": order, "violates": None, "binds": None,
                           "ttft_p99_s": None, "tpot_p99_s": None, "served_rate_per_s": None}
    rec = rec or {}
    capacity = rec.get("max_rate_meeting_slo_per_s") if status == "searched" else None
    cost = rec.get("cost") or {}
    usd_gpu_h = cost.get("usd_per_device_hour")
    gpus_per_replica = tp * pp
    replicas = None if not capacity else max(math.ceil(rate_per_s / capacity - 1e-9), 1)
    out_tokens = (rec.get("workload") or {}).get("output_tokens")
    # NB: the tokens a request returns at capacity taken as the configured output length
    tokens_s = None if not capacity or not out_tokens else capacity * out_tokens
    row.update(capacity_per_replica_per_s=capacity, replicas=replicas,
               gpus=None if replicas is None else replicas * gpus_per_replica,
               tokens_per_s_per_gpu=None if tokens_s is None else tokens_s / gpus_per_replica,
               usd_per_hour=(None if replicas is None or usd_gpu_h is None
                             else replicas * gpus_per_replica * usd_gpu_h),
               tokens_per_usd=(None if tokens_s is None or not usd_gpu_h
                               else tokens_s * 3600.0 / (gpus_per_replica * usd_gpu_h)),
               headroom=None if replicas is None else replicas * capacity / rate_per_s,
               bottleneck=rec.get("bottleneck"))
    return row


def _verify(plan: Plan, simulate: Callable[..., dict[str, Any]], rate_per_s: float,
            requests: int, slo_ttft_ms: float | None, slo_tpot_ms: float | None,
            max_usd_per_hour: float | None) -> None:
    """Serve the best configurations and the front at their own load; apply the cost
    limit; name what binds each served configuration."""
    for row in plan.rows:
        if (max_usd_per_hour is not None and row["usd_per_hour"] is not None
                and row["usd_per_hour"] > max_usd_per_hour):
            row["violates"] = "cost per hour"
    while True:
        todo = [r for r in plan.best[:VERIFY_TOP] + plan.front if r["status"] != "simulated"]
        if not todo:
            return
        for row in todo:
            _serve_at_load(row, simulate, rate_per_s, requests, slo_ttft_ms, slo_tpot_ms,
                           max_usd_per_hour)


def _serve_at_load(row: dict[str, Any], simulate: Callable[..., dict[str, Any]],
                   rate_per_s: float, requests: int, slo_ttft_ms: float | None,
                   slo_tpot_ms: float | None, max_usd_per_hour: float | None) -> None:
    usd_replica_h = (None if row["usd_per_hour"] is None
                     else row["usd_per_hour"] / row["replicas"])
    for attempt in range(VERIFY_RETRIES + 1):
        load = rate_per_s / row["replicas"]
        rec = simulate(row["hardware"], row["software"], row["precision"], row["tp"],
                       row["pp"], row["max_batch"], load, requests)
        ttft, tpot = rec.get("ttft_p99_s"), rec.get("tpot_p99_s")
        misses = [name for name, value, slo in (("TTFT", ttft, slo_ttft_ms),
                                                ("TPOT", tpot, slo_tpot_ms))
                  if slo is not None and value is not None and value > slo * 1e-3]
        row.update(ttft_p99_s=ttft, tpot_p99_s=tpot, served_rate_per_s=load,
                   status="simulated")
        if not misses:
            break
        if attempt == VERIFY_RETRIES:
            row["violates"] = " and ".join(misses)
            return
        row["replicas"] += 1
        row["gpus"] = row["replicas"] * row["tp"] * row["pp"]
        row["headroom"] = row["replicas"] * row["capacity_per_replica_per_s"] / rate_per_s
        if usd_replica_h is not None:
            row["usd_per_hour"] = usd_replica_h * row["replicas"]
    if (max_usd_per_hour is not None and row["usd_per_hour"] is not None
            and row["usd_per_hour"] > max_usd_per_hour):
        row["violates"] = "cost per hour"
        return
    limits = (("TTFT", row["ttft_p99_s"], None if slo_ttft_ms is None else slo_ttft_ms * 1e-3),
              ("TPOT", row["tpot_p99_s"], None if slo_tpot_ms is None else slo_tpot_ms * 1e-3),
              ("cost per hour", row["usd_per_hour"], max_usd_per_hour))
    shares = [(value / limit, name) for name, value, limit in limits
              if limit is not None and value is not None]
    row["binds"] = max(shares)[1] if shares else None
