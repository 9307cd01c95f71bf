"""How many emulated accelerators a storage system keeps at MLPerf Storage's AU threshold.

The closed form first: n accelerators read n B bytes per computation_time / au_target, which
the system's capacity C (`Parts.limit`) must carry; then simulations
(`accelsim.sim.storage_system.dlio`) up or down from it until the count that passes and the
next that fails are both simulated.

    rec = max_accelerators_system(load_emulation("h100", "unet3d"),
                                  load_storage_system("Micron_9550_Gen5_Performance_NVMe"))
    rec["max_accelerators"], rec["limit"]
"""

from __future__ import annotations

import math
from typing import Any

from accelsim.physical import MAX_DEVICES
from accelsim.profiles.datasets import Dataset
from accelsim.profiles.emulation import Emulation
from accelsim.profiles.storage_systems import StorageSystem
from accelsim.sim.storage_system.dlio import PREFETCH, STEPS, emulate_system, emulated_dataset
from accelsim.sim.storage_system.parts import parts_of
from accelsim.sim.storage_system.search import largest_passing


def batch_bytes(emu: Emulation, ds: Dataset) -> float:
    """Mean stored bytes of one accelerator's batch."""
    return emu.batch_size * ds.stored_bytes_per_sample


def batch_requests(emu: Emulation, ds: Dataset) -> float:
    """File requests the busiest reader thread of a batch makes (one per file it touches)."""
    files = emu.batch_size / ds.samples_per_file
    return max(math.ceil(files / emu.read_threads), 1)


def closed_form(emu: Emulation, system: StorageSystem) -> dict[str, Any]:
    """The continuous count n at which AU falls to the threshold, its limiting part, and the
    capacity behind it: the accelerators together read n B per computation_time / au_target,
    so n = C x computation_time / (au_target x B); none pass if one alone cannot (its
    requests' fixed cost plus its batch at the host's rate exceed that time)."""
    ds = emulated_dataset(emu, system)
    b = batch_bytes(emu, ds)
    request_bytes = b / max(emu.batch_size / ds.samples_per_file, 1.0)
    parts = parts_of(system, min(request_bytes, ds.file_size_mean_bytes),
                     ds.stored_bytes_per_sample, ds.file_size_mean_bytes)
    cap, part = parts.limit(system.clients.hosts)
    window_s = emu.computation_time_s / emu.au_target
    # NB: batches load several at once (`dlio`), so one batch's fixed cost overlaps the
    # others' transfers; it only bounds an accelerator that has the host to itself.
    k = max(PREFETCH, emu.read_threads)  # batches in flight
    alone_s = (batch_requests(emu, ds) * parts.request_latency_s
               + k * b / min(parts.host_cap_bytes_per_s, parts.shared_cap_bytes_per_s)) / k
    n = window_s * cap / b if alone_s <= window_s else 0.0
    return {"accelerators": n, "limit": part if n else "request latency",
            "capacity_bytes_per_s": cap, "demand_bytes_per_s": b / emu.computation_time_s,
            "parts": parts}


def max_accelerators_system(emu: Emulation, system: StorageSystem, steps: int = STEPS,
                            seed: int = 0, cap: int = MAX_DEVICES) -> dict[str, Any]:
    """The largest count of emulated accelerators that `system` keeps at AU >= au_target,
    simulated, with its run and the next count's. JSON-ready."""
    runs: dict[int, dict[str, Any]] = {}

    def ok(n: int) -> bool:
        if n not in runs:
            runs[n] = emulate_system(emu, system, n, steps=steps, seed=seed)
        return runs[n]["accelerator_utilization"] >= emu.au_target

    closed = closed_form(emu, system)
    lo = largest_passing(ok, math.floor(closed["accelerators"]), cap)
    best, nxt = runs.get(lo), runs.get(lo + 1)
    return {
        "workload": emu.workload, "storage_system": system.name,
        "fs_class": system.fs.name, "client_hosts": system.clients.hosts,
        "emulated_accelerator": emu.accelerator, "au_target": emu.au_target,
        "closed_form_accelerators": closed["accelerators"],
        "closed_form_limit": closed["limit"],
        "demand_per_accelerator_gb_s": closed["demand_bytes_per_s"] / 1e9,
        "max_accelerators": lo,
        "accelerator_utilization": best["accelerator_utilization"] if best else None,
        "storage_throughput_gb_s": (best["storage_throughput_bytes_per_s"] / 1e9
                                    if best else None),
        "parts": best["parts"] if best else (nxt["parts"] if nxt else []),
        "next_accelerator_utilization": nxt["accelerator_utilization"] if nxt else None,
        "next_parts": nxt["parts"] if nxt else [],
        "points_simulated": sorted(runs),
    }
