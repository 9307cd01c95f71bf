"""One calibration run: measure this host, fit, and write its profiles.

    result = calibrate(Path("calibration"))   # 1.5 min on 2 idle cores, ~3 on a busy host
    result.files      # {"cpu": .../host-cpu.toml, "software": .../numpy-host.toml, ...}

Steps (a bar on stderr, in estimated seconds: `progress`): host facts; a memory stream;
JPEG decode (Pillow);
an in-cache GEMM at one thread and every core (`peak`: the peak written is at least its best
rate per core), from which with the load average the host is judged busy or idle
(`contention`; busy: `on_busy`); RAPL's power limit where readable (`power`);
the time per fresh page of numpy's temporaries (`alloc_bench`, glibc only); numpy's element
passes (weight casts, int8 quantisation, an fp32 GEMV's stream) at 2^17 to 2^24 elements
(`pass_bench`: the stack's `[cpu_passes]` tables); the host speed
probes (`probe`, before and after the cases); every kernel case (`cases.kernel_cases`) at each
precision through the project's numpy kernels (matmuls timed as a forward pass times them);
the closed-form fit (`fit.fit_with_pack`, less each case's measured fault time); disk
bandwidth and IOPS on a temporary file under the output folder; PyTorch as a second stack
where it is importable; a check that `simulate` runs on what was written (`guard`). Writes
`host-cpu.toml` (device profile), `numpy-host.toml` (software stack), `host-disk.toml`
(storage medium), `pytorch-host.toml` (where measured) and `calibration.json` (every timing,
its repeats and spread, the host's load, and every fit error).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from accelsim.calibrate.alloc_bench import measure_allocator
from accelsim.calibrate.cases import (
    BUDGETS,
    Clock,
    kernel_cases,
    stream_bandwidth_bytes_per_s,
)
from accelsim.calibrate.contention import HostLoad, assess_load, load_average_1m
from accelsim.calibrate.fit import (
    simulated_relative_errors,
    with_group_figures,
)
from accelsim.calibrate.guard import check_simulates
from accelsim.calibrate.host import HostFacts, host_facts
from accelsim.calibrate.io_bench import measure_disk, measure_jpeg_decode
from accelsim.calibrate.pass_bench import PASS_SIZES, measure_passes
from accelsim.calibrate.peak import blas_threads, numpy_blas_threads, sustained_rates
from accelsim.calibrate.power import read_rapl
from accelsim.calibrate.probe import host_speed_probe_s
from accelsim.calibrate.progress import Progress, plan_steps
from accelsim.calibrate.timed_fit import fit_cases
from accelsim.calibrate.write import (
    clamped,
    cpu_profile,
    key_errors,
    measured_stack,
    storage_profile,
    with_allocator,
    with_passes,
    write_profile,
)
from accelsim.errors import AccelsimError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import load_stack
from accelsim.profiles.storage import load_storage
from accelsim.results.files import output_folder, write_atomic
from accelsim.results.jsontext import json_text

# What a budget measures: precisions, repeats per case, stream / disk bytes, JPEG decodes.
PLAN = {
    "full": {"precisions": ("fp32", "fp16", "bf16", "int8"), "repeats": 2, "passes": 2,
             "stream_bytes": 64 << 20, "disk_bytes": 128 << 20, "random_reads": 2000,
             "jpegs": 16},
    "tiny": {"precisions": ("fp32",), "repeats": 2, "passes": 1, "stream_bytes": 8 << 20,
             "disk_bytes": 4 << 20, "random_reads": 100, "jpegs": 2},
}
ALLOCATOR_REPEATS = 5
STREAM_REPEATS = 20
PASS_REPEATS = 3  # timed runs per element pass, size and sweep (least of; 8 s a sweep)
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
ON_BUSY = ("cpu-time", "refuse", "wall")  # what a busy host gets (`calibrate`'s `on_busy`)
SHARED_HOST_NOTE = ("each figure is the least of several runs, to filter out other processes; "
                    "on a host shared with other work the figures still lean slow")


@dataclass
class Calibration:
    """What a run wrote (`files`: kind -> path) and measured (`summary`, also written as
    calibration.json)."""

    files: dict[str, Path] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


def _torch_step(out_dir: Path, profile: Any, facts: HostFacts, date: str, plan: dict[str, Any],
                cases: list[Any], bar: Progress, clock: Clock, host_text: str
                ) -> tuple[Path | None, dict[str, Any]]:
    """PyTorch as a second stack where it is importable (else None and why)."""
    if not _torch_importable():
        return None, {"skipped": "PyTorch is not importable here: no second stack"}
    from accelsim.calibrate.torch_cases import torch_timer

    precisions = _torch_precisions(plan["precisions"])
    fit, rows = fit_cases(profile, precisions, plan, cases, bar, clock, torch_timer(),
                           weight_casts=False, stack="torch")
    import torch

    note = (f"{len(rows)} cases of {', '.join(precisions)}, {_clock_name(clock)}, "
            f"{torch.get_num_threads()} thread(s), {host_text}; median |fit error| "
            f"{fit.median_abs_error:.1%}")
    data = measured_stack(
        f"PyTorch {torch.__version__} eager on {facts.hostname} ({facts.cores} CPUs), measured",
        with_group_figures(fit.efficiency), fit.per_kernel_s, False,
        profile.compute.single_thread_equiv_clock_hz / 1e9, facts.hostname, date, note,
        key_errors(rows))
    path = write_profile(out_dir / "pytorch-host.toml", data,
                         "Software stack measured by accelsim calibrate (PyTorch, CPU)")
    check_simulates(out_dir / "host-cpu.toml", path, precisions)
    return path, {"version": torch.__version__, "per_kernel_s": fit.per_kernel_s,
                  "efficiency": fit.efficiency, "median_abs_fit_error": fit.median_abs_error,
                  "clamped": clamped(with_group_figures(fit.efficiency)),
                  "cases": rows}


def _on_busy(load: HostLoad, on_busy: str, cpu_time: bool) -> bool:
    """Whether to time by CPU time on one thread from here (`load`: the host before the cases;
    `on_busy`: `ON_BUSY`); AccelsimError where a busy host is refused."""
    if cpu_time or not load.busy or on_busy == "wall":
        return cpu_time
    if on_busy == "refuse":
        raise AccelsimError(f"calibrate: {load.text()}: refused (--on-busy refuse); rerun "
                            "when the host is idle, or with --on-busy cpu-time")
    return True


def calibrate(out_dir: Path, budget: str = "full", progress: bool = True,
              torch: bool = True, cpu_time: bool = False, on_busy: str = "cpu-time"
              ) -> Calibration:
    """Measure this host and write its profiles under `out_dir` (see the module docstring).
    `budget="tiny"` measures a few small sizes in fp32 only (tests). `cpu_time`: time kernels
    by the process's CPU time instead of the wall clock, numpy's BLAS (and PyTorch) on one
    thread (NB: on a host shared with other work, the time the kernels would take alone on
    one core). `on_busy` (`ON_BUSY`), where the host is busy before the cases
    (`contention.assess_load`): "cpu-time" switches to that, "refuse" raises, "wall" keeps
    the wall clock; either way the host's load is said and written. Raises AccelsimError for
    an unknown budget or policy, or an unwritable folder."""
    if budget not in BUDGETS:
        raise AccelsimError(f"calibration budget '{budget}': choose one of {', '.join(BUDGETS)}")
    if on_busy not in ON_BUSY:
        raise AccelsimError(f"calibrate --on-busy '{on_busy}': choose one of "
                            f"{', '.join(ON_BUSY)}")
    load_start = load_average_1m()  # NB: before this process loads the host
    with ExitStack() as threads:
        return _calibrate(out_dir, budget, progress, torch, cpu_time, on_busy, load_start,
                          threads)


def _calibrate(out_dir: Path, budget: str, progress: bool, torch: bool, cpu_time: bool,
               on_busy: str, load_start: float | None, threads: ExitStack) -> Calibration:
    plan = PLAN[budget]
    out_dir = output_folder(out_dir, "calibrate --out")
    cases = kernel_cases(budget)
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    result = Calibration()
    progress_bar = Progress(progress)
    plan_steps(progress_bar, budget, cases, plan["precisions"], plan["passes"],
               _torch_precisions(plan["precisions"]) if torch and _torch_importable() else None)
    with progress_bar as bar:
        bar.begin("facts", "host facts and memory stream")
        facts = host_facts()
        stream = stream_bandwidth_bytes_per_s(plan["stream_bytes"], STREAM_REPEATS)
        bar.end("facts")
        bar.begin("jpeg", "JPEG decode")
        jpeg_s, jpeg_note = measure_jpeg_decode(plan["jpegs"])
        jpeg_text = (f"JPEG decode {jpeg_s * 1e3:.2f} ms per image on one core ({jpeg_note})."
                     if jpeg_s is not None else f"{jpeg_note}.")
        bar.end("jpeg")
        bar.begin("rates", "in-cache GEMM rate per thread count")
        rates = sustained_rates(facts.cores, torch=torch and _torch_importable())
        before = assess_load(facts.cores, load_start, rates)
        asked_cpu_time = cpu_time
        cpu_time = _on_busy(before, on_busy, cpu_time)
        clock: Clock = time.process_time if cpu_time else time.perf_counter
        one_thread = cpu_time and threads.enter_context(numpy_blas_threads(1))
        if cpu_time and torch and _torch_importable():
            threads.enter_context(_torch_threads(1))
        rapl = read_rapl()
        data, peak = cpu_profile(facts, stream, date, jpeg_text, rates, rapl)
        data["notes"] += f" Host before the cases: {before.text()}."
        result.files["cpu"] = write_profile(out_dir / "host-cpu.toml", data,
                                            "CPU device profile measured by accelsim calibrate")
        profile = load_profile(result.files["cpu"])
        bar.end("rates")
        bar.begin("allocator", "fresh page faults")
        figures = measure_allocator(ALLOCATOR_REPEATS, clock=clock)
        allocator = None if figures is None else (
            figures.fresh_page_s, figures.page_bytes, figures.mmap_threshold_bytes)
        bar.end("allocator")
        bar.begin("passes", "element passes")
        passes = measure_passes(plan["precisions"], PASS_SIZES[budget], PASS_REPEATS, clock,
                                plan["passes"])
        bar.end("passes")
        probes = [host_speed_probe_s(clock=clock)]
        energy_uj, start_s = (rapl.energy_uj() if rapl else ()), time.perf_counter()
        fit, rows = fit_cases(profile, plan["precisions"], plan, cases, bar, clock,
                               weight_casts=True, allocator=allocator, passes=passes)
        cases_w = rapl.mean_power_w(energy_uj, rapl.energy_uj(), time.perf_counter() - start_s) \
            if rapl else None
        probes.append(host_speed_probe_s(clock=clock))
        # (the load average is judged before the cases only: during them it counts this run)
        after = assess_load(facts.cores, None, rates,
                            [x for r in rows for x in r.get("cpu_over_wall", ())],
                            [r["spread"] for r in rows])
        n_blas = blas_threads()
        host_text = (f"numpy's BLAS on {n_blas if n_blas is not None else 'its default'} "
                     f"thread(s), {after.text()}"
                     + (" (switched to CPU time on one thread: busy before the cases)"
                        if cpu_time and not asked_cpu_time else ""))
        note = (f"{len(rows)} cases of {', '.join(plan['precisions'])}, {_clock_name(clock)}, "
                f"{host_text}; median |fit error| {fit.median_abs_error:.1%}")
        blas = _blas_name()
        stack = measured_stack(
            f"accelsim's numpy kernels (numpy {np.__version__}, {blas}) on {facts.hostname}, "
            "measured", with_group_figures(fit.efficiency), fit.per_kernel_s, True,
            profile.compute.single_thread_equiv_clock_hz / 1e9, facts.hostname, date, note,
            key_errors(rows))
        stack = with_allocator(stack, figures, facts.hostname, date, _clock_name(clock))
        stack = with_passes(stack, passes, facts.hostname, date, _clock_name(clock))
        result.files["software"] = write_profile(
            out_dir / "numpy-host.toml", stack, "Software stack measured by accelsim calibrate")
        check_simulates(result.files["cpu"], result.files["software"], plan["precisions"])
        written = load_stack(result.files["software"])
        simulated = simulated_relative_errors(profile, written, cases, rows)
        for row, err in zip(rows, simulated, strict=True):
            row["simulated_relative_error"] = float(err)
        bar.begin("disk", "disk read bandwidth and IOPS")
        try:
            disk = measure_disk(out_dir, plan["disk_bytes"], plan["random_reads"])
        except OSError as err:
            raise AccelsimError(f"calibrate: cannot measure the disk under {out_dir} "
                                f"({err.strerror or err})") from None
        result.files["storage"] = write_profile(
            out_dir / "host-disk.toml", storage_profile(disk, facts.hostname, date),
            "Storage medium measured by accelsim calibrate")
        load_storage(result.files["storage"])
        bar.end("disk")
        torch_path, torch_summary = (_torch_step(out_dir, profile, facts, date, plan, cases, bar,
                                                   clock, after.text())
                                     if torch else (None, {"skipped": "not asked"}))
        if torch_path is not None:
            result.files["software_torch"] = torch_path
    result.summary = {
        "host": facts.hostname, "cpu": facts.model_name, "cores": facts.cores, "date": date,
        "python": platform.python_version(), "numpy_version": np.__version__, "blas": blas,
        "budget": budget, "note": SHARED_HOST_NOTE,
        "clock": _clock_name(clock), "cpu_time_asked": asked_cpu_time, "on_busy": on_busy,
        "switched_to_cpu_time": cpu_time and not asked_cpu_time,
        "blas_threads": n_blas, "blas_one_thread_set": bool(one_thread),
        "host_load_before": before.as_dict(), "host_load": after.as_dict(),
        "load_1m_end": load_average_1m(),
        "power": {"rapl_zones": [str(z) for z in rapl.zones] if rapl else [],
                  "tdp_w": data["power"]["tdp_w"],
                  "limits_clock": data["power"].get("limits_clock", True),
                  "package_mean_w_during_cases": cases_w},
        "blas_threads_env": {k: os.environ[k] for k in BLAS_THREAD_VARS if k in os.environ},
        "fp32_vector_peak_flops_per_s": peak, "stream_bytes_per_s": stream,
        "gemm_probe_flops_per_s": rates, "clock_mhz": data["compute"]["clock_mhz"],
        "reported_clock_mhz": data["compute"].get("base_clock_mhz",
                                                  data["compute"]["clock_mhz"]),
        "host_speed_probe_s": {k: min(p[k] for p in probes) for k in probes[0]},
        "host_speed_probes_s": probes,
        "allocator": None if figures is None else {
            "fresh_page_s": figures.fresh_page_s, "page_bytes": figures.page_bytes,
            "mmap_threshold_bytes": figures.mmap_threshold_bytes, "note": figures.note},
        "element_passes_ns_per_element": {
            name: dict(zip((str(int(w)) for w in t.working_set_bytes),
                           (s * 1e9 for s in t.s_per_element_points), strict=True))
            for name, t in passes.items()},
        "jpeg_decode_s_per_image": jpeg_s, "jpeg_note": jpeg_note,
        "disk": {"read_bandwidth_bytes_per_s": disk.read_bandwidth_bytes_per_s,
                 "random_read_4k_iops": disk.random_read_4k_iops,
                 "request_latency_s": disk.request_latency_s, "kind": disk.kind,
                 "cached": disk.cached},
        "numpy": {"per_kernel_s": fit.per_kernel_s, "efficiency": fit.efficiency,
                  "median_abs_fit_error": fit.median_abs_error,
                  "median_abs_simulated_error": float(np.median(np.abs(simulated))),
                  "clamped": clamped(with_group_figures(fit.efficiency)),
                  "cases": rows},
        "pytorch": torch_summary,
        "files": {k: str(v) for k, v in result.files.items()},
    }
    result.files["summary"] = out_dir / "calibration.json"
    write_atomic(result.files["summary"], json_text(result.summary, indent=1) + "\n")
    return result


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _torch_precisions(precisions: tuple[str, ...]) -> tuple[str, ...]:
    """The formats PyTorch's cases run, of `precisions` (PyTorch must be importable)."""
    from accelsim.calibrate.torch_cases import TORCH_PRECISIONS

    return tuple(p for p in precisions if p in TORCH_PRECISIONS)


def _torch_importable() -> bool:
    return importlib.util.find_spec("torch") is not None


def _clock_name(clock: Clock) -> str:
    return "timed by process CPU time" if clock is time.process_time else "timed by wall time"


def _blas_name() -> str:
    """The BLAS numpy is built against, as numpy's build config names it."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', 'BLAS')} {blas.get('version', '')}".strip()
    except (TypeError, KeyError, AttributeError):
        return "BLAS unknown"
