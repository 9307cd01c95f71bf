"""Collective algorithms as stateless closed forms: the gradient all-reduce of data parallelism
and the other collectives nccl-tests measures.

Cost model (alpha-beta; Hockney): sending m bytes over one link costs latency + m / bandwidth.
With n devices, a message of M bytes per device (all-gather, reduce-scatter, all-to-all: M is
the whole buffer, as nccl-tests counts it), per-device link bandwidth B and latency L:

- ring all-reduce [PATARASUK09] [THAKUR05]: a reduce-scatter then an all-gather, each n-1
  steps moving M/n bytes:  t = 2 (n-1)/n * M / B + 2 (n-1) * L. Bandwidth-optimal.
- tree all-reduce, NCCL's pipelined double binary tree [SANDERS09]: two trees each carry half
  the message up (reduce) and down (broadcast); every device sends M in each direction:
  t = 2 * M / B + 2 ceil(log2 n) * L. Latency-optimal, a little less bandwidth than a ring.
- binomial tree [THAKUR05] (`binomial_tree_allreduce_time_s`, textbook, not what NCCL runs):
  2 ceil(log2 n) steps, each moving the whole message: t = 2 ceil(log2 n) * (L + M / B).
- nvls all-reduce (NVLink SHARP: the switch reduces and multicasts): each device sends its
  whole buffer once to the switch and its reduced shard once back, and receives the same:
  t = (n+1)/n * M / B + 2 * L.
- ring all-gather / reduce-scatter: n-1 steps of M/n:  t = (n-1)/n * M / B + (n-1) * L.
- all-to-all (p2p: pairwise exchange): each device sends (n-1)/n of its buffer, n-1 rounds:
  t = (n-1)/n * M / B + (n-1) * L.
- hierarchical [SERGEEV18] (Horovod; NCCL's intra-/inter-node split): reduce-scatter inside
  each node over the scale-up fabric (NVLink / NVSwitch), all-reduce the 1/k shards across
  nodes over the network, all-gather inside the node again: composed from the forms above in
  `accelsim.interconnect.multinode`.

One device: every collective takes 0 s.

Bus bandwidth (nccl-tests, doc/PERFORMANCE.md): algorithm bandwidth M / t times the op's factor
(`bus_factor`): 2 (n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
all-to-all; it is the bandwidth each link must carry, comparable across n.

[THAKUR05] R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective Communication
  Operations in MPICH", IJHPCA 19(1), 2005, doi:10.1177/1094342005051521.
[PATARASUK09] P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 69(2), 2009, doi:10.1016/j.jpdc.2008.09.002.
[SANDERS09] P. Sanders, J. Speck, J. L. Traeff, "Two-tree algorithms for full bandwidth
  broadcast, reduction and scan", Parallel Computing 35(12), 2009,
  doi:10.1016/j.parco.2009.09.001.
[SERGEEV18] A. Sergeev, M. Del Balso, "Horovod: fast and easy distributed deep learning in
  TensorFlow", arXiv:1802.05799, 2018.

Example::

    >>> round(ring_allreduce_time_s(8, 51e6, 300e9, 1e-6), 7)  # ResNet-50 bf16 grads, NVSwitch
    0.0003115
"""

from __future__ import annotations

import math
from collections.abc import Callable

from accelsim.errors import AccelsimError
from accelsim.profiles.links import Link

OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
ALGORITHMS = ("ring", "tree", "nvls")  # all-reduce algorithms
ALL_ALGORITHMS = (*ALGORITHMS, "p2p")  # all-to-all runs as point-to-point exchanges
SCALE_UP_KINDS = ("nvlink", "nvswitch", "ici")  # in-node fabrics; the rest is scale-out

TimeFn = Callable[[int, float, float, float], float]


def _check(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
           latency_s: float) -> None:
    if n_devices < 1:
        raise AccelsimError(f"a collective needs at least 1 device, not {n_devices}")
    if message_bytes < 0 or bandwidth_bytes_per_s <= 0 or latency_s < 0:
        raise AccelsimError(f"collective of {message_bytes} B at {bandwidth_bytes_per_s} B/s, "
                            f"latency {latency_s} s: sizes, bandwidth and latency must be >= 0")


def _log2_steps(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def ring_allreduce_time_s(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
                          latency_s: float) -> float:
    """2 (n-1)/n * M / B + 2 (n-1) * L [PATARASUK09]; 0 for one device."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    n = n_devices
    return 2 * (n - 1) / n * message_bytes / bandwidth_bytes_per_s + 2 * (n - 1) * latency_s


def double_tree_allreduce_time_s(n_devices: int, message_bytes: float,
                                 bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """2 * M / B + 2 ceil(log2 n) * L [SANDERS09] (NCCL's tree); 0 for one device."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    if n_devices == 1:
        return 0.0
    # NB: reduce and broadcast fully pipelined (chunks small against the message).
    return 2 * message_bytes / bandwidth_bytes_per_s + 2 * _log2_steps(n_devices) * latency_s


def binomial_tree_allreduce_time_s(n_devices: int, message_bytes: float,
                                   bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """2 ceil(log2 n) * (L + M / B) [THAKUR05]; 0 for one device. Unpipelined: a textbook
    reference, not what NCCL runs (see `double_tree_allreduce_time_s`)."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    return 2 * _log2_steps(n_devices) * (latency_s + message_bytes / bandwidth_bytes_per_s)


tree_allreduce_time_s = binomial_tree_allreduce_time_s  # the name earlier releases exported


def nvls_allreduce_time_s(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
                          latency_s: float) -> float:
    """(n+1)/n * M / B + 2 * L: in-switch reduction and multicast; 0 for one device."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    if n_devices == 1:
        return 0.0
    n = n_devices
    # NB: the switch's reduction runs at line rate; one switch round trip per phase.
    return (n + 1) / n * message_bytes / bandwidth_bytes_per_s + 2 * latency_s


def ring_gather_time_s(n_devices: int, message_bytes: float, bandwidth_bytes_per_s: float,
                       latency_s: float) -> float:
    """(n-1)/n * M / B + (n-1) * L: ring all-gather or reduce-scatter of an M-byte buffer,
    and pairwise all-to-all; 0 for one device."""
    _check(n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)
    n = n_devices
    # NB: all-to-all as n-1 pairwise rounds; NCCL issues them together, so L is an upper bound.
    return (n - 1) / n * message_bytes / bandwidth_bytes_per_s + (n - 1) * latency_s


# (op, algorithm) -> closed form; algorithms an op does not have are refused by name.
TIME_FNS: dict[tuple[str, str], TimeFn] = {
    ("allreduce", "ring"): ring_allreduce_time_s,
    ("allreduce", "tree"): double_tree_allreduce_time_s,
    ("allreduce", "nvls"): nvls_allreduce_time_s,
    ("allgather", "ring"): ring_gather_time_s,
    ("reducescatter", "ring"): ring_gather_time_s,
    ("alltoall", "p2p"): ring_gather_time_s,
}


def op_algorithms(op: str) -> tuple[str, ...]:
    """The algorithms modelled for `op`; AccelsimError for an unknown op."""
    if op not in OPS:
        raise AccelsimError(f"collective '{op}': choose one of {', '.join(OPS)}")
    return tuple(a for (o, a) in TIME_FNS if o == op)


def collective_time_s(op: str, algorithm: str, n_devices: int, message_bytes: float,
                      bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """Time of `op` by `algorithm` (closed forms above)."""
    have = op_algorithms(op)
    if algorithm not in have:
        raise AccelsimError(f"{op} algorithm '{algorithm}': choose one of {', '.join(have)}")
    return TIME_FNS[op, algorithm](n_devices, message_bytes, bandwidth_bytes_per_s, latency_s)


def allreduce_time_s(algorithm: str, n_devices: int, message_bytes: float,
                     bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """The all-reduce time of `algorithm` ("ring", "tree" or "nvls")."""
    if algorithm not in ALGORITHMS:
        raise AccelsimError(f"all-reduce algorithm '{algorithm}': choose one of "
                            f"{', '.join(ALGORITHMS)}")
    return collective_time_s("allreduce", algorithm, n_devices, message_bytes,
                             bandwidth_bytes_per_s, latency_s)


def bus_factor(op: str, n_devices: int) -> float:
    """nccl-tests' bus bandwidth / algorithm bandwidth for `op` on n devices."""
    op_algorithms(op)
    n = n_devices
    return 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n


def wire_bytes(op: str, algorithm: str, n_devices: int, message_bytes: float) -> float:
    """Bytes sent over links by all devices together (for link energy)."""
    n = n_devices
    if n <= 1:
        return 0.0
    if op != "allreduce":
        return (n - 1) * message_bytes  # each device sends (n-1)/n of the buffer
    if algorithm == "nvls":
        return (n + 1) * message_bytes  # each device: its buffer up, its shard multicast
    return 2.0 * (n - 1) * message_bytes  # ring: 2 (n-1)/n * M each; trees: n-1 edges, twice


def allreduce_wire_bytes(algorithm: str, n_devices: int, message_bytes: float) -> float:
    """Bytes an all-reduce sends over links, all devices together."""
    if algorithm not in ALGORITHMS:
        raise AccelsimError(f"all-reduce algorithm '{algorithm}': choose one of "
                            f"{', '.join(ALGORITHMS)}")
    return wire_bytes("allreduce", algorithm, n_devices, message_bytes)


def is_scale_up(link: Link) -> bool:
    """True for an in-node fabric (NVLink, NVSwitch, ICI); False for PCIe or a network."""
    return link.kind in SCALE_UP_KINDS
