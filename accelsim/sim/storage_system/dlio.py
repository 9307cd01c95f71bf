"""MLPerf Storage's DLIO emulation run against a storage system described from its parts.

Each emulated accelerator (spread evenly over the system's client hosts) reads its batches
with `read_threads` readers and then sleeps `computation_time_s`, as DLIO does; up to
max(prefetch, read_threads) batches load at once, ahead of the one computing. A batch's read
pays its file requests' fixed cost (the class's round trip plus the drive's latency, the
slowest thread's requests one after another) and then moves its bytes as one flow (weight =
its busy threads) through the host's and the shared parts
(`accelsim.sim.storage_system.fluid`). AU and throughput (as DLIO counts it: samples consumed
x their bytes) are measured per accelerator over the second half of the steps, less the last
loads.

    rec = emulate_system(load_emulation("h100", "unet3d"),
                         load_storage_system("Micron_9550_Gen5_Performance_NVMe"), 4)
    rec["accelerator_utilization"], rec["parts"]

NB: the emulated accelerators do not synchronise (DLIO's ranks meet only at epoch ends), and
no read is served by a page cache (the dataset is 5 x the hosts' DRAM, read in a new order
every epoch).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import simpy

from accelsim.errors import AccelsimError
from accelsim.profiles.datasets import Dataset
from accelsim.profiles.emulation import Emulation
from accelsim.profiles.storage_systems import StorageSystem
from accelsim.sim.mlperf_storage import stretched_dataset
from accelsim.sim.readplan import read_plan
from accelsim.sim.storage_system.fluid import SharedReads
from accelsim.sim.storage_system.parts import Parts, parts_of

STEPS = 80  # per accelerator; AU over the second half (40 leaves a start-up wave in it)
PREFETCH = 2  # batches read ahead (DLIO's prefetch_size)
MAX_BATCH_READS = 2_000_000  # accelerators x steps one run may simulate (about 2 minutes)
# NB: a part busy this share of the measured time is named saturated (below it, queueing at
# the part still slows the readers, but something else paces them too).
SATURATED = 0.85


def emulated_dataset(emu: Emulation, system: StorageSystem) -> Dataset:
    """The workload's dataset as DLIO runs it: stretched over the DRAM of all client hosts
    (`accelsim.sim.mlperf_storage.stretched_dataset`)."""
    return stretched_dataset(emu, system.clients.hosts * system.clients.dram_bytes)


def host_of(accelerators: int, hosts: int) -> np.ndarray:
    """The client host of each emulated accelerator: dealt evenly, the first hosts one more."""
    return np.arange(accelerators) % hosts


def emulate_system(emu: Emulation, system: StorageSystem, accelerators: int,
                   steps: int = STEPS, prefetch: int = PREFETCH, seed: int = 0) -> dict[str, Any]:
    """One MLPerf Storage run of `accelerators` emulated accelerators on `system`: AU,
    samples/s, storage throughput (bytes/s) and each part's busy share. JSON-ready."""
    if steps < 4:
        raise AccelsimError(f"MLPerf Storage emulation: 'steps' = {steps}: needs at least 4 "
                            "(AU is measured over the second half)")
    if accelerators < 1:
        raise AccelsimError(f"MLPerf Storage emulation: {accelerators} accelerators: needs 1 "
                            "or more")
    if accelerators * steps > MAX_BATCH_READS:
        raise AccelsimError(f"MLPerf Storage emulation: {accelerators:,} accelerators x "
                            f"{steps:,} steps = {accelerators * steps:,} batch reads, over the "
                            f"limit of {MAX_BATCH_READS:,}: simulate fewer steps or "
                            "accelerators")
    ds = emulated_dataset(emu, system)
    plan = read_plan(ds, devices=accelerators, batch=emu.batch_size,
                     io_threads=emu.read_threads, steps=steps, epochs=1, seed=seed)
    request_bytes = float(plan.bytes.sum() / max(int(plan.requests.sum()), 1))
    parts = parts_of(system, request_bytes, ds.stored_bytes_per_sample,
                     ds.file_size_mean_bytes)
    if not math.isfinite(min(parts.host_cap_bytes_per_s, parts.shared_cap_bytes_per_s)):
        raise AccelsimError(f"storage system '{system.name}': no part bounds its reads (every "
                            "capacity is unbounded): give its drives a read bandwidth")
    hosts = system.clients.hosts
    env = simpy.Environment()
    reads = SharedReads(env, np.full(hosts, parts.host_cap_bytes_per_s),
                        parts.shared_cap_bytes_per_s)
    host = host_of(accelerators, hosts)
    steps = plan.steps
    end_s = np.zeros((accelerators, steps))
    skip = steps // 2
    window: dict[str, Any] = {}

    # NB: as DLIO's loaders (PyTorch workers, tf.data parallel reads) several batches load at
    # once: up to max(prefetch, read_threads), each started when a slot frees.
    in_flight = max(prefetch, emu.read_threads)

    def accelerator(d: int) -> Any:
        done = [env.event() for _ in range(steps)]
        done[-1].callbacks.append(last_loaded)
        for g in range(min(in_flight, steps)):
            start_load(d, g, done[g])
        for g in range(steps):
            yield done[g]
            yield env.timeout(emu.computation_time_s)
            end_s[d, g] = env.now
            if g == skip - 1 and "t0_s" not in window:
                window.update(t0_s=env.now, served0=reads.served_bytes)
            if g + in_flight < steps:  # its slot frees: the next batch starts loading
                start_load(d, g + in_flight, done[g + in_flight])

    def start_load(d: int, g: int, done: simpy.Event) -> None:
        """Batch g of accelerator d: its requests' fixed cost, then its bytes as one flow
        (callbacks, not a process: two events per batch)."""
        n_bytes = plan.bytes[g, d]
        # NB: each thread's file requests run one after another; the slowest sets it.
        wait = env.timeout(int(plan.requests[g, d].max()) * parts.request_latency_s)
        wait.callbacks.append(lambda _ev: reads.read(
            int(host[d]), float(n_bytes.sum()), float((n_bytes > 0).sum()), done))

    def last_loaded(_ev: simpy.Event) -> None:
        if "t1_s" not in window:  # the first to load its last batch ends the window
            window.update(t1_s=env.now, served1=reads.served_bytes)  # of full load

    for d in range(accelerators):
        env.process(accelerator(d))
    env.run()
    # AU and throughput over steps [skip, last): the batches after `last` load with the
    # loader's slots emptying (no later batch to fetch), which would flatter the storage.
    last = max(steps - in_flight, skip + 1)
    span_s = end_s[:, last - 1] - end_s[:, skip - 1]
    measured = last - skip
    au = np.minimum(measured * emu.computation_time_s / span_s, 1.0)
    window_samples = plan.samples[skip:last].sum(axis=(0, 2))
    window_bytes = plan.bytes[skip:last].sum(axis=(0, 2))
    # The parts' load: over the time every reader was still reading
    # (from the first accelerator's step `skip` to the first reader's last batch).
    t0_s, t1_s = window["t0_s"], max(window.get("t1_s", env.now), window["t0_s"])
    if t1_s <= t0_s:  # the window closed before it opened (few steps): the whole second half
        t1_s, served1 = env.now, reads.served_bytes
    else:
        served1 = window["served1"]
    served = served1 - window["served0"]
    span_load_s = max(t1_s - t0_s, 1e-12)
    return {
        "accelerators": accelerators,
        "hosts": hosts,
        "accelerator_utilization": float(au.mean()),
        "samples_per_s": float((window_samples / span_s).sum()),
        # As DLIO reports it: the samples the accelerators consumed per second x their bytes.
        "storage_throughput_bytes_per_s": float((window_bytes / span_s).sum()),
        "request_bytes": request_bytes,
        "parts": part_use(parts, served, span_load_s, hosts),
    }


def part_use(parts: Parts, served_bytes: np.ndarray, span_s: float,
             hosts: int) -> list[dict[str, Any]]:
    """Each part's capacity and busy share over `span_s` (host parts: the busiest host),
    busiest first; a part at `SATURATED` or more is marked so."""
    rows = []
    for name, cap in parts.host_bytes_per_s.items():
        busy = float(served_bytes.max() / (cap * span_s)) if span_s > 0 else 0.0
        rows.append({"part": name, "per": "host", "count": hosts,
                     "capacity_gb_s": cap / 1e9, "busy": busy})
    for name, cap in parts.shared_bytes_per_s.items():
        busy = float(served_bytes.sum() / (cap * span_s)) if span_s > 0 else 0.0
        rows.append({"part": name, "per": "system", "count": 1,
                     "capacity_gb_s": cap / 1e9, "busy": busy})
    rows.sort(key=lambda r: -r["busy"])
    for r in rows:
        r["saturated"] = r["busy"] >= SATURATED
    return rows
