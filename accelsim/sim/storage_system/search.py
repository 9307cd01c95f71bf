"""The largest count that still passes a test that passes below some count and fails above
it (AU taken to fall as accelerators are added): gallop up from a first guess, or bisect down
to it. Shared by the MLPerf Storage searches on one host (`accelsim.sim.mlperf_storage`) and
on a storage system (`accelsim.sim.storage_system.sizing`).

    largest_passing(lambda n: n <= 37, first=30, cap=1000)  # 37
"""

from __future__ import annotations

from collections.abc import Callable


def largest_passing(ok: Callable[[int], bool], first: int, cap: int) -> int:
    """The largest n in [0, cap] with ok(n) (0 when even 1 fails); `first` is where to start
    (clipped to [1, cap]). Calls ok on O(log cap) counts."""
    # lo passes (0 trivially) and hi fails (cap + 1 by definition).
    lo, hi = 0, min(max(first, 1), cap)
    if ok(hi):
        lo, step = hi, 1
        while True:
            probe = min(lo + step, cap)
            if probe == lo:
                hi = cap + 1
                break
            if not ok(probe):
                hi = probe
                break
            lo, step = probe, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
