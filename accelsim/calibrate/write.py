"""Write what a calibration measured as the project's normal data files: a CPU device profile
(`hw_profiles/devices` schema), a software stack (`hw_profiles/software`) and a storage medium
(`hw_profiles/storage`), each with a `[sources]` entry per figure.

    text = toml_text({"class": "cpu", "compute": {"cores": 2}}, "header comment")

The files load with `load_profile`, `load_stack` and `load_storage` like the built-in ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from accelsim.calibrate.host import HostFacts, memory_technology, nearest_builtin
from accelsim.calibrate.io_bench import DiskResult
from accelsim.calibrate.peak import host_peak
from accelsim.calibrate.power import POWERCAP, Rapl
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import (
    CPU_PEAK_KERNELS,
    MAX_CPU_EFFICIENCY,
    MAX_PEAK_EFFICIENCY,
)
from accelsim.results.files import write_atomic

FMA_UNITS_ASSUMED = 2  # NB: two FMA pipes per core (every x86 core since Haswell / Zen 3)
SIGNIFICANT = 4  # digits kept of a measured figure
BF16_DOT_FLAGS = frozenset({"avx512_bf16"})  # x86 flags of a bf16 dot-product instruction
BF16_DOT_RATE = 2  # bf16 products per fp32 lane per FMA slot (VDPBF16PS)
FALLBACK_CLOCK_HZ = 1e9  # stands in where the host exposes no clock (labelled assumed)
CLOCK_FILES = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq nor /proc/cpuinfo 'cpu MHz'"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"not a finite number: {v}")
        return repr(float(f"{v:.{SIGNIFICANT}g}"))
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def toml_text(data: dict[str, Any], header: str) -> str:
    """`data` (scalars first, then tables, nested tables dotted) as TOML under `# header`."""
    lines = [f"# {line}" for line in header.splitlines()]

    def emit(table: dict[str, Any], prefix: str) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        if prefix and scalars:
            lines.append(f"\n[{prefix}]")
        for k, v in scalars.items():
            key = k if k.replace("_", "").isalnum() else json.dumps(k)
            lines.append(f"{key} = {_value(v)}")
        for k, v in table.items():
            if isinstance(v, dict):
                emit(v, f"{prefix}.{k}" if prefix else k)

    emit(data, "")
    return "\n".join(lines) + "\n"


def measured(host: str, date: str, what: str = "") -> str:
    """The source text of a measured figure."""
    return f"measured: accelsim calibrate on {host}, {date}" + (f" ({what})" if what else "")


def cpu_profile(facts: HostFacts, stream_bytes_per_s: float, date: str,
                jpeg_note: str, rates: dict[str, float] | None = None,
                rapl: Rapl | None = None) -> tuple[dict[str, Any], float]:
    """(the CPU profile of this host as TOML data, its fp32 vector peak in FLOP/s). `rates`:
    the in-cache GEMM probes (`peak.sustained_rates`, FLOP/s by name; None: none): the peak is
    at least the best of them per core (`peak.host_peak`), at the clock that implies where it
    is above the reported one (which is then written as `base_clock_mhz`). `rapl`: the
    readable RAPL zones (`power.read_rapl`): their power limit is the TDP; without one the TDP
    is assumed and marked as not limiting the clock (`power.limits_clock = false`)."""
    src = measured(facts.hostname, date)
    clock_read_hz = facts.max_clock_hz or facts.clock_hz
    # NB: a host that exposes no clock gets a placeholder; the fitted efficiencies absorb it.
    read_hz = clock_read_hz or FALLBACK_CLOCK_HZ
    clock_src = (f"{src}: read from {facts.clock_source}" if clock_read_hz else
                 f"assumed: {FALLBACK_CLOCK_HZ / 1e9:g} GHz placeholder: this host exposes "
                 f"neither {CLOCK_FILES}; the peaks derived from it are not this CPU's, but the "
                 "stack's efficiencies fitted against them keep this host's predictions "
                 "calibrated")
    fma = FMA_UNITS_ASSUMED if facts.has_fma else 1
    lanes = facts.simd_width_bits // 32
    # NB: AVX512_BF16's VDPBF16PS multiplies two bf16 pairs per fp32 lane per instruction
    bf16_dot = bool(BF16_DOT_FLAGS & facts.flags)
    host = host_peak(read_hz, facts.cores, lanes, fma, rates or {})
    clock_hz, peak = host.clock_hz, host.peak_flops_per_s
    if host.boosted:
        clock_src = (f"derived: the clock the best in-cache fp32 GEMM per core implies "
                     f"({host.best_probe}, {host.best_per_core_flops_per_s / 1e9:.1f} GFLOP/s "
                     f"over {lanes} lanes x {fma} FMA x 2 per cycle; {src}), above the "
                     f"reported one (compute.base_clock_mhz): the cores boost")
    ref = load_profile(nearest_builtin(facts))
    power, power_sources = _power(facts, ref, src, rapl)
    compute: dict[str, Any] = {
        "clock_mhz": round(clock_hz / 1e6, 1),
        **({"base_clock_mhz": round(read_hz / 1e6, 1)} if host.boosted else {}),
        "single_thread_equiv_clock_ghz": round(clock_hz / 1e9, 3),
        "cores": facts.cores, "threads": facts.cores, "sockets": 1,
        "simd_width_bits": facts.simd_width_bits, "fma_units_per_core": fma,
        "vector": {"peak_tflops_fp32": peak / 1e12,
                   **({"peak_tflops_bf16": BF16_DOT_RATE * peak / 1e12} if bf16_dot else {})}}
    offchip: dict[str, Any] = {"technology": memory_technology(facts),
                               "bandwidth_gb_s": stream_bytes_per_s / 1e9}
    if facts.memory_bytes:
        offchip["capacity_gb"] = round(facts.memory_bytes / 1e9, 2)
    sources = {
        "compute.clock_mhz": clock_src,
        "compute.single_thread_equiv_clock_ghz": "assumed: the clock above x IPC 1.0 relative "
        "to Sunny Cove (not measured; the numpy stack's host times are at this clock)",
        "compute.cores": f"{src}: os.sched_getaffinity (logical CPUs this process may use)",
        "compute.threads": f"{src}: os.sched_getaffinity",
        "compute.sockets": "defined: one socket per profile (project convention)",
        "compute.simd_width_bits": f"{src}: /proc/cpuinfo flags",
        "compute.fma_units_per_core": f"assumed: {fma} FMA pipe(s) per core (not exposed by "
        "the OS)",
        "compute.vector.peak_tflops_fp32": host.source,
        "offchip_memory.technology": "assumed: guessed from the CPU family "
        "(accelsim.calibrate.host.memory_technology); not exposed in a VM",
        "offchip_memory.bandwidth_gb_s": f"{src}: np.copyto of a float32 array, bytes read "
        "+ written over the least time (one thread: a lower bound of the socket's)",
        **power_sources,
    }
    if bf16_dot:
        sources["compute.vector.peak_tflops_bf16"] = (
            f"derived: {BF16_DOT_RATE} x the fp32 vector peak: /proc/cpuinfo flags "
            f"{'/'.join(sorted(BF16_DOT_FLAGS & facts.flags))} (a bf16 dot-product "
            "instruction, two products per fp32 lane)")
    if host.boosted:
        sources["compute.base_clock_mhz"] = (f"{src}: read from {facts.clock_source}"
                                             if clock_read_hz else clock_src)
    if facts.memory_bytes:
        sources["offchip_memory.capacity_gb"] = f"{src}: /proc/meminfo MemTotal"
    onchip: dict[str, Any] = {}
    if facts.l3_cache_bytes:
        onchip["l3_cache_mib"] = round(facts.l3_cache_bytes / 2**20, 3)
        sources["onchip_memory.l3_cache_mib"] = f"{src}: /sys/devices/system/cpu/cpu0/cache"
    else:
        onchip["l3_cache_mib"] = ref.onchip_memory.capacity_bytes / 2**20
        sources["onchip_memory.l3_cache_mib"] = f"assumed: {ref.name}'s (not exposed)"
    data = {
        "class": "cpu", "display_name": f"{facts.model_name} ({facts.cores} CPUs, this host)",
        "vendor": facts.vendor,
        "notes": f"Calibrated on {facts.hostname}, {date}. {jpeg_note}",
        "compute": compute, "onchip_memory": onchip, "offchip_memory": offchip,
        "power": power, "sources": sources}
    return data, peak


def _power(facts: HostFacts, ref: Any, src: str, rapl: Rapl | None
           ) -> tuple[dict[str, Any], dict[str, str]]:
    """The profile's [power] table and its sources: RAPL's limit where readable, else the
    nearest built-in's TDP per core, marked as not limiting the clock."""
    if rapl is not None and rapl.limit_w:
        files = ", ".join(str(z / "constraint_0_power_limit_uw") for z in rapl.zones)
        return ({"tdp_w": round(rapl.limit_w, 1)},
                {"power.tdp_w": f"{src}: the packages' long-term RAPL limit, read from {files}"})
    tdp_w = ref.power.tdp_w * facts.cores / float(ref.compute.cores)
    why = ("RAPL's energy counters are readable but give no power limit" if rapl is not None
           else f"no RAPL zone is readable under {POWERCAP} (a VM, or counters readable by "
           "root only)")
    return ({"tdp_w": round(tdp_w, 1), "limits_clock": False},
            {"power.tdp_w": f"assumed: {ref.name}'s TDP per core x {facts.cores} cores ({why}; "
             "not measured): it prices static power only",
             "power.limits_clock": f"defined: false: {why}, so this host's power limit is "
             "unknown and does not throttle the clock in simulate"})


def storage_profile(disk: DiskResult, host: str, date: str) -> dict[str, Any]:
    """The storage medium of the disk under the calibration's output folder, as TOML data."""
    src = measured(host, date, f"a temporary file under {disk.path}")
    cached = " (NB: faster than a drive: the page cache probably answered)" if disk.cached \
        else ""
    return {
        "kind": disk.kind,
        "description": f"The disk under {disk.path} on {host}, measured {date}",
        "read_bandwidth_mb_s": disk.read_bandwidth_bytes_per_s / 1e6,
        "random_read_4k_iops": disk.random_read_4k_iops,
        "request_latency_us": disk.request_latency_s * 1e6,
        "max_concurrency": 1,
        "sources": {
            "kind": "assumed: guessed from /sys/dev/block (device name, queue/rotational) and "
            "the measured IOPS (above 1000: not a rotating disk)",
            "read_bandwidth_mb_s": f"{src}: one sequential pass in 1 MiB reads after "
            f"posix_fadvise(DONTNEED){cached}",
            "random_read_4k_iops": f"{src}: 4 KiB reads at random offsets, queue depth 1",
            "request_latency_us": f"{src}: the mean time of one 4 KiB random read",
            "max_concurrency": "defined: 1, the queue depth the IOPS were measured at (a "
            "deeper queue was not measured)",
        }}


def write_profile(path: Path, data: dict[str, Any], header: str) -> Path:
    """Write `data` as TOML to `path` (atomically) and return the path."""
    write_atomic(path, toml_text(data, header))
    return path


MATMUL_CASE_KERNELS = ("gemm", "conv", "attention")
JOINT_FIGURES = ("pack", "quantize", "gemv")  # fitted jointly on a precision's matmul cases


def key_errors(rows: list[dict[str, Any]]) -> dict[str, tuple[float, float, float, int]]:
    """Per fitted figure, (min, median, max) of its cases' fit errors and their count (`rows`:
    `timed_fit.fit_cases`'s, with `key`, `kernel`, `precision` and `fit_relative_error`): a key's
    own cases; for `pack`, `quantize` and `gemv` the precision's matmul cases (they are fitted
    jointly); for a group figure (`vector_<p>`, `stream_<p>`) its group's cases."""
    import numpy as np

    by_key: dict[str, list[float]] = {}
    for row in rows:
        err = row.get("fit_relative_error")
        if err is None:
            continue
        p = row["key"].rpartition("_")[2]
        keys = [row["key"]]
        if row["kernel"] in MATMUL_CASE_KERNELS:
            keys += [f"{k}_{p}" for k in JOINT_FIGURES]
        else:
            keys.append(f"{row['kernel']}_{p}")
        for key in keys:
            by_key.setdefault(key, []).append(float(err))
    return {k: (min(v), float(np.median(v)), max(v), len(v)) for k, v in by_key.items()}


def measured_stack(description: str, efficiency: dict[str, float], per_kernel_s: float,
                   weight_casts: bool, single_thread_ghz: float, host: str,
                   date: str, fit_note: str,
                   errors: dict[str, tuple[float, float, float, int]] | None = None
                   ) -> dict[str, Any]:
    """A software stack whose CPU efficiencies and dispatch time were fitted on this host's
    calibration cases (`accelsim.calibrate.fit`), as TOML data. `weight_casts`: its kernels
    cast the fp32 weights to the format in every call (the numpy kernels), not once (PyTorch
    with weights made in the format). `errors`: per figure, the (min, median, max) fit error
    of its cases and their count (`key_errors`), written in its source."""
    errors = errors or {}
    fit_src = f"accelsim calibrate on {host}, {date}"
    kept = {k: min(v, efficiency_cap(k)) for k, v in sorted(efficiency.items())}
    sources = {
        "host.per_step_us": "defined: the measured forward is the sum of its ops' kernel times "
        "(graph walking and parameter generation are not timed)",
        "host.reference_single_thread_ghz": "defined: this host's single-thread clock (the "
        "CPU profile written beside it), so the host times apply as measured",
        "host.per_kernel_us.cpu": f"fitted: {fit_src}: the per-op intercept shared by every case "
        f"({fit_note})",
        "graph.weight_casts": ("defined: the numpy kernels round (or quantise) the fp32 weights "
                               "to the format inside every matmul call "
                               "(accelsim.kernels.execute)" if weight_casts else
                               "defined: the weights are made in the format once, outside the "
                               "timed calls"),
        "graph.layout_conversions_per_conv": "defined: NCHW throughout, no conversions",
        "efficiency.tensor_core": "defined: 1, the [cpu_efficiency] figures are this stack's own",
        "efficiency.cuda_core": "defined: 1, the [cpu_efficiency] figures are this stack's own",
        "efficiency.dram_bandwidth": "defined: 1, the [cpu_efficiency] figures are this "
        "stack's own",
    }
    for key, value in kept.items():
        capped = f", capped at {value:g} from {efficiency[key]:.3g}" if value < efficiency[key] \
            else ""
        if capped and value == MAX_PEAK_EFFICIENCY:
            capped += (": above the peak, a term the model lacks (a wider SIMD path than the "
                       "profile's, fusion, cache residency), not an efficiency")
        spread = errors.get(key)
        cases = (f"; its {spread[3]} cases' fit error min {spread[0]:+.0%}, median "
                 f"{spread[1]:+.0%}, max {spread[2]:+.0%}" if spread else "")
        sources[f"cpu_efficiency.{key}"] = f"fitted: {fit_src}: of the CPU profile's peak " \
            f"({fit_note}{cases}{capped})"
    return {
        "description": description, "classes": ["cpu"],
        "host": {"per_step_us": 0.0, "reference_single_thread_ghz": single_thread_ghz,
                 "per_kernel_us": {"cpu": per_kernel_s * 1e6}},
        "graph": {"weight_casts": weight_casts, "layout_conversions_per_conv": 0.0},
        "efficiency": {"tensor_core": 1.0, "cuda_core": 1.0, "dram_bandwidth": 1.0},
        "cpu_efficiency": kept, "sources": sources}


def efficiency_cap(key: str) -> float:
    """The most a `[cpu_efficiency]` figure may be written as: 1 for a fraction of the FLOP
    peak (`software.CPU_PEAK_KERNELS`: `simulate` would otherwise run FLOPs above the peak),
    else the loader's range (`software.MAX_CPU_EFFICIENCY`: a cache-resident stream outruns the
    DRAM figure)."""
    kind = key.rpartition("_")[0]
    return MAX_PEAK_EFFICIENCY if kind in CPU_PEAK_KERNELS else MAX_CPU_EFFICIENCY


def clamped(efficiency: dict[str, float]) -> dict[str, tuple[float, float]]:
    """The figures of `efficiency` above their cap (`efficiency_cap`): key -> (fitted, cap)."""
    return {k: (v, efficiency_cap(k)) for k, v in sorted(efficiency.items())
            if v > efficiency_cap(k)}


def with_allocator(stack: dict[str, Any], figures: Any, host: str, date: str, clock: str
                   ) -> dict[str, Any]:
    """`stack` (`measured_stack`'s data) plus its `[allocator]` table from the measured
    `figures` (`alloc_bench.AllocatorFigures`; None: unchanged, no fault term)."""
    if figures is None:
        return stack
    from accelsim.calibrate.alloc_bench import THRESHOLD_SOURCE

    sources = dict(stack["sources"])
    sources.update({
        "allocator.fresh_page_us": measured(host, date, f"{figures.note}, {clock}"),
        "allocator.page_bytes": measured(host, date, "mmap.PAGESIZE"),
        "allocator.mmap_threshold_kib": THRESHOLD_SOURCE,
    })
    return {**stack, "allocator": {
        "fresh_page_us": figures.fresh_page_s * 1e6, "page_bytes": figures.page_bytes,
        "mmap_threshold_kib": figures.mmap_threshold_bytes // 1024}, "sources": sources}


def with_passes(stack: dict[str, Any], tables: dict[str, Any], host: str, date: str,
                clock: str) -> dict[str, Any]:
    """`stack` (`measured_stack`'s data) plus its `[cpu_passes]` tables (`pass_bench`; none:
    unchanged). Each pass's time is measured, so its `[cpu_efficiency]` figure, which the fit
    no longer fits (`fit.unit_work_s`), is not written."""
    if not tables:
        return stack
    from accelsim.calibrate.pass_bench import ROW
    from accelsim.profiles.pass_tables import pass_table_data

    sources = dict(stack["sources"])
    for name in tables:
        sources[f"cpu_passes.{name}"] = measured(
            host, date, f"numpy's {name} pass over a fresh fp32 array of {ROW} columns, the "
            f"least of a few runs per size, {clock}")
    return {**stack, "cpu_passes": pass_table_data(tables), "sources": sources}
