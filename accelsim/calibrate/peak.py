"""The FLOP rate this host really sustains, and the peak written from it.

    rates = sustained_rates(cores=2)          # {"numpy_1_thread": FLOP/s, "numpy_2_threads": ...}
    peak = host_peak(2.596e9, 2, 16, 2, rates)  # HostPeak: clock, peak, what set it

The probe is an in-cache fp32 GEMM (256^3: three 256 KiB operands, in any L2 or L3) timed at
one BLAS thread and at every core, by numpy's BLAS and, where importable, by PyTorch's. NB: a
GEMM rather than a dependent-FMA loop: Python cannot time a dependent chain of FMAs without a
compiler, and a BLAS micro-kernel is the fastest FMA stream a Python host runs. The rate it
reaches is a lower bound of the host's peak (the peak is at least what ran), so the peak
written is the larger of the nameplate one (cores x lanes x FMA pipes x 2 x the clock the OS
reports, a VM's base clock) and the best rate per core times the cores: where a core boosts
above its base clock, the clock written is the one the best rate implies. No fitted figure of
the peak then needs to exceed 1 to explain a measured time (`write.measured_stack` clamps one
that does, with a note; the stack loader refuses one above 1).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GEMM_N = 256  # NB: 3 x 256 KiB fp32 operands: cache-resident on any core with 1 MiB of L2/L3
FLOPS_PER_FMA = 2
PROBE_REPEATS = 30  # least of (each run ~0.3 ms at 100 GFLOP/s: the probe takes well under 1 s)
# numpy's bundled OpenBLAS (scipy-openblas) and plain OpenBLAS builds, 64- and 32-bit ints
_SET_THREADS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                "openblas_set_num_threads64_", "openblas_set_num_threads")


def _openblas() -> ctypes.CDLL | None:
    """numpy's bundled OpenBLAS library (numpy.libs/ or scipy_openblas*), None if not found."""
    root = Path(np.__file__).parent
    for lib in sorted([*root.parent.glob("numpy.libs/*openblas*"),
                       *root.parent.glob("scipy_openblas*/lib/*openblas*.so*")]):
        try:
            return ctypes.CDLL(str(lib))
        except OSError:
            continue
    return None


def blas_thread_setter() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """(set, get) of numpy's BLAS thread count at run time, None where its BLAS does not say
    how (not OpenBLAS, or a build without the symbols)."""
    lib = _openblas()
    if lib is None:
        return None
    for name in _SET_THREADS:
        if hasattr(lib, name) and hasattr(lib, name.replace("set_", "get_")):
            setter, getter = getattr(lib, name), getattr(lib, name.replace("set_", "get_"))
            setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
            return (lambda n, f=setter: f(int(n))), (lambda f=getter: int(f()))
    return None


def blas_threads() -> int | None:
    """numpy's BLAS thread count now (None: not readable)."""
    control = blas_thread_setter()
    return None if control is None else control[1]()


@contextmanager
def numpy_blas_threads(n: int) -> Iterator[bool]:
    """Run the block with numpy's BLAS on `n` threads (yields False, unchanged, where it cannot
    be set), then restore the count."""
    control = blas_thread_setter()
    if control is None:
        yield False
        return
    setter, getter = control
    before = getter()
    setter(n)
    try:
        yield True
    finally:
        setter(before)


def _least_s(run: Callable[[], object], repeats: int) -> float:
    run()
    best_s = float("inf")
    for _ in range(max(1, repeats)):
        start_s = time.perf_counter()
        run()
        best_s = min(best_s, time.perf_counter() - start_s)
    return best_s


def numpy_gemm_rate(repeats: int = PROBE_REPEATS) -> float:
    """FLOP/s of numpy's in-cache fp32 GEMM (`GEMM_N`^3) on its current BLAS threads: the
    least time of `repeats` (NB: wall clock: a shared host only lowers it)."""
    a = np.random.default_rng(0).standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    return 2.0 * GEMM_N**3 / _least_s(lambda: a @ a, repeats)


def torch_gemm_rate(threads: int, repeats: int = PROBE_REPEATS) -> float:
    """FLOP/s of PyTorch's in-cache fp32 GEMM on `threads` intra-op threads (ImportError
    without torch)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(GEMM_N, GEMM_N, dtype=torch.float32)
        with torch.inference_mode():
            return 2.0 * GEMM_N**3 / _least_s(lambda: a @ a, repeats)
    finally:
        torch.set_num_threads(before)


def sustained_rates(cores: int, torch: bool = False, repeats: int = PROBE_REPEATS
                    ) -> dict[str, float]:
    """The probe's FLOP/s by name (`numpy_1_thread`, `numpy_<cores>_threads`, the same for
    `torch_` where `torch`): one thread where numpy's BLAS thread count can be set, and its
    default threads (`numpy_default_threads` where it cannot)."""
    out: dict[str, float] = {}
    with numpy_blas_threads(1) as settable:
        if settable:
            out["numpy_1_thread"] = numpy_gemm_rate(repeats)
    if settable and cores > 1:
        with numpy_blas_threads(cores):
            out[f"numpy_{cores}_threads"] = numpy_gemm_rate(repeats)
    elif not settable:
        out["numpy_default_threads"] = numpy_gemm_rate(repeats)
    if torch:
        out["torch_1_thread"] = torch_gemm_rate(1, repeats)
        if cores > 1:
            out[f"torch_{cores}_threads"] = torch_gemm_rate(cores, repeats)
    return out


def probe_threads(name: str, cores: int) -> int:
    """The threads a probe's name says it ran on (`numpy_1_thread` -> 1; `_default_` ->
    `cores`, NB: numpy's default BLAS threads are the cores)."""
    count = name.rsplit("_", 2)[-2]
    return int(count) if count.isdigit() else cores


@dataclass(frozen=True)
class HostPeak:
    """The fp32 vector peak written for this host (FLOP/s), the clock it is derived at (Hz),
    the clock the OS reported (Hz) and what set it (a source text)."""

    peak_flops_per_s: float
    clock_hz: float
    read_clock_hz: float
    best_per_core_flops_per_s: float
    best_probe: str
    source: str

    @property
    def boosted(self) -> bool:
        """The probe ran faster than the reported clock allows: the clock is the implied one."""
        return self.clock_hz > self.read_clock_hz


def host_peak(read_clock_hz: float, cores: int, lanes: int, fma_units: int,
              rates: dict[str, float]) -> HostPeak:
    """The peak of `cores` x `lanes` fp32 lanes x `fma_units` FMA pipes x 2 at the larger of
    `read_clock_hz` and the clock the best probe rate per core implies (`rates`: name ->
    FLOP/s, `sustained_rates`; a rate's threads from its name): no probe ran faster than the
    peak written."""
    per_cycle = lanes * fma_units * FLOPS_PER_FMA  # FLOPs per core per cycle
    per_core = {name: rate / probe_threads(name, cores) for name, rate in rates.items()}
    best = max(per_core, key=lambda k: per_core[k], default="")
    best_rate = per_core.get(best, 0.0)
    implied_hz = best_rate / per_cycle
    clock_hz = max(read_clock_hz, implied_hz)
    probes = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in rates.items())
    if implied_hz > read_clock_hz:
        source = (f"derived: {cores} cores x {lanes} lanes x {fma_units} FMA x 2 x "
                  f"{clock_hz / 1e9:.3f} GHz, the clock implied by the best in-cache fp32 GEMM "
                  f"per core ({best}: {best_rate / 1e9:.1f} GFLOP/s; probes, GFLOP/s: {probes}) "
                  f"above the reported {read_clock_hz / 1e9:.3f} GHz (the cores boost)")
    else:
        source = (f"derived: {cores} cores x {lanes} lanes x {fma_units} FMA x 2 x "
                  f"{clock_hz / 1e9:.3f} GHz (the reported clock; the best in-cache fp32 GEMM "
                  f"per core, {best or 'none'}: {best_rate / 1e9:.1f} GFLOP/s, is below it; "
                  f"probes, GFLOP/s: {probes or 'none'})")
    return HostPeak(peak_flops_per_s=cores * per_cycle * clock_hz, clock_hz=clock_hz,
                    read_clock_hz=read_clock_hz, best_per_core_flops_per_s=best_rate,
                    best_probe=best, source=source)
