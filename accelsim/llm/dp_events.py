"""The data-parallel gradient exchange of a decoder's training step as SimPy events, with the
collective model of the image pipeline (`accelsim.sim.allreduce_stage`): gradients cut into
buckets in backward order (`accelsim.interconnect.buckets`), each bucket's collective timed by
`accelsim.interconnect.multinode` (one node: the in-node collective), run one at a time on the
device-to-device fabric (a `simpy.Resource`) while backward goes on at the speed the running
collective leaves it; across nodes each collective's cross-node phase holds the node's NICs.

    ex = dp_exchange(fab, DpPlan(zero=0, overlap=True, bucket_bytes=25 * MIB),
                     segments_s, segments_grad_bytes, share=0.1, optimizer_s=0.01,
                     gather_bytes=0.0)
    ex.end_s        # from the window's start to the step's end (exchange, optimizer, gathers)
    ex.records      # one record per collective (accelsim.results.records), link energy in J

The window is the backward of the last micro-batch (PyTorch DDP and Megatron exchange gradients
only in the last micro-batch of an accumulation group). ZeRO 0: all-reduce buckets. ZeRO >= 1
(Rajbhandari et al. 2020, arXiv:1910.02054): reduce-scatter buckets (each rank keeps the
gradient shard its optimizer shard updates), then after the optimizer an all-gather of the
updated 16-bit weights (stages 1-2; stage 3 gathers them layer by layer in the next step's
forward and backward instead). Without overlap the gradients go as one message once backward
ends. The records' times start at the window's start; one GPU's backward and optimizer are
recorded beside the collectives.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import simpy

from accelsim.errors import AccelsimError
from accelsim.interconnect.buckets import MIB, advance, bucket_count, gradient_buckets
from accelsim.interconnect.multinode import Fabric, fabric, multinode_time_s, multinode_wire_bytes
from accelsim.interconnect.nccl import AUTO, achievable
from accelsim.results.records import Recorder
from accelsim.sim.allreduce_stage import link_j, staged_collective

# record resources: the in-node fabric, the node's NICs, one GPU of the group
D2D, NETWORK, GPU = "d2d", "network", "accel0"
MAX_BUCKETS = 100_000  # NB: one SimPy process step each; more is minutes, not seconds


@dataclass(frozen=True)
class DpPlan:
    """How one data-parallel group exchanges gradients: ZeRO stage, overlap with backward,
    bucket size (bytes) and the all-reduce algorithm (ring, tree, nvls or auto)."""

    zero: int
    overlap: bool
    bucket_bytes: float
    algorithm: str = "ring"


@dataclass(frozen=True)
class DpExchange:
    """The exchange of one data-parallel group: `end_s` from the window's start to the end of
    the step (all collectives, the backward, the optimizer, the post-optimizer gather);
    `backward_end_s` when the backward ends (slowed by the collectives beside it); the
    (kind, algorithm) of each collective in the order run; records (one per collective and
    phase, `accelsim.results.records` columns plus duration_s)."""

    end_s: float
    backward_end_s: float
    collectives: int
    algorithms: tuple[tuple[str, str], ...]
    records: pd.DataFrame


def dp_fabric(system: Any, replicas_per_node: int, nodes: int, groups_per_node: int) -> Fabric:
    """The fabric one data-parallel group runs over: `replicas_per_node` of its GPUs in each of
    `nodes` nodes. NB: the `groups_per_node` groups of a node (one per TP x PP position) run at
    once and share the node's NICs evenly; in-node, each GPU has its own fabric port."""
    fab = fabric(system, nodes, replicas_per_node)
    if nodes == 1 or groups_per_node == 1:
        return fab
    # as `multinode.fabric`, the node's NICs over every GPU of the node, not of one group
    per_gpu = (system.nic_count * achievable(system.network).bandwidth_bytes_per_s
               / (replicas_per_node * groups_per_node))
    if not system.gpudirect_rdma:
        per_gpu = min(per_gpu, system.host_to_device.achieved_bandwidth_bytes_per_s)
    return replace(fab, network_bandwidth_bytes_per_s=per_gpu)


def _timed(op: str, algorithm: str, fab: Fabric, n_bytes: float
           ) -> tuple[float, float, str, float, float]:
    """(seconds, network seconds, algorithm, in-node wire bytes, network wire bytes) of one
    collective of `n_bytes` per GPU, every GPU of the group together."""
    t, net_s, used = multinode_time_s(op, algorithm, fab, n_bytes)
    intra_b, net_b = multinode_wire_bytes(op, used, fab, n_bytes)
    return t, net_s, used, intra_b, net_b


def dp_exchange(fab: Fabric, plan: DpPlan, segments_s: np.ndarray,
                segments_grad_bytes: np.ndarray, share: float, optimizer_s: float,
                gather_bytes: float) -> DpExchange:
    """Run the exchange (module docstring). `segments_s[i]`: seconds of the i-th piece of the
    window's backward in the order it runs; `segments_grad_bytes[i]`: gradient bytes per GPU
    ready when it ends; `share`: compute speed a running collective takes
    (`accelsim.interconnect.nccl.contention_share`); `gather_bytes`: weight bytes per GPU
    all-gathered after the optimizer (0: none)."""
    backward_s = float(np.sum(segments_s))
    total_bytes = float(np.sum(segments_grad_bytes))
    op = "allreduce" if plan.zero == 0 else "reducescatter"
    # NB: reduce-scatter and all-gather run as NCCL's ring (nvls where the switch reduces:
    # "auto"); the algorithm knob names the all-reduce's.
    algorithm = plan.algorithm if op == "allreduce" else AUTO
    if plan.overlap:
        count = bucket_count(total_bytes, plan.bucket_bytes)
        if count > MAX_BUCKETS:
            raise AccelsimError(f"knob 'bucket_mb' = {plan.bucket_bytes / MIB:g}: {count:,} "
                                f"gradient buckets per step, over the limit of "
                                f"{MAX_BUCKETS:,}: use larger buckets")
        buckets = gradient_buckets(np.asarray(segments_s, dtype=float),
                                   np.asarray(segments_grad_bytes, dtype=float),
                                   plan.bucket_bytes)
        parts = list(zip(buckets.bytes, buckets.ready_s, strict=True))
    else:
        parts = [(total_bytes, backward_s)] if total_bytes > 0 else []
    env = simpy.Environment()
    link, nic = simpy.Resource(env, 1), simpy.Resource(env, 1)
    rec = Recorder()
    busy: list[tuple[float, float]] = []
    cursor = [0.0, 0.0, 0]
    speed_share = share if plan.overlap else 0.0
    used: list[tuple[str, str]] = []

    def collective(kind: str, n_bytes: float, detail: str) -> Generator[Any, Any, None]:
        t_s, net_s, algo, intra_b, net_b = _timed(kind, algorithm if kind == op else AUTO,
                                                  fab, n_bytes)
        used.append((kind, algo))

        def on_network(start_s: float, end_s: float) -> None:
            rec.add(NETWORK, kind, start_s, end_s, n_bytes=net_b,
                    energy_j=link_j(fab.network, net_b), detail=detail)

        with link.request() as req:
            yield req
            t0 = env.now
            yield from staged_collective(env, nic, t_s, net_s, on_network)
            busy.append((t0, env.now))
            rec.add(D2D, kind, t0, env.now, n_bytes=intra_b, energy_j=link_j(fab.intra, intra_b),
                    detail=f"{detail}, {algo}")

    def exchange() -> Generator[Any, Any, None]:
        k = len(parts)
        for i, (n_bytes, ready_s) in enumerate(parts):
            # the bucket starts once backward (slowed by the collectives so far) made it
            ready = advance(cursor, ready_s, busy, speed_share)
            if ready > env.now:
                yield env.timeout(ready - env.now)
            yield from collective(op, n_bytes, f"bucket {i + 1}/{k}, {n_bytes / 1e6:.4g} MB"
                                  if plan.overlap else "all gradients, one message")
        done = advance(cursor, backward_s, busy, speed_share)
        rec.add(GPU, "compute", 0.0, done, detail="backward, last micro-batch")
        if done > env.now:
            yield env.timeout(done - env.now)
        t0 = env.now
        yield env.timeout(optimizer_s)
        rec.add(GPU, "compute", t0, env.now, detail="optimizer")
        if gather_bytes > 0:
            yield from collective("allgather", gather_bytes, "updated weights after the "
                                  "optimizer")

    env.process(exchange())
    env.run()
    backward_end = advance(cursor, backward_s, busy, speed_share)
    df = rec.frame()
    return DpExchange(float(env.now), backward_end, len(parts) + (gather_bytes > 0),
                      tuple(used), df)


def algorithm_summary(used: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> str | None:
    """One line naming the algorithm of every collective of an exchange (`used`: (kind,
    algorithm) in the order run): the algorithm alone when they all run the same one, else
    each kind and algorithm with its count, in order of first use ("reducescatter ring x 12,
    allgather nvls x 1"); None when there are none."""
    if not used:
        return None
    if len({algo for _, algo in used}) == 1:
        return used[0][1]
    counts = dict.fromkeys(used, 0)
    for pair in used:
        counts[pair] += 1
    return ", ".join(f"{kind} {algo} x {n}" for (kind, algo), n in counts.items())
