"""What a served run achieved against its targets: latency percentiles, throughput and goodput
(`serving_figures`), whether p99 TTFT and TPOT meet the targets (`meets_slo`; with no TTFT
target, also whether the server keeps up: `meets_targets`), and the highest Poisson rate that
does (`max_rate_meeting_slo`, searched with shorter runs).

    figures = serving_figures(req, out, slo_ttft_s=0.5, slo_tpot_s=0.05)
    best = max_rate_meeting_slo(trial, 10.0, 0.5, 0.05)     # trial(rate) -> (req, out)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from accelsim.llm.engine import Outcome, Requests

# The search for the highest rate meeting the p99 targets: requests per trial (at most the
# run's) and bisection steps (each halves the log-rate interval: 7 from a factor 2 leave 0.5%).
SEARCH_REQUESTS = 1000
SEARCH_STEPS = 7
SEARCH_DOUBLINGS = 16


def _percentiles(values: np.ndarray, name: str) -> dict[str, float | None]:
    ok = values[np.isfinite(values)]
    keys = (50, 90, 99)
    if len(ok) == 0:
        return {f"{name}_p{q}_s": None for q in keys} | {f"{name}_mean_s": None}
    out = {f"{name}_p{q}_s": float(np.percentile(ok, q)) for q in keys}
    return out | {f"{name}_mean_s": float(ok.mean())}


def serving_figures(req: Requests, out: Outcome, slo_ttft_s: float | None,
                    slo_tpot_s: float | None) -> dict[str, Any]:
    """Percentiles, throughput and goodput of one run."""
    ttft = out.first_s - req.arrival_s
    later = req.output - 1
    tpot = np.where(later > 0, (out.last_s - out.first_s) / np.maximum(later, 1), np.nan)
    latency = out.done_s - req.arrival_s
    makespan = float(np.nanmax(out.done_s))
    good = np.ones(len(ttft), dtype=bool)
    if slo_ttft_s is not None:
        good &= ttft <= slo_ttft_s
    if slo_tpot_s is not None:
        good &= ~(tpot > slo_tpot_s)  # a one-token request has no TPOT to miss
    decode_steps = out.steps - out.prefill_steps
    figures = {**_percentiles(ttft, "ttft"), **_percentiles(tpot, "tpot"),
               **_percentiles(latency, "latency")}
    figures["latency_p95_s"] = float(np.percentile(latency, 95))
    figures.update(
        run_time_s=makespan, requests=len(ttft),
        requests_per_s=len(ttft) / makespan,
        tokens_per_s=float(req.output.sum()) / makespan,
        goodput_requests_per_s=float(good.sum()) / makespan, slo_met_fraction=float(good.mean()),
        slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
        batch_size_mean=out.batch_sum / decode_steps if decode_steps else 0.0,
        engine_steps=out.steps, prefill_steps=out.prefill_steps, preemptions=out.preemptions,
        engine_busy_fraction=out.busy_s / makespan, kv_blocks_peak=out.peak_blocks)
    return figures



def meets_slo(req: Requests, out: Outcome, slo_ttft_s: float | None,
              slo_tpot_s: float | None) -> bool:
    """p99 TTFT and p99 TPOT within their targets (MLPerf Inference's LLM server rule)."""
    f = serving_figures(req, out, slo_ttft_s, slo_tpot_s)
    ok = slo_ttft_s is None or f["ttft_p99_s"] <= slo_ttft_s
    return ok and (slo_tpot_s is None or f["tpot_p99_s"] is None or
                   f["tpot_p99_s"] <= slo_tpot_s)


# NB: a server keeps up when it finishes its requests at this share of their arrival rate or
# more (a finite run's last requests finish after the last arrival, so not 1)
KEEPS_UP_SHARE = 0.9


def keeps_up(req: Requests, out: Outcome) -> bool:
    """Whether the engine served requests about as fast as they arrived: over the run, the
    rate they were finished at is at least `KEEPS_UP_SHARE` of the rate they arrived at."""
    arrived = req.arrival_s[np.isfinite(req.arrival_s)]
    if len(arrived) < 2:
        return True
    offered_s = float(arrived.max() - arrived.min())
    served_s = float(out.done_s.max() - arrived.min())
    return served_s <= 0 or offered_s / served_s >= KEEPS_UP_SHARE


def meets_targets(req: Requests, out: Outcome, slo_ttft_s: float | None,
                  slo_tpot_s: float | None) -> bool:
    """`meets_slo`, and, with no TTFT target, `keeps_up`: a TPOT target alone is met by an
    overloaded server (its batch stays at the cap while the queue grows without bound), which
    serves no such rate."""
    return meets_slo(req, out, slo_ttft_s, slo_tpot_s) and (
        slo_ttft_s is not None or keeps_up(req, out))


def max_rate_meeting_slo(run_at: Callable[[float], tuple[Requests, Outcome]],
                         rate_per_s: float, slo_ttft_s: float | None,
                         slo_tpot_s: float | None, meets_at_rate: bool | None = None
                         ) -> float | None:
    """The highest Poisson rate whose p99 TTFT and TPOT meet the targets (`meets_targets`: a
    server that falls behind meets no TPOT-only target): from `rate_per_s`
    (whose verdict `meets_at_rate` may be known from a longer run), doubling or halving to
    bracket it, then bisecting the log rate (`SEARCH_STEPS`). None when not even a 2^-16
    fraction of the rate meets them. NB: each trial is one seeded run of `SEARCH_REQUESTS`
    requests, so the answer carries that sample's noise."""
    def ok(rate: float) -> bool:
        req, out = run_at(rate)
        return meets_targets(req, out, slo_ttft_s, slo_tpot_s)

    lo = hi = rate_per_s
    if ok(rate_per_s) if meets_at_rate is None else meets_at_rate:
        for _ in range(SEARCH_DOUBLINGS):
            hi *= 2
            if not ok(hi):
                break
            lo = hi
        else:
            return lo
    else:
        for _ in range(SEARCH_DOUBLINGS):
            lo /= 2
            if ok(lo):
                break
            hi = lo
        else:
            return None
    for _ in range(SEARCH_STEPS):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
