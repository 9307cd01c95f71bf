"""The C allocator under numpy on this host: the time to fault in one fresh page, and the mmap
threshold above which numpy's per-call temporaries are fresh pages (`devices.cpu.alloc`).

    figures = measure_allocator(repeats=5)   # None where the C library is not glibc
    figures.fresh_page_s, figures.page_bytes, figures.mmap_threshold_bytes

A numpy array above glibc's largest mmap threshold is a mapping of its own: writing it first
faults every page in (the kernel zero-fills each), writing it again does not. The difference
of the two, per page, is the time a kernel's fresh temporary costs beside its arithmetic.
"""

from __future__ import annotations

import mmap
import platform
import struct
import time
from dataclasses import dataclass

import numpy as np

from accelsim.calibrate.cases import Clock

# glibc malloc.c: DEFAULT_MMAP_THRESHOLD_MAX = 4 * 1024 * 1024 * sizeof(long) on 64-bit (32 MiB),
# 512 KiB * sizeof(long) on 32-bit
GLIBC_THRESHOLD_MAX_PER_LONG_64 = 4 * 1024 * 1024
GLIBC_THRESHOLD_MAX_PER_LONG_32 = 512 * 1024
THRESHOLD_SOURCE = ("defined: glibc malloc.c DEFAULT_MMAP_THRESHOLD_MAX (4 MiB x sizeof(long) "
                    "on 64-bit): the dynamic threshold rises to the size of each freed mapping "
                    "up to it, so a process that has run a forward pass sits there (NB: "
                    "assumed; below it until a temporary that large is freed)")


@dataclass(frozen=True)
class AllocatorFigures:
    """Time per fresh page (s, by the calibration's clock), page size (bytes), and the mmap
    threshold (bytes) of this host's C allocator, with how each was found."""

    fresh_page_s: float
    page_bytes: int
    mmap_threshold_bytes: int
    note: str


def mmap_threshold_max_bytes() -> int | None:
    """glibc's largest dynamic mmap threshold on this build (None: not glibc)."""
    if platform.libc_ver()[0] != "glibc":
        return None
    per_long = (GLIBC_THRESHOLD_MAX_PER_LONG_64 if struct.calcsize("P") == 8
                else GLIBC_THRESHOLD_MAX_PER_LONG_32)
    return per_long * struct.calcsize("l")


def fresh_page_s(n_bytes: int, repeats: int, clock: Clock = time.process_time) -> float:
    """Least time by `clock` to allocate and write a float64 array of `n_bytes` (above the
    mmap threshold: fresh pages) less the least time to write it again (pages present), per
    page, s. NB: process CPU time counts the kernel's fault handling (system time); the least
    of `repeats` filters out other processes."""
    page = mmap.PAGESIZE
    n = max(1, n_bytes // 8)
    fresh_s, warm_s = float("inf"), float("inf")
    warm = np.empty(n)
    warm.fill(0.0)
    for _ in range(max(1, repeats)):
        start_s = clock()
        a = np.empty(n)
        a.fill(1.0)
        fresh_s = min(fresh_s, clock() - start_s)
        del a
        start_s = clock()
        warm.fill(1.0)
        warm_s = min(warm_s, clock() - start_s)
    pages = -(-n * 8 // page)
    return max(fresh_s - warm_s, 0.0) / pages


def measure_allocator(repeats: int, n_bytes: int = 64 << 20,
                      clock: Clock = time.process_time) -> AllocatorFigures | None:
    """This host's figures (`AllocatorFigures`), or None where the C library is not glibc
    (the threshold rule is glibc's). `n_bytes` must pass the threshold (default 64 MiB)."""
    threshold = mmap_threshold_max_bytes()
    if threshold is None:
        return None
    per_page_s = fresh_page_s(max(n_bytes, 2 * threshold), repeats, clock)
    note = (f"least of {repeats}: a {max(n_bytes, 2 * threshold) >> 20} MiB numpy array "
            "written fresh less written again, per page")
    return AllocatorFigures(per_page_s, mmap.PAGESIZE, threshold, note)

