"""Plan, not just predict: the best inference configuration of a workload over devices,
precisions, batches and device counts, under constraints, with its cost (issue 25).

    plan = make_plan("resnet50", ["h100", "t4"], batches=[1, 2, 4, 8], precisions=["fp16"],
                     counts=[1, 2], objective="samples-per-dollar", p99_ms=20)
    plan.best, plan.front, plan.simulated, plan.pruned    # rows (dicts), counts

Search (far fewer simulations than the grid):
- a (device, precision) pair the device cannot run is left out after one refused run;
- a batch whose compute alone, batch x FLOPs per sample at the device's peak (the bound the
  device models are held to), exceeds the latency limit is pruned unsimulated;
- the latency of one batch grows with the batch (NB: assumed, as every device model here
  is monotone in batch; each pair's simulated points are checked for it and the plan says
  where it fails), so the largest batch that meets the limit (and fits) is found by
  bisection; the objective is then followed downward from it while it improves (a
  unimodal objective over feasible batches, NB);
- device counts are independent replicas of the one-device run: throughput, power and rent
  times N, latency and per-sample figures unchanged (NB: no shared host or network), so
  they cost no simulation.
Every configuration of the grid gets a row: simulated, derived (a replica count or a batch
between simulated ones, never chosen unless simulated), pruned or infeasible, with the
reason; the best is the best simulated row, the front the rows no other beats on both the
objective and the cost per hour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from accelsim.arguments import keywords, name_or_path, names_or_paths, positive, whole_numbers
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.explore.compare import device_roof
from accelsim.explore.evaluate import Evaluator, from_spec, resumed_notes
from accelsim.numbers import shown
from accelsim.profiles.hardware import resolve_hardware
from accelsim.run import run_simulation
from accelsim.sim.knobs import KNOBS
from accelsim.workload.scenario import Scenario

# objective name -> (the row's figure, larger is better)
OBJECTIVES: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput_samples_per_s", True),
    "samples-per-dollar": ("samples_per_usd", True),
    "samples-per-joule": ("samples_per_j", True),
    "cost": ("usd_per_1000_samples", False),
    "energy": ("energy_j_per_sample", False),
    "latency": ("latency_s", False),
}


@dataclass(frozen=True)
class Limits:
    """The constraints a configuration must meet (None: none)."""

    p99_s: float | None = None
    max_usd_per_hour: float | None = None
    max_power_w: float | None = None

    def binding(self, row: dict[str, Any]) -> tuple[str | None, str | None]:
        """(the first limit `row` breaks, else the one it is nearest to as a share)."""
        checks = [("p99", row["latency_s"], self.p99_s),
                  ("cost per hour", row["usd_per_hour"], self.max_usd_per_hour),
                  ("power", row["power_w"], self.max_power_w)]
        shares = []
        for name, value, limit in checks:
            if limit is None:
                continue
            if value is None:
                return name, None  # a limit on a figure the run does not have
            if value > limit:
                return name, None
            shares.append((value / limit, name))
        return None, (max(shares)[1] if shares else None)


@dataclass
class Plan:
    rows: list[dict[str, Any]]
    objective: str
    simulated: int = 0  # configurations simulated (those read from a resume store included)
    resumed: int = 0  # of them, read from the resume store
    pruned: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    objectives: dict[str, tuple[str, bool]] = field(default_factory=lambda: OBJECTIVES)
    tiebreak: str | None = None  # a row figure, larger better, ordering rows the objective ties

    @property
    def feasible(self) -> list[dict[str, Any]]:
        key, _ = self.objectives[self.objective]
        return [r for r in self.rows if r["status"] in ("simulated", "replicas", "searched")
                and r["violates"] is None and r[key] is not None]

    @property
    def best(self) -> list[dict[str, Any]]:
        key, up = self.objectives[self.objective]
        return sorted(self.feasible, key=lambda r: (
            -r[key] if up else r[key], -(r[self.tiebreak] or 0.0) if self.tiebreak else 0.0,
            r["order"]))

    def not_chosen(self) -> list[str]:
        """Why the rest were not chosen: the pruned by reason (most first), then the
        simulated that break each limit; one line each."""
        lines = [f"{n:,} {why}" for why, n in sorted(self.pruned.items(),
                                                    key=lambda kv: (-kv[1], kv[0]))]
        broke: dict[str, int] = {}
        for r in self.rows:
            if r.get("violates"):
                broke[r["violates"]] = broke.get(r["violates"], 0) + 1
        return lines + [f"{n:,} simulated break the {what} limit"
                        for what, n in sorted(broke.items())]

    @property
    def front(self) -> list[dict[str, Any]]:
        """Rows no other feasible row beats on the objective at no more cost per hour."""
        key, up = self.objectives[self.objective]
        rows = [r for r in self.feasible if r["usd_per_hour"] is not None]

        def better(a: dict[str, Any], b: dict[str, Any]) -> bool:
            ga, gb = (a[key], b[key]) if up else (-a[key], -b[key])
            return (ga >= gb and a["usd_per_hour"] <= b["usd_per_hour"]
                    and (ga > gb or a["usd_per_hour"] < b["usd_per_hour"]))

        front = [r for r in rows if not any(better(o, r) for o in rows)]
        return sorted(front, key=lambda r: (r["usd_per_hour"], r["order"]))


def _row(hw: str, precision: str, batch: int, count: int, record: dict[str, Any] | None,
         status: str, reason: str | None, order: int) -> dict[str, Any]:
    row: dict[str, Any] = {"hardware": hw, "precision": precision, "batch": batch,
                           "devices": count, "status": status, "reason": reason,
                           "order": order}
    rec = record or {}
    cost = rec.get("cost") or {}
    thr = rec.get("throughput_samples_per_s")
    power = rec.get("average_power_w")
    usd_h = cost.get("usd_per_hour")
    row.update(
        throughput_samples_per_s=None if thr is None else thr * count,
        latency_s=rec.get("latency_s"),
        power_w=None if power is None else power * count,
        energy_j_per_sample=rec.get("energy_j_per_sample"),
        samples_per_j=(None if not power or thr is None else thr / power),
        usd_per_hour=None if usd_h is None else usd_h * count,
        usd_per_1000_samples=cost.get("usd_per_1000_samples"),
        samples_per_usd=(None if not usd_h or thr is None else thr * 3600.0 / usd_h),
        bottleneck=rec.get("bottleneck"))
    return row


def plan_workload(workload: Any) -> str | Scenario:
    """A plan's workload: a `Scenario`, or a name or path as text."""
    if isinstance(workload, Scenario):
        return workload
    return name_or_path(workload, "workload", "a zoo model or scenario name, a file path or "
                        "a Scenario")


def make_plan(workload: str | PathLike[str] | Scenario, hardware: Sequence[str | PathLike[str]],
              batches: Sequence[int],
              precisions: Sequence[str], counts: Sequence[int], objective: str,
              p99_ms: float | None = None, max_usd_per_hour: float | None = None,
              max_power_kw: float | None = None, knobs: dict[str, Any] | None = None,
              run: Callable[..., Any] = run_simulation, workers: int = 1,
              resume: str | PathLike[str] | None = None) -> Plan:
    """The plan (see the module docstring); bad input raises `AccelsimError` of one line
    naming the argument (a workload or hardware may be a `pathlib.Path`). `workers` > 1
    searches the (device, precision) pairs in that many processes; `resume` (an SQLite path)
    keeps every simulated record and reads back those already there
    (`accelsim.explore.evaluate`): the same plan either way."""
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise AccelsimError(f"objective {shown(objective)}: choose one of "
                            f"{', '.join(OBJECTIVES)}")
    workload = plan_workload(workload)
    hardware = names_or_paths(hardware, "hardware", "system or device profile names or paths")
    batches = sorted(set(whole_numbers(batches, "batches", 1, KNOBS["batch"].high)))
    precisions = names_or_paths(precisions, "precisions", "format names")
    counts = whole_numbers(counts, "counts", 1, KNOBS["devices"].high)
    p99_ms, max_usd_per_hour, max_power_kw = (
        positive(p99_ms, "p99_ms", True), positive(max_usd_per_hour, "max_usd_per_hour", True),
        positive(max_power_kw, "max_power_kw", True))
    knobs = keywords(knobs, "knobs", ("mode", "batch", "precision"))
    limits = Limits(None if p99_ms is None else p99_ms * 1e-3, max_usd_per_hour,
                    None if max_power_kw is None else max_power_kw * 1e3)
    plan = Plan([], objective)
    key, up = OBJECTIVES[objective]
    ev = Evaluator(run, workers, resume)
    pairs = [(hw, precision) for hw in hardware for precision in precisions]
    try:
        searched = ev.map(_search_task, [(ev.spec(), workload, hw, precision, batches, limits,
                                          key, up, knobs or {}) for hw, precision in pairs])
    finally:
        ev.close()
    order = 0
    for (hw, precision), (results, notes, simulated, resumed) in zip(pairs, searched,
                                                                      strict=True):
        plan.notes += notes
        plan.simulated += simulated + resumed
        plan.resumed += resumed
        for batch in batches:
            status, reason, record = results[batch]
            for count in counts:
                st = status if status != "simulated" or count == 1 else "replicas"
                row = _row(hw, precision, batch, count, record, st, reason, order)
                order += 1
                violates, nearest = ((None, None) if record is None
                                     else limits.binding(row))
                row["violates"], row["binds"] = violates, nearest
                plan.rows.append(row)
    plan.notes += resumed_notes(plan, resume)
    for row in plan.rows:
        if row["status"] not in ("simulated", "replicas"):
            plan.pruned[row["reason"]] = plan.pruned.get(row["reason"], 0) + 1
    return plan


Searched = tuple[dict[int, tuple[str, str | None, dict | None]], list[str], int, int]


def _search_task(item: tuple[Any, ...]) -> Searched:
    """One (device, precision) searched with its own evaluator (what a worker runs): its
    batches, notes, and records simulated and read from the store."""
    spec, *args = item
    ev = from_spec(spec)
    notes: list[str] = []
    try:
        out = _search(ev, notes, *args)
    finally:
        ev.close()
    return out, notes, ev.simulated, ev.resumed


def _search(ev: Evaluator, notes: list[str], workload: str, hw: str, precision: str,
            batches: list[int], limits: Limits, key: str, up: bool, knobs: dict[str, Any]
            ) -> dict[int, tuple[str, str | None, dict | None]]:
    """Each batch of one (device, precision): (status, reason, record or None)."""
    out: dict[int, tuple[str, str | None, dict | None]] = {}
    records: dict[int, dict[str, Any]] = {}

    def sim(batch: int) -> dict[str, Any] | None:
        if batch not in records:
            records[batch] = ev.record(workload, hw, {"mode": "infer", "batch": batch,
                                                      "precision": precision, **knobs})
        return records[batch]

    def ok(batch: int) -> bool:
        rec = sim(batch)
        lat = rec.get("latency_s")
        return bool(rec["memory"]["fits"]) and (
            limits.p99_s is None or (lat is not None and lat <= limits.p99_s))

    try:
        sim(batches[0])
    except PrecisionError as err:
        return dict.fromkeys(batches, ("pruned", f"{hw} does not run {precision} ({err})",
                                       None))
    # the compute bound: batch x FLOPs per sample at the peak, unsimulated
    allowed = list(batches)
    if limits.p99_s is not None:
        flops = records[batches[0]]["workload"].get("flops_per_sample") or 0.0
        peak = _peak(hw, records[batches[0]])
        for b in batches:
            if peak and b * flops / peak > limits.p99_s and b not in records:
                out[b] = ("pruned", "its compute alone at the device's peak exceeds the p99 "
                          "limit", None)
        allowed = [b for b in batches if b not in out]
    # bisection for the largest batch that fits and meets the limit (latency grows with batch)
    lo, hi = -1, len(allowed)  # ok(allowed[lo]) or lo == -1; not ok(allowed[hi]) or the end
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(allowed[mid]):
            lo = mid
        else:
            hi = mid
    # follow the objective down from the largest feasible batch while it improves
    if lo >= 0:
        i, best = lo, _figure(sim(allowed[lo]), key)
        while i > 0:
            below = _figure(sim(allowed[i - 1]), key)
            if below is None or best is None or not ((below > best) if up else (below < best)):
                break
            i, best = i - 1, below
    lat = [(b, records[b].get("latency_s")) for b in sorted(records)]
    if any(a[1] is not None and c[1] is not None and c[1] < a[1] for a, c in zip(
            lat, lat[1:], strict=False)):
        notes.append(f"{hw} {precision}: latency fell as the batch grew between simulated "
                     "points; the bisection's premise fails there")
    for b in allowed:
        if b in records:
            rec = records[b]
            status = "simulated" if rec["memory"]["fits"] else "infeasible"
            out[b] = (status, None if rec["memory"]["fits"] else "does not fit", rec)
        elif lo < 0 or b > allowed[lo]:
            out[b] = ("pruned", "above the largest batch meeting the limits (latency grows "
                      "with the batch)", None)
        else:
            out[b] = ("pruned", "below a simulated batch with a better objective (unimodal)",
                      None)
    return out


def _figure(record: dict[str, Any], key: str) -> float | None:
    return _row("", "", 0, 1, record, "", None, 0)[key]


def _peak(hw: str, record: dict[str, Any]) -> float | None:
    _, profile = resolve_hardware(hw)
    try:
        return device_roof(profile, record["hardware"]["compute_precision"])[
            "peak_flops_per_s"]
    except (AccelsimError, KeyError):
        return None
