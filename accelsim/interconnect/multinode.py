"""Collectives across nodes: the hierarchical all-reduce of multi-node data parallelism
[SERGEEV18] and the other nccl-tests collectives, over a node's scale-up fabric and its NIC
rails, as closed forms on top of `accelsim.interconnect.collectives`.

With N nodes of k devices, a message of M bytes per device, in-node per-device achievable
bandwidth B and latency L (`accelsim.interconnect.nccl.achievable`), and per-device network
bandwidth b = rails x rail achievable bandwidth / k (each device sends its shard over its share
of the node's NICs) with per-step latency l:

- all-reduce: reduce-scatter in the node (ring: (k-1)/k M/B + (k-1) L), all-reduce of the M/k
  shard across the N nodes by every device at once (ring or double tree, chosen by message
  size when "auto": the faster closed form), all-gather in the node (as the reduce-scatter).
  On one node it is the in-node all-reduce itself.
- reduce-scatter / all-gather: the in-node phase on M, then the cross-node phase on M/k.
- all-to-all: (k-1)/n of the buffer stays in the node, (N-1)/N crosses the network (n = N k).

Without GPUDirect RDMA the cross-node bytes are staged through host memory: a device reaches the
network at most at its host link's achieved bandwidth, and each cross-node step pays the extra
latency of a CPU-centric transfer (`hw_profiles/efficiency/collectives.toml`).

    fab = fabric(load_system("dgx-a100"), nodes=4)
    total_s, network_s, algorithm = multinode_time_s("allreduce", "auto", fab, 100e6)

[SERGEEV18] A. Sergeev, M. Del Balso, "Horovod: fast and easy distributed deep learning in
  TensorFlow", arXiv:1802.05799, 2018 (hierarchical all-reduce).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelsim.errors import AccelsimError
from accelsim.interconnect.collectives import (
    allreduce_time_s,
    bus_factor,
    ring_gather_time_s,
    wire_bytes,
)
from accelsim.interconnect.nccl import achievable, collective_record, collective_time_s
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.links import Link

NETWORK_ALGORITHMS = ("ring", "tree")  # the cross-node all-reduce (nvls is in-node only)


@dataclass(frozen=True)
class Fabric:
    """What a collective across `nodes` nodes of `devices_per_node` devices runs over."""

    nodes: int
    devices_per_node: int
    intra: Link | None  # the in-node fabric (None: one device per node)
    network_bandwidth_bytes_per_s: float  # per device, achievable, across nodes
    network_latency_s: float  # per cross-node step
    network: Link | None  # the rail link (None: one node)
    rails: int
    gpudirect_rdma: bool
    basis: str  # one line: what the network figure rests on

    @property
    def devices(self) -> int:
        return self.nodes * self.devices_per_node


def _staging_latency_s() -> float:
    return float(load_efficiency("collectives")["assumed.gdr_off_extra_latency_us"]) * 1e-6


def fabric(system: Any, nodes: int, devices_per_node: int | None = None) -> Fabric:
    """The fabric of `nodes` copies of `system` (its NICs as rails); AccelsimError (one line)
    when a system without NICs is asked for more than one node."""
    k = system.device_count if devices_per_node is None else devices_per_node
    if nodes < 1 or k < 1:
        raise AccelsimError(f"a collective over {nodes} nodes x {k} devices: both must be >= 1")
    intra = system.device_to_device if k > 1 else None
    if k > 1 and intra is None:
        raise AccelsimError(f"'{system.name}' has no device-to-device link for {k} devices")
    if nodes == 1:
        return Fabric(1, k, intra, 0.0, 0.0, None, 0, system.gpudirect_rdma, "one node")
    net = system.network
    if net is None or not system.nic_count:
        raise AccelsimError(f"nodes = {nodes}: system '{system.name}' has no NICs (links.network "
                            "and links.nic_count) to join several nodes")
    ach = achievable(net)
    # NB: rail-optimised fat tree at full bisection: a device's share of its node's NICs is
    # its whole path to the other nodes; switch hops add no latency beyond the link's.
    bw = system.nic_count * ach.bandwidth_bytes_per_s / k
    latency = net.latency_s
    basis = (f"{system.nic_count} x {net.name} per node ({ach.basis}), "
             f"{bw / 1e9:.3g} GB/s per device")
    if not system.gpudirect_rdma:
        # NB: staged through host memory, pipelined: the host link caps the rate, and each
        # step pays a CPU-centric transfer's latency on top.
        staged = system.host_to_device.achieved_bandwidth_bytes_per_s
        bw, latency = min(bw, staged), latency + _staging_latency_s()
        basis += "; no GPUDirect RDMA: staged through host memory"
    return Fabric(nodes, k, intra, bw, latency, net, system.nic_count, system.gpudirect_rdma,
                  basis)


def _intra_s(op: str, fab: Fabric, message_bytes: float) -> float:
    """The in-node half of a hierarchical collective: one ring reduce-scatter or all-gather
    of `message_bytes` over the node's fabric (0 with one device per node)."""
    if fab.devices_per_node == 1 or fab.intra is None:
        return 0.0
    t, _ = collective_time_s(op, "ring", fab.devices_per_node, message_bytes, fab.intra)
    return t


def network_algorithm(algorithm: str, fab: Fabric, shard_bytes: float) -> str:
    """The cross-node all-reduce algorithm: as asked, or the faster closed form ("auto")."""
    if algorithm in NETWORK_ALGORITHMS:
        return algorithm
    if algorithm != "auto":
        raise AccelsimError(f"all-reduce algorithm '{algorithm}' across {fab.nodes} nodes: "
                            f"choose {', '.join(NETWORK_ALGORITHMS)} or auto (nvls reduces "
                            "inside one NVLink switch domain only)")
    times = {a: allreduce_time_s(a, fab.nodes, shard_bytes, fab.network_bandwidth_bytes_per_s,
                                 fab.network_latency_s) for a in NETWORK_ALGORITHMS}
    return min(NETWORK_ALGORITHMS, key=lambda a: (times[a], NETWORK_ALGORITHMS.index(a)))


def multinode_time_s(op: str, algorithm: str, fab: Fabric, message_bytes: float
                     ) -> tuple[float, float, str]:
    """(total seconds, seconds of it on the network, algorithm) of `op` on `message_bytes`
    per device across `fab` (see the module docstring). One node: the in-node collective."""
    k, nodes = fab.devices_per_node, fab.nodes
    if nodes == 1:
        if fab.intra is None:
            return 0.0, 0.0, algorithm if algorithm != "auto" else "ring"
        t, used = collective_time_s(op, algorithm, k, message_bytes, fab.intra)
        return t, 0.0, used
    bw, lat = fab.network_bandwidth_bytes_per_s, fab.network_latency_s
    shard = message_bytes / k
    if op == "allreduce":
        used = network_algorithm(algorithm, fab, shard)
        net_s = allreduce_time_s(used, nodes, shard, bw, lat)
        intra_s = _intra_s("reducescatter", fab, message_bytes) + _intra_s(
            "allgather", fab, message_bytes)
        # NB: the three phases run one after another (NCCL pipelines chunks across them): an
        # upper bound on time, by at most the shorter phases' share.
        return intra_s + net_s, net_s, used
    if algorithm not in ("auto", "ring", "p2p"):
        raise AccelsimError(f"{op} across nodes runs as ring (p2p for alltoall), not "
                            f"{algorithm}")
    if op in ("allgather", "reducescatter"):
        net_s = ring_gather_time_s(nodes, shard, bw, lat)
        return _intra_s(op, fab, message_bytes) + net_s, net_s, "ring"
    if op == "alltoall":
        n = fab.devices
        net_s = ring_gather_time_s(nodes, message_bytes, bw, lat)  # pairwise across nodes
        in_node = (k - 1) / n * message_bytes
        intra_s = 0.0
        if k > 1 and fab.intra is not None:
            ach = achievable(fab.intra).bandwidth_bytes_per_s
            intra_s = in_node / ach + (k - 1) * fab.intra.latency_s
        # NB: in-node and cross-node exchanges of an all-to-all do not overlap (upper bound).
        return intra_s + net_s, net_s, "p2p"
    raise AccelsimError(f"collective '{op}': choose allreduce, allgather, reducescatter or "
                        "alltoall")


def multinode_wire_bytes(op: str, algorithm: str, fab: Fabric, message_bytes: float
                         ) -> tuple[float, float]:
    """(bytes on in-node links, bytes on the network), all devices together."""
    k, nodes = fab.devices_per_node, fab.nodes
    if nodes == 1:
        return wire_bytes(op, algorithm, k, message_bytes), 0.0
    shard = message_bytes / k
    if op == "allreduce":
        intra = nodes * 2.0 * (k - 1) * message_bytes  # ring RS + AG in every node
        return intra, k * wire_bytes("allreduce", algorithm, nodes, shard)
    if op == "alltoall":
        n = fab.devices
        return n * (k - 1) / n * message_bytes, n * (nodes - 1) / nodes * message_bytes
    return nodes * wire_bytes(op, "ring", k, message_bytes), k * wire_bytes(op, "ring", nodes,
                                                                              shard)


def multinode_table(op: str, fab: Fabric, sizes: list[int], algorithm: str = "auto"
                    ) -> pd.DataFrame:
    """nccl-tests-like rows across nodes, one per size: as `nccl.collective_table`, plus
    `network_time_s` (the cross-node part of `time_s`); bus bandwidth over all n devices."""
    factor = bus_factor(op, fab.devices)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        t, net_s, used = multinode_time_s(op, algorithm, fab, float(size))
        algbw = size / t / 1e9 if t > 0 else float("inf")
        rows.append({"size_bytes": int(size), "time_s": t, "algorithm_bandwidth_gb_s": algbw,
                     "bus_bandwidth_gb_s": algbw * factor, "algorithm": used,
                     "network_time_s": net_s})
    return pd.DataFrame(rows, columns=["size_bytes", "time_s", "algorithm_bandwidth_gb_s",
                                       "bus_bandwidth_gb_s", "algorithm", "network_time_s"])


def cluster_record(system: Any, op: str, sizes: list[int], algorithm: str = "auto",
                   devices: int | None = None, nodes: int = 1) -> dict[str, Any]:
    """The JSON record of `accelsim collective [--nodes N]`: `nccl.collective_record` on one
    node; across nodes, the same keys plus the network, its rails and its basis, with `devices`
    counting every node's."""
    if nodes == 1:
        return {**collective_record(system, op, sizes, algorithm, devices), "nodes": 1}
    k = system.device_count if devices is None else devices
    if not 1 <= k <= system.device_count:
        raise AccelsimError(f"--devices {k}: '{system.name}' has {system.device_count} "
                            "accelerators per node")
    fab = fabric(system, nodes, k)
    if algorithm == "nvls":
        network_algorithm(algorithm, fab, 1.0)  # refused, one line
    table = multinode_table(op, fab, sizes, algorithm)
    intra = fab.intra
    ach = achievable(intra) if intra is not None else None
    net = fab.network
    assert net is not None  # nodes > 1
    return {"system": system.name, "device": system.device, "devices": fab.devices,
            "nodes": nodes, "devices_per_node": k, "op": op, "algorithm": algorithm,
            "link": intra.name if intra else None, "link_kind": intra.kind if intra else None,
            "link_bandwidth_gb_s": intra.bandwidth_bytes_per_s / 1e9 if intra else None,
            "achievable_bandwidth_gb_s": ach.bandwidth_bytes_per_s / 1e9 if ach else None,
            "achievable_basis": ach.basis if ach else "one device per node",
            "latency_s": intra.latency_s if intra else 0.0,
            "latency_source": intra.sources.get("latency_us", "") if intra else "",
            "network": net.name, "rails": fab.rails, "gpudirect_rdma": fab.gpudirect_rdma,
            "network_bandwidth_per_device_gb_s": fab.network_bandwidth_bytes_per_s / 1e9,
            "network_latency_s": fab.network_latency_s, "network_basis": fab.basis,
            "rows": table.to_dict(orient="records")}
