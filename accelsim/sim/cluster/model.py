"""Every node of a data-parallel cluster, step by step: its own speed, its own input pipeline,
the all-reduce barrier paced by the slowest node and by the fabric.

A synchronous data-parallel step is a max-plus system, so the cluster is simulated exactly as
that system's recurrence, vectorised over nodes (no event queue: each step costs a few numpy
operations on arrays of `nodes` entries, and buckets x nodes for the bucket barrier). For node
n with compute factor f_n (`nodes.node_factors`), step s:

    input_n(s)  = max(input_n(s-1), start_n(s-1-prefetch)) + max(interval, reads(s) / cap)
    start_n(s)  = max(end_n(s-1), input_n(s))
    bwd_n(s)    = start_n(s) + (acc x forward + (acc-1) x backward) f_n
    ready_b(s)  = max_n(bwd_n(s) + ready_b f_n)      bucket b's gradients on every node
    ar_b(s)     = max(ar_(b-1)(s), ready_b(s)) + local_b + network_b x slowdown(s) + hops
    end_n(s)    = max(bwd_n(s) + backward f_n, ar_last(s)) + optimizer f_n

`slowdown(s)` is the worst of the fabric's congestion (`fabric_load.GroupLoad`, with the
storage reads of the step before) and the rails a failed link took from a node (the ring is
paced by its slowest member). Without overlap the whole all-reduce starts after the slowest
node's backward. NB: a node's input pipeline is one server of the interval the simulated node
measured (its busiest input stage per step) and the first batch's latency; reads are spread
evenly over a step; the device's backward slow-down by a running collective (contention) is
spread evenly over the steps; a node's batch is the simulated node's (the largest of its
devices' at each step).

    out = run_cluster(inputs)
    out.run_time_s, out.step_end_s, out.wait_s["slowest_node"]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.sim.cluster.fabric_load import GroupLoad


@dataclass(frozen=True)
class StepWork:
    """One optimizer step on a nominal device, seconds: the micro-steps before the last
    backward, that backward, the optimizer, and when each bucket is ready after the backward
    starts."""

    pre_backward_s: float
    backward_s: float
    optimizer_s: float
    bucket_ready_s: np.ndarray
    read_bytes: float = 0.0  # a node's input over the fabric (0: its own drives)


@dataclass(frozen=True)
class ClusterInputs:
    """One cluster run: nominal per-device costs (seconds) and what differs between nodes."""

    work: list[StepWork]  # per optimizer step (the epoch's last batches are smaller)
    bucket_local_s: np.ndarray  # in-node phases of each bucket's all-reduce
    bucket_network_s: np.ndarray  # its network phase at the nodes' full NIC bandwidth
    bucket_latency_s: np.ndarray  # what crossing groups adds to it
    overlap: bool
    interval_s: float  # a node's input pipeline: one batch per interval
    first_input_s: float  # the first batch's arrival
    prefetch: int
    factors: np.ndarray  # (nodes,) compute factor per node
    rail_share: np.ndarray  # (nodes,) share of its NIC bandwidth each node keeps
    load: GroupLoad
    nic_bytes_per_s: float  # per node, achievable, all rails
    storage_cap_bytes_per_s: float  # the most a node reads over the fabric (inf: local)
    nominal_step_s: float  # the simulated node's step (for the first step's reads)


@dataclass
class ClusterOutcome:
    """What every node did: step ends (the cluster's), time lost per cause (node-seconds)."""

    step_end_s: np.ndarray  # (steps,) the last node's end of each step
    node_busy_s: np.ndarray  # (nodes,) compute time per node
    later_busy_s: float  # node-seconds of compute in the steps after the first
    wait_s: dict[str, float]  # node-seconds: input, slowest_node, communication
    slowdown: np.ndarray  # (steps,) network phase factor per step
    uplink_peak: float  # the busiest group's uplink demand over capacity, any step

    @property
    def run_time_s(self) -> float:
        return float(self.step_end_s[-1])

    @property
    def accelerator_utilization(self) -> float:
        """MLPerf Storage's AU over every node: compute over the time after the first step
        (the whole run where there is one step)."""
        n = len(self.node_busy_s)
        if len(self.step_end_s) < 2:
            return float(self.node_busy_s.sum()) / (n * self.run_time_s)
        return self.later_busy_s / (n * (self.run_time_s - float(self.step_end_s[0])))


def run_cluster(x: ClusterInputs) -> ClusterOutcome:
    """Simulate every node for the steps of `x.work` (see the module docstring)."""
    n, steps = len(x.factors), len(x.work)
    f = x.factors
    fail = 1.0 / float(x.rail_share.min())
    end = np.zeros(n)
    inp = np.full(n, x.first_input_s)
    starts: list[np.ndarray] = []
    ends = np.zeros(steps)
    slow = np.ones(steps)
    waits = {"input": 0.0, "slowest_node": 0.0, "communication": 0.0}
    busy = np.zeros(n)
    first_busy_s = 0.0
    peak, prev_step_s = 0.0, x.nominal_step_s
    for s, w in enumerate(x.work):
        pre_bwd_s, bwd_s, opt_s = w.pre_backward_s * f, w.backward_s * f, w.optimizer_s * f
        read_s = w.read_bytes / x.storage_cap_bytes_per_s
        if s == 0:
            inp = np.maximum(inp, read_s)  # the first batch comes through the storage too
        else:
            slot = starts[s - 1 - x.prefetch] if s - 1 - x.prefetch >= 0 else 0.0
            inp = np.maximum(inp, slot) + max(x.interval_s, read_s)
        start = np.maximum(end, inp)
        waits["input"] += float(np.maximum(inp - end, 0.0).sum())
        starts.append(start)
        bwd_start = start + pre_bwd_s
        bwd_end = bwd_start + bwd_s
        storage = x.load.nodes_in_group * w.read_bytes / max(prev_step_s, 1e-12)
        use = x.load.utilization(x.nic_bytes_per_s, storage)
        peak = max(peak, float(use.max()))
        slow[s] = max(1.0, float(use.max()), fail)
        last_bwd = float(bwd_end.max())
        ar_end = _allreduce_end(x, w.bucket_ready_s, bwd_start, bwd_end, slow[s])
        waits["slowest_node"] += float((last_bwd - bwd_end).sum())
        waits["communication"] += max(0.0, ar_end - last_bwd) * n
        busy += pre_bwd_s + bwd_s + opt_s
        if s == 0:
            first_busy_s = float(busy.sum())
        new_end = np.maximum(bwd_end, ar_end) + opt_s
        step_end = float(new_end.max())
        prev_step_s = step_end - float(ends[s - 1]) if s > 0 else step_end
        ends[s] = step_end
        end = new_end
    return ClusterOutcome(ends, busy, float(busy.sum()) - first_busy_s, waits, slow, peak)


def _allreduce_end(x: ClusterInputs, bucket_ready_s: np.ndarray, bwd_start: np.ndarray,
                   bwd_end: np.ndarray, slowdown: float) -> float:
    """When the step's last bucket is reduced on every node."""
    took = x.bucket_local_s + x.bucket_network_s * slowdown + x.bucket_latency_s
    if not x.overlap or len(took) == 0:
        return float(bwd_end.max()) + float(took.sum())
    # bucket b is ready everywhere when the last node has made its gradients
    ready = (bwd_start[None, :] + bucket_ready_s[:, None] * x.factors[None, :]).max(axis=1)
    t = -np.inf
    for r, d in zip(ready.tolist(), took.tolist(), strict=True):
        t = max(t, r) + d
    return float(t)
