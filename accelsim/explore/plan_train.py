"""Plan a training run (issue 25): the best system, node count, devices per node, batch and
precision for an objective (time to train, the run's cost or energy, throughput, samples per
dollar or per joule) under a deadline, a rent and power limit and an AU floor.

    plan = make_train_plan("resnet50-train", ["dgx-h100", "hgx-h200"], batches=[128, 256],
                           precisions=["bf16"], devices=[8], nodes=[1, 2, 4, 8],
                           objective="cost", epochs=90, limits=TrainLimits(deadline_s=86400))
    plan.best, plan.front, plan.simulated, plan.pruned

Search: each (system, precision, batch) is costed once on the device alone (unsimulated): a
format the device lacks or a batch that does not fit rules out every node and device count of
it. The same estimate bounds the rest: a step is never faster than its compute, so N nodes of
k devices train at most N k batch / (forward + backward + optimizer) samples/s (NB: the
pipeline only adds stalls, communication and the slowest device's lag, never removes
compute); that bounds the time to train from below, the run's rent (rent per hour x time)
from below and throughput from above. Rows whose bound misses the deadline, or whose rent per
hour is over the limit, are pruned unsimulated; the rest are simulated best bound first
(`steps` steps each, the throughput of a whole epoch taken from them, NB) until the next bound
cannot beat the `top`-th best simulated row (branch and bound: the answer is the full grid's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any

from accelsim.arguments import (
    keywords,
    name_or_path,
    names_or_paths,
    positive,
    whole_number,
    whole_numbers,
)
from accelsim.devices.estimate import estimate
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.explore.evaluate import Evaluator, Failure, resumed_notes
from accelsim.explore.plan import Plan
from accelsim.numbers import shown
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.hardware import host_cpu, resolve_hardware
from accelsim.profiles.prices import device_price
from accelsim.run import run_simulation
from accelsim.sim.knob_table import KNOBS
from accelsim.workload.scenario import resolve_workload

# objective -> (the row's figure, larger is better)
TRAIN_OBJECTIVES: dict[str, tuple[str, bool]] = {
    "time-to-train": ("time_to_train_s", False),
    "cost": ("usd_per_run", False),
    "energy": ("energy_j_per_run", False),
    "throughput": ("throughput_samples_per_s", True),
    "samples-per-dollar": ("samples_per_usd", True),
    "samples-per-joule": ("samples_per_j", True),
}
DEFAULT_STEPS = 30


class TrainPlan(Plan):
    """A `Plan` whose front is time to train against the run's cost: the rows no other beats
    on both (its rent where every row has a price, else its energy)."""

    @property
    def cost_key(self) -> str:
        rows = self.feasible
        if rows and all(r["usd_per_run"] is not None for r in rows):
            return "usd_per_run"
        return "energy_j_per_run"

    @property
    def front(self) -> list[dict[str, Any]]:
        y = self.cost_key
        return train_front([r for r in self.feasible if r[y] is not None], y)


def train_front(rows: list[dict[str, Any]], y: str) -> list[dict[str, Any]]:
    """Rows no other row beats on both time to train and `y` (sooner and no dearer, or no later
    and cheaper), by time."""
    def beats(a: dict[str, Any], b: dict[str, Any]) -> bool:
        ta, tb, ya, yb = a["time_to_train_s"], b["time_to_train_s"], a[y], b[y]
        return ta <= tb and ya <= yb and (ta < tb or ya < yb)

    front = [r for r in rows if not any(beats(o, r) for o in rows)]
    return sorted(front, key=lambda r: (r["time_to_train_s"], r["order"]))


@dataclass(frozen=True)
class TrainLimits:
    """What a training configuration must meet (None: no limit)."""

    deadline_s: float | None = None
    max_usd_per_hour: float | None = None
    max_power_w: float | None = None
    min_au: float | None = None

    def __post_init__(self) -> None:
        for name in ("deadline_s", "max_usd_per_hour", "max_power_w"):
            positive(getattr(self, name), name, optional=True)
        au = self.min_au
        if au is not None and (positive(au, "min_au") or 0.0) > 1.0:
            raise AccelsimError(f"min_au = {shown(au)}: a share from 0 to 1")

    def binding(self, row: dict[str, Any]) -> tuple[str | None, str | None]:
        """(the first limit `row` breaks, else the one it is nearest to as a share)."""
        au = row["au"]
        checks = [("deadline", row["time_to_train_s"], self.deadline_s),
                  ("cost per hour", row["usd_per_hour"], self.max_usd_per_hour),
                  ("power", row["power_w"], self.max_power_w),
                  # an AU floor as a ceiling on the time the devices wait: 1 - AU <= 1 - min
                  ("AU", None if au is None else 1.0 - au,
                   None if self.min_au is None else 1.0 - self.min_au)]
        shares = []
        for name, value, limit in checks:
            if limit is None:
                continue
            if value is None:
                return name, None
            if value > limit + 1e-12:
                return name, None
            shares.append((value / limit if limit > 0 else 1.0, name))
        return None, (max(shares)[1] if shares else None)


def make_train_plan(workload: str, systems: Sequence[str], batches: Sequence[int],
                    precisions: Sequence[str], devices: Sequence[int] | None,
                    nodes: Sequence[int],
                    objective: str, epochs: int = 1, limits: TrainLimits | None = None,
                    steps: int = DEFAULT_STEPS, top: int = 5,
                    knobs: dict[str, Any] | None = None,
                    run: Callable[..., Any] = run_simulation, workers: int = 1,
                    resume: str | PathLike[str] | None = None) -> TrainPlan:
    """The training plan (see the module docstring); `devices` per node (None: each system's
    every accelerator). `workers` > 1 simulates that many configurations at a time, in
    processes; `resume` (an SQLite path) keeps every simulated record and reads back those
    already there (`accelsim.explore.evaluate`). Bad input raises `AccelsimError`."""
    if not isinstance(objective, str) or objective not in TRAIN_OBJECTIVES:
        raise AccelsimError(f"objective {shown(objective)} for a training plan: choose one of "
                            f"{', '.join(TRAIN_OBJECTIVES)}")
    workload = name_or_path(workload, "workload", "a training scenario name")
    systems = names_or_paths(systems, "systems", "system or device names or paths")
    batches = whole_numbers(batches, "batches", 1, KNOBS["batch"].high)
    precisions = names_or_paths(precisions, "precisions", "format names")
    if devices is not None:
        devices = whole_numbers(devices, "devices", 1, KNOBS["devices"].high)
    nodes = whole_numbers(nodes, "nodes", 1, KNOBS["nodes"].high)
    epochs = whole_number(epochs, "epochs", 1, KNOBS["epochs"].high)
    steps = whole_number(steps, "steps", 2, KNOBS["steps"].high)
    top = whole_number(top, "top", 1)
    knobs = keywords(knobs, "knobs", ("mode", "batch", "precision", "devices", "nodes",
                                      "steps"))
    if not isinstance(limits, TrainLimits | None):
        raise AccelsimError(f"limits: give a TrainLimits, not {shown(limits)}")
    sc = resolve_workload(workload)
    if sc.mode != "train":
        raise AccelsimError(f"{workload} is a {sc.mode} workload: a training plan needs a "
                            "training scenario (such as resnet50-train)")
    limits = limits or TrainLimits()
    plan = TrainPlan([], objective, objectives=TRAIN_OBJECTIVES)
    key, up = TRAIN_OBJECTIVES[objective]
    candidates = []
    for hw in systems:
        system, profile = resolve_hardware(hw)
        samples = epochs * _dataset(sc, system).sample_count
        price = device_price(profile.name)
        for precision in precisions:
            for batch in sorted(set(batches)):
                bound = _device_bound(sc, system, profile, batch, precision)
                for k in devices or [system.device_count]:
                    for n in nodes:
                        row = _blank(hw, precision, batch, k, n, len(plan.rows))
                        plan.rows.append(row)
                        why = _refused(system, bound, k, n)
                        if why:
                            row.update(status="infeasible", reason=why)
                            continue
                        ub = n * k * batch / bound
                        usd_h = None if price is None else price.usd_per_device_hour * n * k
                        row.update(bound_throughput=ub, bound_time_s=samples / ub,
                                   usd_per_hour=usd_h)
                        cut = _cut(row, limits, objective, usd_h)
                        if cut:
                            row.update(status="pruned", reason=cut)
                            continue
                        candidates.append((row, samples))
    ev = Evaluator(run, workers, resume)
    try:
        _branch_and_bound(plan, candidates, workload, key, up, limits, steps, top, knobs, ev)
    finally:
        ev.close()
    plan.simulated, plan.resumed = ev.simulated + ev.resumed, ev.resumed
    plan.notes += resumed_notes(plan, resume)
    for row in plan.rows:
        if row["status"] != "simulated":
            plan.pruned[row["reason"]] = plan.pruned.get(row["reason"], 0) + 1
    return plan


def _dataset(sc: Any, system: Any) -> Any:
    return load_dataset(sc.dataset) if sc.dataset else system.default_dataset


def _device_bound(sc: Any, system: Any, profile: Any, batch: int, precision: str
                  ) -> float | str:
    """One training step's compute on one device, s; or why none can run (a string)."""
    try:
        est = estimate(sc.graph(), profile, batch, precision, "train", "default", sc.optimizer,
                       *host_cpu(system))
    except PrecisionError as err:
        return f"{profile.name} does not run {precision} ({err})"
    if not est.memory["fits"]:
        return (f"batch {batch} does not fit on {profile.name} "
                f"({est.memory['required_bytes'] / 1e9:.3g} GB)")
    return sum(est.phase_time_s(p) for p in ("forward", "backward", "optimizer"))


def _refused(system: Any, bound: float | str, k: int, n: int) -> str | None:
    if isinstance(bound, str):
        return bound
    if k > system.device_count:
        return f"{system.name} has {system.device_count} accelerators, not {k}"
    if n > 1 and (system.network is None or not system.nic_count):
        return f"{system.name} has no NICs to join {n} nodes"
    return None


def _cut(row: dict[str, Any], limits: TrainLimits, objective: str,
         usd_h: float | None) -> str | None:
    """Why `row` is pruned before simulation, if it is."""
    if limits.deadline_s is not None and row["bound_time_s"] > limits.deadline_s:
        return "misses the deadline even at its devices' compute alone"
    if limits.max_usd_per_hour is not None and usd_h is not None \
            and usd_h > limits.max_usd_per_hour:
        return "its rent per hour is over the limit"
    if usd_h is None and (objective in ("cost", "samples-per-dollar")
                          or limits.max_usd_per_hour is not None):
        return "no price for its device (hw_profiles/prices/; give usd_per_device_hour)"
    return None


def _optimistic(row: dict[str, Any], key: str) -> float | None:
    """The best the objective of `row` can be, from its compute bound (None: no bound)."""
    if key == "time_to_train_s":
        return row["bound_time_s"]
    if key == "usd_per_run":
        return row["usd_per_hour"] * row["bound_time_s"] / 3600.0
    if key == "throughput_samples_per_s":
        return row["bound_throughput"]
    if key == "samples_per_usd":
        return row["bound_throughput"] * 3600.0 / row["usd_per_hour"]
    return None  # energy, samples per joule: no cheap bound, every row is simulated


def _branch_and_bound(plan: Plan, candidates: list[tuple[dict[str, Any], int]], workload: str,
                      key: str, up: bool, limits: TrainLimits, steps: int, top: int,
                      knobs: dict[str, Any], ev: Evaluator) -> None:
    """Simulate the candidates best bound first until no bound can beat the `top`-th best,
    `ev.workers` at a time (a wave: the next candidates the rows simulated so far do not
    prune; NB: a wave may simulate a row one at a time would have pruned, never the reverse,
    so the best rows are the same)."""
    def order(item: tuple[dict[str, Any], int]) -> tuple[float, int]:
        b = _optimistic(item[0], key)
        return (math.inf if b is None else (-b if up else b), item[0]["order"])

    def beaten(row: dict[str, Any]) -> bool:
        b = _optimistic(row, key)
        if b is None or len(found) < top:
            return False
        kth = sorted(found, reverse=up)[top - 1]
        return (b <= kth) if up else (b >= kth)

    found: list[float] = []  # the objective of the feasible simulated rows
    queue = sorted(candidates, key=order)
    while queue:
        wave = []
        while queue and len(wave) < ev.workers:
            row, samples = queue.pop(0)
            if beaten(row):
                row.update(status="pruned", reason=f"its bound cannot beat the {top} best "
                           "simulated")
            else:
                wave.append((row, samples))
        outcomes = ev.records([(workload, row["hardware"], {
            "mode": "train", "batch": row["batch"], "precision": row["precision"],
            "devices": row["devices"], "nodes": row["nodes"], "steps": steps, **knobs})
            for row, _ in wave])
        for (row, samples), outcome in zip(wave, outcomes, strict=True):
            _fill(row, samples, outcome)
            if row["status"] == "simulated":
                row["violates"], row["binds"] = limits.binding(row)
                if row["violates"] is None and row[key] is not None:
                    found.append(row[key])


def _fill(row: dict[str, Any], samples: int, rec: dict[str, Any] | Failure) -> None:
    """`row`'s figures from its simulated record (or why it could not run)."""
    if isinstance(rec, Failure):
        row.update(status="infeasible", reason=rec.message.split(":")[0][:120])
        return
    thr = rec["throughput_samples_per_s"]
    cost = rec.get("cost") or {}
    usd_h = cost.get("usd_per_hour", row["usd_per_hour"])
    time_s = samples / thr if thr else None
    power = rec.get("average_power_w")
    row.update(
        status="simulated", reason=None, throughput_samples_per_s=thr, time_to_train_s=time_s,
        usd_per_hour=usd_h,
        usd_per_run=None if usd_h is None or time_s is None else usd_h * time_s / 3600.0,
        energy_j_per_run=(None if rec.get("energy_j_per_sample") is None
                          else rec["energy_j_per_sample"] * samples),
        power_w=power, samples_per_j=None if not power else thr / power,
        samples_per_usd=None if not usd_h else thr * 3600.0 / usd_h,
        au=rec.get("accelerator_utilization"), bottleneck=rec.get("bottleneck"))


def _blank(hw: str, precision: str, batch: int, k: int, n: int, order: int) -> dict[str, Any]:
    return {"hardware": hw, "precision": precision, "batch": batch, "devices": k, "nodes": n,
            "gpus": k * n, "status": "", "reason": None, "order": order,
            "bound_throughput": None, "bound_time_s": None,
            "throughput_samples_per_s": None, "time_to_train_s": None, "usd_per_hour": None,
            "usd_per_run": None, "energy_j_per_run": None, "power_w": None,
            "samples_per_usd": None, "samples_per_j": None, "au": None, "bottleneck": None,
            "violates": None, "binds": None}
