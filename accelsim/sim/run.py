"""Simulate training: `simulate_training(TrainConfig) -> TrainResult`.

    res = simulate_training(TrainConfig(resolve_workload("resnet50-train"),
                                        load_system("dgx-a100"), epochs=1))
    res.throughput_samples_per_s, res.accelerator_utilization, res.bottleneck
    res["stalls"], res.to_dict()     # JSON-ready; res.records is the DataFrame

Steps: validate the config (`accelsim.sim.config`), cost one training step per accelerator
batch size with the device cost model, cut the gradients into buckets in backward order and
time each bucket's all-reduce (`accelsim.interconnect.buckets`, `accelsim.interconnect.nccl`),
plan the reads (`accelsim.sim.readplan`), run the SimPy model (`accelsim.sim.train`) and
reduce its records to metrics (`accelsim.results.metrics`).

Multi-node (`nodes` > 1): one node is simulated, reading its 1/nodes share of the dataset; its
all-reduce is the hierarchical one across all nodes (`accelsim.interconnect.multinode`), whose
cross-node phase holds the node's NICs in the SimPy model. NB: the other nodes are taken to be
like it, but the simulated node holds the slowest device of all nodes (`straggler`); samples,
throughput, devices and energy count every node, utilization and stalls are the simulated
node's.

Schema: every run has the same keys (an every-node run adds `cluster`). `utilization` is the
busy share of the whole run of each role (`metrics.ROLES`, 0 when idle);
`accelerator_utilization` is MLPerf Storage's AU (compute share of the steps after the first),
a different figure. Without an all-reduce (one device)
the communication fields are null or 0 (`allreduce_algorithm` null). `energy_breakdown_j` has
the same parts in every run (`accelsim.sim.part_energy` for storage, NICs, switches and device
decode); a part whose figure is unknown is null, never 0, and every unknown is named in
`notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.estimate import DeviceEstimate, estimate, power_limits_w
from accelsim.devices.invariants import check_training
from accelsim.errors import AccelsimError
from accelsim.interconnect.buckets import MIB, bucket_count, gradient_buckets
from accelsim.interconnect.collectives import is_scale_up
from accelsim.interconnect.multinode import Fabric, fabric, multinode_time_s, multinode_wire_bytes
from accelsim.interconnect.nccl import achievable, contention_share
from accelsim.profiles.hardware import host_clock_hz, host_cpu_profile
from accelsim.profiles.links import Link
from accelsim.results import metrics
from accelsim.sim.collector import gc_paused
from accelsim.sim.config import TrainConfig, TrainPlan, power_bounds_w, resolve_config
from accelsim.sim.hostprep import prep_scale
from accelsim.sim.part_energy import part_energy_j
from accelsim.sim.readplan import read_plan
from accelsim.sim.train import PhaseCost, StepCosts, TrainModel, resource_names
from accelsim.sim.train_notes import link_notes, spread_note
from accelsim.workload.freeze import FROZEN

PHASES = ("forward", "backward", "optimizer")


@dataclass
class TrainResult:
    """The outcome of one training simulation; dict-like over its JSON fields."""

    scenario: str
    system: str
    device: str
    devices: int  # every node's
    dataset: str
    storage: str
    global_batch: int
    steps: int
    samples: int
    run_time_s: float
    throughput_samples_per_s: float
    step_time_s: float  # mean over steps after the first
    compute_time_per_step_s: float  # forward + backward + optimizer at the full batch, on the
    # nominal device (the slowest takes `straggler` times more)
    allreduce_time_s: float  # all gradients in one message, closed form (0: no all-reduce)
    allreduce_algorithm: str | None  # None: no all-reduce (one device)
    comm_link: str | None  # None: one device, no all-reduce
    comm_scale_up: bool | None
    comm_to_compute_ratio: float  # one all-reduce over the compute of the steps it serves
    overlap_allreduce: bool  # bucketed during backward, else one message after it
    accumulate: int  # micro-steps per all-reduce and optimizer step
    nodes: int  # copies of the system joined by its NICs
    comm_network: str | None  # the NIC link of a multi-node all-reduce (None: one node)
    comm_network_time_s: float  # of allreduce_time_s, the part on the network
    allreduce_buckets: int  # all-reduces per accumulation group (0: none)
    bucket_bytes: float  # bucket size asked for
    comm_achievable_bandwidth_gb_s: float | None  # per device, what the collectives reach
    comm_contention_share: float  # share of backward speed lost while a collective runs
    comm_contention_s: float  # accelerator time backward lost to it, all devices
    utilization: dict[str, float]  # busy share of the whole run per role (metrics.ROLES)
    stalls: dict[str, dict[str, float]]
    accelerator_utilization: float
    au_target: float
    meets_au_target: bool
    energy_breakdown_j: dict[str, float]
    bottleneck: str
    bottleneck_detail: str
    jobs: int = 1  # jobs like this one sharing the node (this record is one job's)
    coordinated: bool = False  # the jobs share one read and one decode of each sample
    notes: list[str] = field(default_factory=list)
    records: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    cluster: dict[str, Any] | None = None  # every node simulated (`accelsim.sim.cluster`)

    def to_dict(self) -> dict[str, Any]:
        """Every field but `records` (and `cluster` where one node was simulated), JSON-ready."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "records" and not (f.name == "cluster" and self.cluster is None)}

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
                        plan.stack, sc.optimizer, host_clock_hz(plan.system),
                        host_cpu_profile(plan.system))
    except ImportError as err:
        raise AccelsimError(f"no usable cost model for device '{plan.device_profile.name}' "
                            f"(class {plan.device_profile.device_class}): {err}") from None


def _phase_cost(est: DeviceEstimate, comm: _Comm | None = None) -> PhaseCost:
    """Phase times and energies of one step; with `comm`, when each gradient bucket is ready
    and the share of backward speed a running all-reduce takes."""
    energy = est.layers.groupby("phase")["energy_j"].sum()
    t = {p: est.phase_time_s(p) for p in PHASES}
    ready: tuple[float, ...] = ()
    share = 0.0
    if comm is not None:
        bwd = est.layers[est.layers["phase"] == "backward"].sort_values("op_index",
                                                                         ascending=False)
        ready = gradient_buckets(*_gradient_stream(bwd, comm), comm.bucket_bytes).ready_s
        share, notes = contention_share(comm.profile, comm.link, bwd)
        comm.notes.update(notes)
    return PhaseCost(t["forward"], t["backward"], t["optimizer"],
                     *(float(energy.get(p, 0.0)) for p in PHASES), ready, share)


@dataclass
class _Comm:
    """What costing the all-reduce of one run needs."""

    link: Link  # the in-node fabric, else the network
    fabric: Fabric
    profile: Any
    params: dict[str, int]  # parameters per op name
    grad_bytes: float
    bucket_bytes: float
    notes: set[str] = field(default_factory=set)


def _gradient_stream(bwd: pd.DataFrame, comm: _Comm) -> tuple[np.ndarray, np.ndarray]:
    """Backward rows in the order they run (last layer first): each row's time and the
    gradient bytes it makes ready when it ends."""
    total_params = sum(comm.params.values())
    per_param = comm.grad_bytes / total_params if total_params else 0.0
    made = bwd["name"].map(comm.params).fillna(0).to_numpy(dtype=float) * per_param
    times = bwd["time_s"].to_numpy(dtype=float)
    rest = comm.grad_bytes - float(made.sum())
    if rest > comm.grad_bytes * 1e-9:
        # NB: parameters of ops without a backward row are ready when backward ends.
        made, times = np.append(made, rest), np.append(times, 0.0)
    return times, made


def _comm_costs(plan: TrainPlan, comm: _Comm | None, compute: dict[int, PhaseCost],
                core_w: float, dram_j: float) -> StepCosts:
    """The all-reduce of the run: per bucket, and of all gradients in one message."""
    if comm is None:
        return StepCosts(compute, 0.0, 0.0, core_w, dram_j)
    algo, fab = plan.allreduce, comm.fabric
    sizes = gradient_buckets(np.array([0.0]), np.array([comm.grad_bytes]),
                             comm.bucket_bytes).bytes
    # One node: the in-node collective (no network part); across nodes the hierarchical one.
    whole_s, whole_net_s, whole_algo = multinode_time_s("allreduce", algo, fab, comm.grad_bytes)
    timed = [multinode_time_s("allreduce", algo, fab, b) for b in sizes]
    # the simulated node's bytes (the result counts every node's energy)
    wires = [tuple(x / fab.nodes for x in multinode_wire_bytes("allreduce", a, fab, b))
             for b, (_, _, a) in zip(sizes, timed, strict=True)]
    return StepCosts(
        # in-node bytes here; the network's are the buckets' (the same total)
        compute, whole_s, multinode_wire_bytes("allreduce", whole_algo, fab,
                                               comm.grad_bytes)[0] / fab.nodes,
        core_w, dram_j, sizes, tuple(t for t, _, _ in timed), tuple(w for w, _ in wires),
        tuple(a for _, _, a in timed), whole_algo, tuple(s for _, s, _ in timed),
        tuple(w for _, w in wires), whole_net_s)


def _host_rates(plan: TrainPlan, notes: list[str]) -> tuple[float, float]:
    """(W per busy host core, DRAM J per byte) from the host CPU profile, 0 if unknown."""
    host = plan.system.host
    try:
        from accelsim.profiles.devices import load_profile
        from accelsim.profiles.energy import load_energy_constants

        cpu = load_profile(host.cpu)
        core_w = cpu.power.tdp_w / cpu.compute.cores
        tech = cpu.offchip_memory.technology if cpu.offchip_memory else None
        dram_j = load_energy_constants().offchip_energy_j_per_byte(tech) if tech else 0.0
    except (AccelsimError, AttributeError, ImportError):
        notes.append(f"host CPU '{host.cpu}' has no loadable profile: host CPU and DRAM "
                     "energy are unknown (null)")
        return 0.0, 0.0
    if not dram_j:
        notes.append(f"host CPU '{host.cpu}' names no memory technology: DRAM energy is "
                     "unknown (null)")
    # NB: a busy core draws TDP / cores; idle host power is not counted.
    return core_w, dram_j


def _static_w(plan: TrainPlan, notes: list[str]) -> float:
    try:
        return float(power_limits_w(plan.device_profile)[1])
    except (AttributeError, ImportError) as err:
        notes.append(f"static power of '{plan.device_profile.name}' unknown ({err}): 0 W")
        return 0.0


@gc_paused
def simulate_training(config: TrainConfig) -> TrainResult:
    """Run one training simulation; AccelsimError for impossible settings."""
    plan = resolve_config(config)
    notes: list[str] = []
    scale, prep_note = prep_scale(plan.dataset, plan.system.host)
    if scale != 1.0:
        ds = plan.dataset
        plan = replace(plan, dataset=replace(
            ds, prep_s_per_sample_per_core=ds.prep_s_per_sample_per_core * scale))
    if prep_note:
        notes.append(prep_note)
    if plan.devices * plan.nodes > 1:
        notes.append(spread_note(plan))
    reads = read_plan(_node_share(plan.dataset, plan.nodes), plan.devices, plan.batch_size,
                      plan.io_threads, plan.steps, plan.epochs, plan.seed)
    full = _estimate(plan, plan.batch_size)
    mem = full.memory
    if not mem["fits"]:
        raise AccelsimError(
            f"'{plan.scenario.model}' at batch {plan.batch_size} ({plan.scenario.precision}, "
            f"training) needs {mem['required_bytes'] / 1e9:.3g} GB on "
            f"'{plan.device_profile.name}', which has {mem['capacity_bytes'] / 1e9:.3g} GB")
    d2d = plan.system.device_to_device if plan.devices > 1 else None
    if d2d is None and plan.nodes > 1:
        d2d = plan.system.network
    comm = None
    if d2d is not None:
        graph = plan.scenario.graph()
        frozen = set(graph.meta.get(FROZEN, ()))  # transfer learning: no gradient to exchange
        # NB: gradients are all-reduced in the width memory_need gives them (fp32 under AMP).
        comm = _Comm(d2d, fabric(plan.system, plan.nodes, plan.devices), plan.device_profile,
                     {op.name: (0 if op.name in frozen else op.params) for op in graph.ops},
                     float(mem["gradients_bytes"]), plan.bucket_mb * MIB)
        _check_events(plan, reads.steps, bucket_count(comm.grad_bytes, comm.bucket_bytes))
    compute = {plan.batch_size: _phase_cost(full, comm), 0: PhaseCost()}
    for b in {int(x) for x in reads.batch_samples().ravel()} - set(compute):
        compute[b] = _phase_cost(_estimate(plan, b), comm)
    core_w, dram_j = _host_rates(plan, notes)
    costs = _comm_costs(plan, comm, compute, core_w, dram_j)
    if comm is not None:
        notes += sorted(comm.notes)
        if not achievable(d2d).known:
            notes.append(f"collective bandwidth: {achievable(d2d).basis}")
    model = TrainModel(plan, reads, costs)
    df = model.run().frame()
    res = _result(plan, df, costs, d2d, notes, model.contention_s)
    if plan.cluster is not None:
        from accelsim.sim.cluster.run import with_cluster

        res = with_cluster(plan, costs, res)
    tdp_w, static_w = power_bounds_w(plan.device_profile)  # (inf, 0): nothing to bound
    check_training(res, int(reads.batch_samples().sum()) * plan.nodes, tdp_w, static_w,
                   full.host_energy_j > 0, {
                       "device": plan.device_profile.name, "system": plan.system.name,
                       "workload": plan.scenario.name, "batch": plan.batch_size,
                       "devices": plan.devices, "precision": plan.scenario.precision,
                       "mode": "train", "software": plan.software, "steps": res.steps})
    return res


def _node_share(dataset: Any, nodes: int) -> Any:
    """The part of `dataset` one of `nodes` nodes reads in an epoch (DistributedSampler)."""
    if nodes == 1:
        return dataset
    # NB: every node reads ceil(samples / nodes), in whole files (the last node's share is
    # really a little smaller).
    share = -(-dataset.sample_count // nodes)
    return replace(dataset, sample_count=share,
                   file_count=-(-share // dataset.samples_per_file))


def _check_events(plan: TrainPlan, steps: int, buckets: int) -> None:
    """Refuse a run whose buckets push it over `max_events` (one record per bucket)."""
    if not plan.overlap_allreduce or buckets <= 1:
        return
    groups = -(-steps // plan.accumulate)
    total = plan.estimated_events + (buckets - 1) * groups
    if total > plan.max_events:
        raise AccelsimError(
            f"training config: 'bucket_mb' = {plan.bucket_mb:g}: {buckets:,} "
            f"buckets per all-reduce make about {total:,} events, over the limit of "
            f"{plan.max_events:,}: use larger buckets, or raise max_events (--max-events)")


def _result(plan: TrainPlan, df: pd.DataFrame, costs: StepCosts, d2d: Link | None,
            notes: list[str], contention_s: float) -> TrainResult:
    names = resource_names(plan)
    records = df
    df = metrics.for_metrics(df)  # the figures read a categorised copy (the records stay)
    run_s = metrics.run_time_s(df)
    roles = {names["h2d"]: "host_to_device", names["d2d"]: "device_to_device",
             **{f"jpeg{d}": "jpeg_decoder" for d in range(plan.devices)}}
    caps = {"host_cpu": max(plan.prep_cores, 1), "host_to_device": plan.devices,
            "accelerators": plan.devices, "jpeg_decoder": plan.devices}
    util = metrics.utilization(df, roles, caps, run_s)
    au = metrics.accelerator_utilization(df)
    stage, why = metrics.bottleneck(df, run_s, plan.devices, util)
    samples = int(df.loc[(df["kind"] == "compute") & (df["detail"] == "forward"),
                         "samples"].sum())
    ends = df[df["kind"] == "compute"].groupby("step")["end_s"].max().sort_index()
    step_s = float(ends.diff().iloc[1:].mean()) if len(ends) > 1 else run_s
    c = costs.compute[plan.batch_size]
    compute_s = c.forward_s + c.backward_s + c.optimizer_s
    group_s = plan.accumulate * (c.forward_s + c.backward_s) + c.optimizer_s
    parts, part_notes = part_energy_j(plan, df, run_s, names)
    unknown_links = link_notes(plan, d2d)
    if unknown_links:
        parts["links"] = None  # a link the run uses has no energy figure
    if costs.core_power_w == 0:  # no host CPU profile (`_host_rates`)
        parts["host_cpu"] = None
    if costs.dram_j_per_byte == 0:
        parts["dram"] = None
    energy = metrics.energy_breakdown_j(
        df, [names["h2d"], names["d2d"], names["network"]], _static_w(plan, notes), run_s,
        plan.devices, parts)
    notes += [*plan.decode.notes, *part_notes, *unknown_links]
    unknown = [k for k, v in energy.items() if v is None]
    if unknown:
        notes.append(f"energy total, energy per sample and average power leave out "
                     f"{', '.join(unknown)} (unknown): lower bounds")
    nodes = plan.nodes
    if nodes > 1:  # every node like the simulated one
        samples *= nodes
        energy = {k: None if v is None else v * nodes for k, v in energy.items()}
    net = plan.system.network if nodes > 1 else None
    buckets = (len(costs.bucket_bytes) if plan.overlap_allreduce else 1) if d2d else 0
    return TrainResult(
        scenario=plan.scenario.name, system=plan.system.name,
        device=plan.device_profile.name, devices=plan.devices * nodes,
        dataset=plan.dataset.name,
        storage=plan.system.storage.name, global_batch=plan.global_batch,
        steps=int(df["step"].max()) + 1, samples=samples, run_time_s=run_s,
        throughput_samples_per_s=samples / run_s if run_s > 0 else 0.0, step_time_s=step_s,
        compute_time_per_step_s=compute_s, allreduce_time_s=costs.allreduce_s,
        allreduce_algorithm=costs.allreduce_algorithm if d2d else None,
        comm_link=d2d.name if d2d is not None else None,
        comm_scale_up=(is_scale_up(d2d) and nodes == 1) if d2d is not None else None,
        comm_to_compute_ratio=costs.allreduce_s / group_s if group_s > 0 else 0.0,
        overlap_allreduce=plan.overlap_allreduce, accumulate=plan.accumulate, nodes=nodes,
        comm_network=net.name if net is not None else None,
        comm_network_time_s=costs.allreduce_network_s, allreduce_buckets=buckets,
        bucket_bytes=plan.bucket_mb * MIB,
        comm_achievable_bandwidth_gb_s=(achievable(d2d).bandwidth_bytes_per_s / 1e9
                                        if d2d is not None else None),
        comm_contention_share=c.contention_share if d2d else 0.0,
        comm_contention_s=contention_s,
        utilization=util, stalls=metrics.stalls(df, plan.devices, run_s),
        accelerator_utilization=au, au_target=metrics.AU_TARGET,
        meets_au_target=au >= metrics.AU_TARGET, energy_breakdown_j=energy, bottleneck=stage,
        bottleneck_detail=why, jobs=plan.jobs, coordinated=plan.coordinated, notes=notes,
        records=records)
