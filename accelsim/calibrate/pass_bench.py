"""numpy's per-call element passes on this host, timed at several working sets: the
`[cpu_passes]` tables of the measured numpy stack (`devices.cpu.passes`).

    tables = measure_passes(("fp32", "bf16", "int8"), sizes=PASS_SIZES["full"])
    tables["cast_bf16"].s_per_element(np.array([8 << 20]))

Each pass runs the same numpy operation the kernels run (`kernels.formats.round_to_format`,
`kernels.quantize.quantize_int8`, an fp32 `x @ w.T` of one row) on an fp32 array made anew
(untimed) before every timed run, as a forward pass makes its weights anew
(`kernels.execute.time_graph`): the array was just written, so as much of it as fits is in the
caches, as in the user's run. The least of `repeats` runs per size, by the calibration's clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from accelsim.calibrate.alloc_bench import mmap_threshold_max_bytes
from accelsim.calibrate.cases import Clock
from accelsim.devices.cpu.passes import FP32_BYTES
from accelsim.kernels.formats import round_to_format
from accelsim.kernels.quantize import quantize_int8
from accelsim.profiles.pass_tables import PassTable

# elements per array: 2^17 .. 2^24 (0.5 MiB .. 64 MiB of fp32), or two small sizes (tests)
PASS_SIZES = {"full": tuple(1 << e for e in range(17, 25)), "tiny": (1 << 12, 1 << 15)}
ROW = 1024  # columns of the 2-D weights (quantised per row, as a linear's weight per channel)
THRESHOLD_MARGIN_BYTES = 1 << 20  # under glibc's largest threshold: a chunk's header fits
CAST_FORMATS = ("fp16", "bf16")  # the narrow float formats whose kernels cast weights per call


def _pass_runs(name: str) -> Callable[[np.ndarray], Callable[[], object]]:
    """The timed call of pass `name` on a fresh weight `w` (rows x ROW, fp32)."""
    if name.startswith("cast_"):
        fmt = name.removeprefix("cast_")
        return lambda w: (lambda: round_to_format(w, fmt))
    if name == "quantize_int8":
        return lambda w: (lambda: quantize_int8(w, axis=0))
    if name == "gemv_fp32":
        def gemv(w: np.ndarray) -> Callable[[], object]:
            x = np.ones((1, w.shape[1]), dtype=np.float32)
            return lambda: x @ w.T
        return gemv
    raise ValueError(f"unknown pass {name!r}")


def pass_names(precisions: tuple[str, ...]) -> tuple[str, ...]:
    """The passes the kernels run at these precisions: a cast per narrow float format, the
    int8 quantisation, and the fp32 GEMV stream (every float precision's GEMVs run on fp32)."""
    names = [f"cast_{p}" for p in precisions if p in CAST_FORMATS]
    if "int8" in precisions:
        names.append("quantize_int8")
    if any(p != "int8" for p in precisions):
        names.append("gemv_fp32")
    return tuple(names)


def time_pass_s(name: str, elements: int, repeats: int, clock: Clock = time.perf_counter,
                seed: int = 0) -> float:
    """Least time by `clock` of pass `name` over a fresh fp32 array of `elements` (rounded to
    whole rows of `ROW`), s per element. One untimed warm-up run first."""
    rows = max(1, elements // ROW)
    rng = np.random.default_rng(seed)
    make = _pass_runs(name)
    best_s = float("inf")
    for i in range(repeats + 1):
        w = rng.standard_normal((rows, min(ROW, elements)), dtype=np.float32)
        run = make(w)
        start_s = clock()
        run()
        took_s = clock() - start_s
        if i:
            best_s = min(best_s, took_s)
    return best_s / (rows * min(ROW, elements))


def measure_passes(precisions: tuple[str, ...], sizes: tuple[int, ...], repeats: int = 3,
                   clock: Clock = time.perf_counter, sweeps: int = 2) -> dict[str, PassTable]:
    """`measure_passes_here` with the C allocator in the state of a process that has run a
    forward pass: glibc's dynamic mmap threshold raised to just under its largest (an array
    that size allocated, written and freed first), as the model's fault term assumes
    (`alloc_bench.THRESHOLD_SOURCE`), so that a pass's outputs below it come from the heap,
    not fresh pages, whatever sizes this process freed before. NB: outputs of 32 MiB and more
    are fresh pages here and in the model's fault term alike (counted twice: about 0.2 ns per
    element at the 64 MiB point, 5% of it); a forked child with mmap and trimming turned off
    avoids that but measured the small passes 1.5-3x slower than a forward pass runs them."""
    threshold = mmap_threshold_max_bytes()
    if threshold is not None:
        block = np.ones(threshold - THRESHOLD_MARGIN_BYTES, dtype=np.uint8)
        del block
    return measure_passes_here(precisions, sizes, repeats, clock, sweeps)


def measure_passes_here(precisions: tuple[str, ...], sizes: tuple[int, ...],
                        repeats: int = 3, clock: Clock = time.perf_counter,
                        sweeps: int = 2) -> dict[str, PassTable]:
    """A `PassTable` per pass of `precisions` (`pass_names`): the least time per element at
    each of `sizes` elements over `sweeps` sweeps through every pass and size, `repeats` runs
    each. NB: the least filters out other processes on a shared host; sweeping everything
    before repeating means a burst of other work spoils one sweep of a few points, not a
    table (a fresh array's cache-resident share, and so its cost per element between 2 and
    16 MiB, moved by up to 50% from one calibration to the next with a single sweep)."""
    names = pass_names(precisions)
    best = {name: [float("inf")] * len(sizes) for name in names}
    for sweep in range(sweeps):
        for name in names:
            best[name] = [min(b, time_pass_s(name, n, repeats, clock, seed=sweep))
                          for b, n in zip(best[name], sizes, strict=True)]
    working = tuple(float(FP32_BYTES * max(1, n // ROW) * min(ROW, n)) for n in sizes)
    return {name: PassTable(working, tuple(max(s, 1e-15) for s in best[name]))
            for name in names}
