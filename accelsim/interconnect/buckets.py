"""Gradient buckets of data-parallel training, and a device's backward pass while collectives
take a share of it.

Buckets (PyTorch DDP's Reducer [LI20]): gradients are grouped, in the order backward produces
them (last layer first), into buckets of `bucket_cap_mb` MiB (25 by default); each bucket is
all-reduced as soon as its last gradient is ready, while backward goes on. So the last bucket
(the first layers' gradients) is ready only when backward ends, and its all-reduce is exposed.

    b = gradient_buckets(backward_s, grad_bytes, 25 * MIB)  # both in backward order
    b.bytes, b.ready_s     # per bucket: size, and its ready time from backward start

Contention: while a collective runs, the device computes at 1 - share of its speed (its
kernels hold SMs and memory bandwidth: `accelsim.interconnect.nccl.contention_share`).
`advance` walks one device's backward through the collectives' busy intervals.

[LI20] S. Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
  Training", PVLDB 13(12), 2020, arXiv:2006.15704 (gradient bucketing, bucket_cap_mb = 25).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIB = 2**20
DEFAULT_BUCKET_MIB = 25.0  # [LI20] DDP's bucket_cap_mb default (MiB: bucket_cap_mb * 1024**2)


@dataclass(frozen=True)
class Buckets:
    """Per bucket, in launch order: bytes, and when its last gradient is ready (seconds after
    backward starts, at full speed)."""

    bytes: tuple[float, ...]
    ready_s: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.bytes)


def bucket_count(total_bytes: float, bucket_bytes: float) -> int:
    """ceil(total / bucket): the buckets of `gradient_buckets`, 0 for no gradients."""
    return math.ceil(total_bytes / bucket_bytes) if total_bytes > 0 else 0


def gradient_buckets(layer_backward_s: np.ndarray, layer_grad_bytes: np.ndarray,
                     bucket_bytes: float) -> Buckets:
    """Cut the gradient stream, in backward order, into buckets of `bucket_bytes`.

    `layer_backward_s[i]`: backward time of layer i; `layer_grad_bytes[i]`: the gradient
    bytes it produces when its backward ends (both in the order backward runs them)."""
    if bucket_bytes <= 0:
        raise ValueError(f"bucket size must be > 0 bytes, not {bucket_bytes}")
    done_s = np.cumsum(np.asarray(layer_backward_s, dtype=float))
    made = np.cumsum(np.asarray(layer_grad_bytes, dtype=float))
    total = float(made[-1]) if made.size else 0.0
    k = bucket_count(total, bucket_bytes)
    if k == 0:
        return Buckets((), ())
    # NB: buckets are filled byte by byte, a layer's gradient may straddle two (DDP keeps a
    # tensor whole and closes a bucket once it reaches the cap; its 1 MiB first bucket too).
    ends = np.minimum(np.arange(1, k + 1) * bucket_bytes, total)
    layer = np.minimum(np.searchsorted(made, ends * (1 - 1e-12), side="left"), made.size - 1)
    sizes = np.diff(ends, prepend=0.0)
    return Buckets(tuple(float(x) for x in sizes), tuple(float(x) for x in done_s[layer]))


def advance(cursor: list[float], target_s: float, busy: list[tuple[float, float]],
            share: float) -> float:
    """The time a device's compute reaches `target_s` seconds of full-speed work.

    `cursor` = [time, work done by then, index of the first busy interval not yet passed] is
    updated in place (call with increasing targets); `busy` = the collectives' (start, end)
    intervals in time order, during which compute runs at 1 - `share` of full speed."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"compute share taken by collectives must be in [0, 1), not {share}")
    t, done, j = cursor[0], cursor[1], int(cursor[2])
    while True:
        while j < len(busy) and busy[j][1] <= t:
            j += 1
        inside = j < len(busy) and busy[j][0] <= t
        rate = 1.0 - share if inside else 1.0
        until = busy[j][1] if inside else (busy[j][0] if j < len(busy) else math.inf)
        need_s = (target_s - done) / rate
        if t + need_s <= until:
            t, done = t + max(need_s, 0.0), max(target_s, done)
            break
        done += (until - t) * rate
        t = until
    cursor[0], cursor[1], cursor[2] = t, done, j
    return t
