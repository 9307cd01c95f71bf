"""Simulate training: `simulate_training(TrainConfig) -> TrainResult`.

    res = simulate_training(TrainConfig(resolve_workload("resnet50-train"),
                                        load_system("dgx-a100"), epochs=1))
    res.throughput_samples_per_s, res.accelerator_utilization, res.bottleneck
    res["stalls"], res.to_dict()     # JSON-ready; res.records is the DataFrame

Steps: validate the config (`accelsim.sim.config`), cost one training step per accelerator
batch size with the device cost model, time the all-reduce (`accelsim.interconnect.
collectives`), plan the reads (`accelsim.sim.readplan`), run the SimPy model
(`accelsim.sim.train`) and reduce its records to metrics (`accelsim.results.metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

from accelsim.devices.estimate import DeviceEstimate, estimate, power_limits_w
from accelsim.devices.invariants import check_training
from accelsim.errors import AccelsimError
from accelsim.interconnect.collectives import (
    allreduce_wire_bytes,
    is_scale_up,
    link_allreduce_time_s,
)
from accelsim.results import metrics
from accelsim.sim.config import TrainConfig, TrainPlan, resolve_config
from accelsim.sim.readplan import read_plan
from accelsim.sim.train import PhaseCost, StepCosts, TrainModel, resource_names

PHASES = ("forward", "backward", "optimizer")


@dataclass
class TrainResult:
    """The outcome of one training simulation; dict-like over its JSON fields."""

    scenario: str
    system: str
    device: str
    devices: int
    dataset: str
    storage: str
    global_batch: int
    steps: int
    samples: int
    run_time_s: float
    throughput_samples_per_s: float
    step_time_s: float  # mean over steps after the first
    compute_time_per_step_s: float  # forward + backward + optimizer at the full batch
    allreduce_time_s: float  # one all-reduce, closed form
    allreduce_algorithm: str
    comm_link: str | None
    comm_scale_up: bool | None
    comm_to_compute_ratio: float
    utilization: dict[str, float]
    stalls: dict[str, dict[str, float]]
    accelerator_utilization: float
    au_target: float
    meets_au_target: bool
    energy_breakdown_j: dict[str, float]
    bottleneck: str
    bottleneck_detail: str
    notes: list[str] = field(default_factory=list)
    records: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Every field but `records`, JSON-ready."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "records"}

    def keys(self) -> list[str]:
        return list(self.to_dict())

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys() and key != "records":
            raise KeyError(key)
        return getattr(self, key)


def _estimate(plan: TrainPlan, batch: int) -> DeviceEstimate:
    sc = plan.scenario
    try:
        return estimate(sc.graph(), plan.device_profile, batch, sc.precision, "train",
                        plan.software, sc.optimizer)
    except ImportError as err:
        raise AccelsimError(f"no usable cost model for device '{plan.device_profile.name}' "
                            f"(class {plan.device_profile.device_class}): {err}") from None


def _phase_cost(est: DeviceEstimate) -> PhaseCost:
    energy = est.layers.groupby("phase")["energy_j"].sum()
    t = {p: est.phase_time_s(p) for p in PHASES}
    return PhaseCost(t["forward"], t["backward"], t["optimizer"],
                     *(float(energy.get(p, 0.0)) for p in PHASES))


def _host_rates(plan: TrainPlan, notes: list[str]) -> tuple[float, float]:
    """(W per busy host core, DRAM J per byte) from the host CPU profile, 0 if unknown."""
    host = plan.system.host
    try:
        from accelsim.devices.profile import load_profile
        from accelsim.devices.profile_energy import load_energy_constants

        cpu = load_profile(host.cpu)
        core_w = cpu.power.tdp_w / cpu.compute.cores
        tech = cpu.offchip_memory.technology if cpu.offchip_memory else None
        dram_j = load_energy_constants().offchip_energy_j_per_byte(tech) if tech else 0.0
    except (AccelsimError, AttributeError, ImportError):
        notes.append(f"host CPU '{host.cpu}' has no loadable profile: host CPU and DRAM "
                     "energy are 0")
        return 0.0, 0.0
    # NB: a busy core draws TDP / cores; idle host power is not counted.
    return core_w, dram_j


def _static_w(plan: TrainPlan, notes: list[str]) -> float:
    try:
        return float(power_limits_w(plan.device_profile)[1])
    except (AttributeError, ImportError) as err:
        notes.append(f"static power of '{plan.device_profile.name}' unknown ({err}): 0 W")
        return 0.0


def simulate_training(config: TrainConfig) -> TrainResult:
    """Run one training simulation; AccelsimError for impossible settings."""
    plan = resolve_config(config)
    notes: list[str] = []
    reads = read_plan(plan.dataset, plan.devices, plan.batch_size, plan.io_threads,
                      plan.steps, plan.epochs, plan.seed)
    full = _estimate(plan, plan.batch_size)
    mem = full.memory
    if not mem["fits"]:
        raise AccelsimError(
            f"'{plan.scenario.model}' at batch {plan.batch_size} ({plan.scenario.precision}, "
            f"training) needs {mem['required_bytes'] / 1e9:.3g} GB on "
            f"'{plan.device_profile.name}', which has {mem['capacity_bytes'] / 1e9:.3g} GB")
    compute = {plan.batch_size: _phase_cost(full), 0: PhaseCost()}
    for b in {int(x) for x in reads.batch_samples().ravel()} - set(compute):
        compute[b] = _phase_cost(_estimate(plan, b))

    d2d = plan.system.device_to_device if plan.devices > 1 else None
    grad_bytes = float(mem["gradients_bytes"])
    # NB: gradients are reduced in one piece (no bucketing), in fp32 under mixed precision.
    comm_s = (link_allreduce_time_s(plan.allreduce, plan.devices, grad_bytes, d2d)
              if d2d is not None else 0.0)
    core_w, dram_j = _host_rates(plan, notes)
    costs = StepCosts(compute, comm_s, allreduce_wire_bytes(plan.allreduce, plan.devices,
                                                            grad_bytes), core_w, dram_j)
    df = TrainModel(plan, reads, costs).run().frame()
    res = _result(plan, df, costs, d2d, notes)
    try:
        tdp_w, static_w = power_limits_w(plan.device_profile)
    except (AttributeError, ImportError):  # a profile without power figures: nothing to bound
        tdp_w, static_w = float("inf"), 0.0
    check_training(res, int(reads.batch_samples().sum()), tdp_w, static_w,
                   full.host_energy_j > 0, {
                       "device": plan.device_profile.name, "system": plan.system.name,
                       "workload": plan.scenario.name, "batch": plan.batch_size,
                       "devices": plan.devices, "precision": plan.scenario.precision,
                       "mode": "train", "software": plan.software, "steps": res.steps})
    return res


def _result(plan: TrainPlan, df: pd.DataFrame, costs: StepCosts, d2d: Any,
            notes: list[str]) -> TrainResult:
    names = resource_names(plan)
    run_s = metrics.run_time_s(df)
    caps = {names["host_cpu"]: max(plan.prep_cores, 1), names["h2d"]: plan.devices}
    util = metrics.utilization(df, caps, run_s)
    au = metrics.accelerator_utilization(df)
    stage, why = metrics.bottleneck(df, run_s, plan.devices, util, names)
    samples = int(df.loc[(df["kind"] == "compute") & (df["detail"] == "forward"),
                         "samples"].sum())
    ends = df[df["kind"] == "compute"].groupby("step")["end_s"].max().sort_index()
    step_s = float(ends.diff().iloc[1:].mean()) if len(ends) > 1 else run_s
    c = costs.compute[plan.batch_size]
    compute_s = c.forward_s + c.backward_s + c.optimizer_s
    energy = metrics.energy_breakdown_j(
        df, [names["h2d"], names["d2d"], names["network"]], _static_w(plan, notes), run_s,
        plan.devices)
    notes.append("storage media draw no modelled energy (no power figure in the profiles)")
    if plan.gpudirect:
        notes.append("GPUDirect Storage: decode and augment run on the accelerator and are "
                     "not costed")
    return TrainResult(
        scenario=plan.scenario.name, system=plan.system.name,
        device=plan.device_profile.name, devices=plan.devices, dataset=plan.dataset.name,
        storage=plan.system.storage.name, global_batch=plan.global_batch,
        steps=int(df["step"].max()) + 1, samples=samples, run_time_s=run_s,
        throughput_samples_per_s=samples / run_s if run_s > 0 else 0.0, step_time_s=step_s,
        compute_time_per_step_s=compute_s, allreduce_time_s=costs.allreduce_s,
        allreduce_algorithm=plan.allreduce, comm_link=d2d.name if d2d is not None else None,
        comm_scale_up=is_scale_up(d2d) if d2d is not None else None,
        comm_to_compute_ratio=costs.allreduce_s / compute_s if compute_s > 0 else 0.0,
        utilization=util, stalls=metrics.stalls(df, plan.devices, run_s),
        accelerator_utilization=au, au_target=metrics.AU_TARGET,
        meets_au_target=au >= metrics.AU_TARGET, energy_breakdown_j=energy, bottleneck=stage,
        bottleneck_detail=why, notes=notes, records=df)
