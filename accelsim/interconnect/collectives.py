"""Collective algorithms as stateless closed forms: the gradient all-reduce of data parallelism.

Cost model (alpha-beta; Hockney): sending m bytes over one link costs latency + m / bandwidth.
With n devices, M bytes of gradients per device, per-device link bandwidth B and latency L:

- ring [PATARASUK09] [THAKUR05]: a reduce-scatter then an all-gather, each n-1 steps moving
  M/n bytes:  t = 2 (n-1)/n * M / B + 2 (n-1) * L. Bandwidth-optimal, latency grows with n.
- tree [THAKUR05] (binomial-tree reduce then broadcast): 2 ceil(log2 n) steps, each moving the
  whole message:  t = 2 ceil(log2 n) * (L + M / B). Latency-optimal, bandwidth-poor.
- hierarchical [SERGEEV18] (Horovod; NCCL's intra-/inter-node split): reduce-scatter inside
  each node over the scale-up fabric (NVLink / NVSwitch), all-reduce the 1/k shards across
  nodes over the network, all-gather inside the node again.

[THAKUR05] R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective Communication
  Operations in MPICH", IJHPCA 19(1), 2005, doi:10.1177/1094342005051521.
[PATARASUK09] P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 69(2), 2009, doi:10.1016/j.jpdc.2008.09.002.
[SERGEEV18] A. Sergeev, M. Del Balso, "Horovod: fast and easy distributed deep learning in
  TensorFlow", arXiv:1802.05799, 2018.

Example::

    >>> round(ring_allreduce_time_s(8, 51e6, 300e9, 1e-6), 7)  # ResNet-50 bf16 grads, NVSwitch
    0.0003115
"""

from __future__ import annotations

import math

from accelsim.errors import AccelsimError
from accelsim.interconnect.links import Link

ALGORITHMS = ("ring", "tree")
SCALE_UP_KINDS = ("nvlink", "nvswitch", "ici")  # in-node fabrics; the rest is scale-out


def _check(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
           latency_s: float) -> None:
    if n_devices < 1:
        raise AccelsimError(f"an all-reduce needs at least 1 device, not {n_devices}")
    if message_bytes < 0 or bandwidth_bytes_per_s <= 0 or latency_s < 0:
        raise AccelsimError(f"all-reduce of {message_bytes} B at {bandwidth_bytes_per_s} B/s, "
                            f"latency {latency_s} s: sizes, bandwidth and latency must be >= 0")


def _unknown(algorithm: str) -> AccelsimError:
    return AccelsimError(f"all-reduce algorithm '{algorithm}': choose one of "
                         f"{', '.join(ALGORITHMS)}")


def ring_allreduce_time_s(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
                          latency_s: float) -> float:
    """2 (n-1)/n * M / B + 2 (n-1) * L [PATARASUK09]; 0 for one device."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    n = n_devices
    return 2 * (n - 1) / n * message_bytes / bandwidth_bytes_per_s + 2 * (n - 1) * latency_s


def tree_allreduce_time_s(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
                          latency_s: float) -> float:
    """2 ceil(log2 n) * (L + M / B) [THAKUR05]; 0 for one device."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    steps = 2 * math.ceil(math.log2(n_devices)) if n_devices > 1 else 0
    # NB: unpipelined binomial tree; NCCL's pipelined double binary tree approaches ring bandwidth.
    return steps * (latency_s + message_bytes / bandwidth_bytes_per_s)


def allreduce_time_s(algorithm: str, n_devices: int, message_bytes: float,
                     bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """The all-reduce time of `algorithm` ("ring" or "tree")."""
    if algorithm == "ring":
        return ring_allreduce_time_s(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    if algorithm == "tree":
        return tree_allreduce_time_s(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    raise _unknown(algorithm)


def allreduce_wire_bytes(algorithm: str, n_devices: int, message_bytes: float) -> float:
    """Bytes sent over links by all devices together (for link energy)."""
    n = n_devices
    if n <= 1:
        return 0.0
    if algorithm == "ring":
        return 2.0 * (n - 1) * message_bytes  # each of n devices sends 2 (n-1)/n * M
    if algorithm == "tree":
        return 2.0 * (n - 1) * message_bytes  # n-1 tree edges, once up and once down
    raise _unknown(algorithm)


def link_allreduce_time_s(algorithm: str, n_devices: int, message_bytes: float,
                          link: Link) -> float:
    """All-reduce over one link class at its achieved per-device bandwidth."""
    # NB: the link's per-device (per-endpoint) bandwidth is what each device sends at; point-to-
    # point NVLink rings and switch fabrics are treated alike, and no congestion in a switch.
    return allreduce_time_s(algorithm, n_devices, message_bytes,
                            link.achieved_bandwidth_bytes_per_s, link.latency_s)


def hierarchical_allreduce_time_s(algorithm: str, nodes: int, devices_per_node: int,
                                  message_bytes: float, intra: Link, inter: Link,
                                  inter_bandwidth_per_device_bytes_per_s: float | None = None
                                  ) -> float:
    """All-reduce across `nodes` x `devices_per_node` devices [SERGEEV18]: the intra-node
    reduce-scatter and all-gather (together one ring all-reduce's cost over `intra`) plus an
    inter-node all-reduce of one 1/k shard over `inter` by each of the k devices in parallel."""
    k = devices_per_node
    if nodes < 1 or k < 1:
        raise AccelsimError(f"hierarchical all-reduce over {nodes} nodes x {k} devices: "
                            "both must be at least 1")
    intra_s = link_allreduce_time_s("ring", k, message_bytes, intra) if k > 1 else 0.0
    inter_bw = inter_bandwidth_per_device_bytes_per_s or inter.achieved_bandwidth_bytes_per_s
    inter_s = allreduce_time_s(algorithm, nodes, message_bytes / k, inter_bw, inter.latency_s)
    return intra_s + inter_s


def is_scale_up(link: Link) -> bool:
    """True for an in-node fabric (NVLink, NVSwitch, ICI); False for PCIe or a network."""
    return link.kind in SCALE_UP_KINDS
