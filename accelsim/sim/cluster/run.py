"""A multi-node training run with every node simulated: `with_cluster(plan, costs, result)`
takes the simulated node's result and replaces its whole-cluster figures (run time,
throughput, step time, AU, bottleneck; energy's static part) with those of the every-node simulation
(`accelsim.sim.cluster.model`), adding a `cluster` block that says what each cause cost.

What each node takes from the simulated one: the nominal device costs (forward, backward,
optimizer, bucket ready times; `accelsim.sim.costs.StepCosts`), the all-reduce's in-node and
network phases per bucket, and its input pipeline's pace: the busiest input stage's busy time
per step (the simulated node's utilisation of storage, host CPU, host-to-device link and page
cache; its whole step where it waited for input). What differs between nodes: their devices'
draws of the class's step-time spread, the slow node, the failed links. What they share: the
fabric's group uplinks, and storage reached over the network. NB: network storage (a NAS, an
object store) is taken as one system serving every node, so its bandwidth is split N ways; a
node's own drives are its own.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from accelsim.interconnect.multinode import fabric as node_fabric
from accelsim.profiles.fabrics import load_fabric, nonblocking
from accelsim.results.metrics import BOTTLENECK_STALL_SHARE
from accelsim.sim.cluster.fabric_load import GroupLoad
from accelsim.sim.cluster.model import ClusterInputs, ClusterOutcome, StepWork, run_cluster
from accelsim.sim.cluster.nodes import failed_links, node_factors, rail_share
from accelsim.sim.config import power_bounds_w

INPUT_ROLES = ("storage", "host_cpu", "host_to_device", "page_cache")
INPUT_STALLS = ("fetch", "prep", "transfer")


def with_cluster(plan: Any, costs: Any, res: Any) -> Any:
    """`res` (a TrainResult of one simulated node) with every node of `plan` simulated."""
    spec = plan.cluster
    fab = load_fabric(spec.fabric) if spec.fabric is not None else nonblocking(plan.nodes)
    net = node_fabric(plan.system, plan.nodes, plan.devices)
    nic_bytes_per_s = net.network_bandwidth_bytes_per_s * plan.devices
    load = GroupLoad.of(fab, plan.nodes, spec.placement)
    factors = node_factors(plan.nodes, plan.devices, plan.device_spread, plan.seed,
                           spec.slow_node)
    failed = failed_links(plan.nodes, spec.link_failures, plan.seed)
    shares = np.ones(plan.nodes)
    shares[failed] = rail_share(net.rails, 1)
    per_sample_bytes, storage_cap = _network_reads(plan, load, nic_bytes_per_s)
    inputs = ClusterInputs(
        work=_work(plan, costs, res, per_sample_bytes), **_buckets(plan, costs, load),
        overlap=plan.overlap_allreduce,
        interval_s=_input_interval_s(res) * plan.accumulate, first_input_s=_first_input_s(res),
        prefetch=plan.prefetch_batches, factors=factors, rail_share=shares, load=load,
        nic_bytes_per_s=nic_bytes_per_s, storage_cap_bytes_per_s=storage_cap,
        nominal_step_s=res.step_time_s * plan.accumulate)
    out = run_cluster(inputs)
    block = _block(plan, fab, load, out, res, factors, failed,
                   storage_cap if per_sample_bytes else None)
    run_s = out.run_time_s
    ends = out.step_end_s
    step_s = float(np.diff(ends).mean()) / plan.accumulate if len(ends) > 1 else run_s
    bound, detail = _bottleneck(block, res)
    au = min(out.accelerator_utilization, 1.0)
    return replace(res, run_time_s=run_s, step_time_s=step_s,
                   throughput_samples_per_s=res.samples / run_s if run_s > 0 else 0.0,
                   bottleneck=bound, bottleneck_detail=detail, cluster=block,
                   accelerator_utilization=au, meets_au_target=au >= res.au_target,
                   energy_breakdown_j=_energy(plan, res, run_s),
                   notes=[*res.notes, _note(plan, fab)])


def _energy(plan: Any, res: Any, run_s: float) -> dict[str, float | None]:
    """The simulated node's parts times the nodes (as the one-node record has them), its
    devices' static power over the time the cluster's run is longer (or shorter) than the
    simulated node's. NB: the hosts', NICs' and switches' idle draw over that time is left
    out (it is in no part of the one-node record either)."""
    _, static_w = power_bounds_w(plan.device_profile)
    extra_j = static_w * plan.devices * plan.nodes * (run_s - res.run_time_s)
    parts = dict(res.energy_breakdown_j)
    if parts.get("static") is not None:
        parts["static"] = max(parts["static"] + extra_j, 0.0)
    if parts.get("total") is not None:
        parts["total"] = max(parts["total"] + extra_j, 0.0)
    return parts


def _input_interval_s(res: Any) -> float:
    """The simulated node's input pipeline: seconds per (micro-)step of its busiest stage, or
    its whole step where the devices waited for input."""
    busiest = max(min(1.0, res.utilization.get(r, 0.0)) for r in INPUT_ROLES)
    waited = sum(res.stalls[k]["fraction"] for k in INPUT_STALLS)
    if waited > BOTTLENECK_STALL_SHARE:
        return res.step_time_s
    return res.step_time_s * busiest


def _first_input_s(res: Any) -> float:
    """When the last of the simulated node's devices began its first step."""
    df = res.records
    first = df[df["kind"] == "compute"].groupby("device")["start_s"].min()
    return float(first.max()) if len(first) else 0.0


def _network_reads(plan: Any, load: GroupLoad, nic_bytes_per_s: float) -> tuple[float, float]:
    """(bytes a node reads over the fabric per sample, the most it can read per s); (0, inf)
    where the storage is the node's own. A storage system's medium (`--storage-system`) is
    already one node's share of it."""
    medium = plan.system.storage
    if not medium.over_network:
        return 0.0, math.inf
    shared = medium.read_bandwidth_bytes_per_s * plan.system.storage_count
    if medium.share_of_clients is None:  # one system serving every node
        shared /= plan.nodes
    cap = min(shared, load.storage_cap_bytes_per_s(nic_bytes_per_s), nic_bytes_per_s)
    return plan.dataset.stored_bytes_per_sample, cap


def _work(plan: Any, costs: Any, res: Any, per_sample_bytes: float) -> list[StepWork]:
    """Per optimizer step, the nominal device's work at the simulated node's batch (its
    devices' largest at each micro-step: the epoch's last batches are smaller), and the bytes
    the node reads over the fabric for it (`per_sample_bytes` each of its samples)."""
    df = res.records
    fwd = df[(df["kind"] == "compute") & (df["detail"] == "forward")]
    by_step = fwd.groupby("step")["samples"]
    batches = by_step.max().sort_index().astype(int).tolist()
    node_samples = by_step.sum().sort_index().to_numpy(dtype=float)
    overlap = plan.overlap_allreduce and bool(costs.bucket_time_s)
    groups = range(0, len(batches), plan.accumulate)
    # NB: the backward time the simulated node's devices lost to running collectives
    # (contention), spread evenly over its steps, lengthens every node's last backward
    lost_s = res.comm_contention_s / (plan.devices * len(groups)) if overlap else 0.0
    out = []
    for g in groups:
        group = [costs.compute[b] for b in batches[g:g + plan.accumulate]]
        last = group[-1]
        ready = last.bucket_ready_s if overlap else (last.backward_s,)
        out.append(StepWork(
            sum(c.forward_s + c.backward_s for c in group) - last.backward_s,
            last.backward_s + lost_s, last.optimizer_s, np.array(ready, dtype=float),
            float(node_samples[g:g + plan.accumulate].sum()) * per_sample_bytes))
    return out


def _buckets(plan: Any, costs: Any, load: GroupLoad) -> dict[str, np.ndarray]:
    """Per bucket: in-node phases, network phase, group-crossing latency."""
    if plan.overlap_allreduce and costs.bucket_time_s:
        total = np.array(costs.bucket_time_s)
        network = np.array(costs.bucket_network_s)
        algos = costs.bucket_algorithm
    else:
        total = np.array([costs.allreduce_s])
        network = np.array([costs.allreduce_network_s])
        algos = (costs.allreduce_algorithm,)
    latency = np.array([load.extra_latency_s(_ring_steps(a, plan.nodes)) for a in algos])
    return {"bucket_local_s": total - network, "bucket_network_s": network,
            "bucket_latency_s": latency}


def _ring_steps(algorithm: str, nodes: int) -> int:
    """Sequential network steps of the cross-node all-reduce (reduce-scatter + all-gather)."""
    if "tree" in algorithm:
        return 2 * math.ceil(math.log2(nodes))
    return 2 * (nodes - 1)


def _block(plan: Any, fab: Any, load: GroupLoad, out: ClusterOutcome, res: Any,
           factors: np.ndarray, failed: np.ndarray, storage_cap: float | None
           ) -> dict[str, Any]:
    """The record's `cluster` block: settings, node spread, time shares, fabric use."""
    node_s = plan.nodes * out.run_time_s
    shares = {"compute": float(out.node_busy_s.sum()) / node_s,
              **{k: v / node_s for k, v in out.wait_s.items()}}
    slowest = int(np.argmax(factors))
    return {
        "nodes_simulated": plan.nodes, "fabric": fab.name, "topology": fab.topology,
        "placement": plan.cluster.placement, "groups": load.groups,
        "nodes_per_group": fab.nodes_per_group, "oversubscription": fab.oversubscription,
        "slow_node": plan.cluster.slow_node, "link_failures": len(failed),
        "failed_link_nodes": failed.tolist(),
        "node_factor_median": float(np.median(factors)),
        "node_factor_max": float(factors[slowest]), "slowest_node": slowest,
        "network_slowdown_max": float(out.slowdown.max()),
        "uplink_utilization_peak": out.uplink_peak,
        "storage_bytes_per_s_per_node": storage_cap,
        "time_share": shares,
        "one_node_model_throughput_samples_per_s": res.throughput_samples_per_s,
    }


def _bottleneck(block: dict[str, Any], res: Any) -> tuple[str, str]:
    """What limits the cluster: the largest loss if it is above the stall threshold, else the
    simulated node's own bottleneck."""
    losses = {k: v for k, v in block["time_share"].items() if k != "compute"}
    cause = max(losses, key=lambda k: losses[k])
    share = losses[cause]
    if share <= BOTTLENECK_STALL_SHARE:
        return res.bottleneck, res.bottleneck_detail
    if cause == "slowest_node":
        return "slowest node", (
            f"nodes wait {share:.1%} of the run for the slowest: node {block['slowest_node']} "
            f"runs x{block['node_factor_max']:.3g} the nominal step (median "
            f"x{block['node_factor_median']:.3g})")
    if cause == "communication":
        slow = block["network_slowdown_max"]
        why = (f"; the network phase ran up to x{slow:.3g} slower (fabric congestion or "
               "failed links)") if slow > 1.0 + 1e-9 else ""
        return "communication", f"the all-reduce holds every node {share:.1%} of the run{why}"
    if block["storage_bytes_per_s_per_node"] is not None:
        return "storage", (f"nodes wait for input {share:.1%} of the run: the network storage "
                           f"serves every node, {block['storage_bytes_per_s_per_node'] / 1e6:,.0f}"
                           " MB/s each")
    return res.bottleneck, f"nodes wait for input {share:.1%} of the run; {res.bottleneck_detail}"


def _note(plan: Any, fab: Any) -> str:
    return (f"every node simulated: {plan.nodes} nodes on fabric '{fab.name}' "
            f"({fab.description}), ranks {plan.cluster.placement}; throughput, run and step "
            "time and AU are the cluster's, energy the simulated node's parts with the devices' "
            "static draw over the cluster's run; utilization and stalls are the simulated "
            "node's (accelsim.sim.cluster)")
