"""The training pipeline as a SimPy model: IO -> prepare -> transfer -> compute -> all-reduce.

Contention in SimPy's own terms:

- storage: a `Resource` of `max_concurrency x count` request slots (held for a request's
  whole life) and a one-at-a-time service channel (a one-unit `Container`, held for
  max(bytes / bandwidth, IOs / IOPS, bytes / network bandwidth)): latencies overlap across IO
  threads, bandwidth and the IOPS cap are shared. Each accelerator's IO threads are a
  `Container` of `io_threads` units; a read is a process, one per (batch, thread) aggregate
  read (`accelsim.sim.readplan`), so the next batch's reads queue behind this one's, or one per
  group of alike reads (`accelsim.sim.groups`).
- page cache: from the second epoch on, a dataset that fits in host DRAM is read from
  memory at DRAM bandwidth (one shared `Resource`), not from storage; GPUDirect bypasses it.
- host CPU: a `Container` of the cores left after the framework's; prep workers are
  processes, one per (batch, worker) chunk of samples, each holding a core, or one per group
  of alike workers holding a core each (`accelsim.sim.groups`).
- host-to-device links: one per accelerator (a `Container` of one unit, taken without an
  event when free: `accelsim.sim.groups.Pool`); the device-to-device fabric: one `Resource`.
- the node's NICs (multi-node): one `Resource`, held by the cross-node phase of each
  all-reduce and by storage reads over the network, which so contend.
- decode (`accelsim.sim.decode`, `accelsim.sim.stages`): on the host, prep workers before the
  copy; on the device, after it (the compressed bytes cross), on the SMs (one `Resource` per
  accelerator that its training step holds too) or on the hardware JPEG decoder (its own).
- prefetch: a `Container` of N+1 tokens per accelerator. A batch takes one when its read
  starts and gives it back when its training step ends, so N batches load while one trains;
  with N = 0 the stages run one after another.

Each accelerator trains its batch (forward, backward), at its own speed: devices of one class
differ by a fitted spread, so the slowest paces every synchronised step
(`accelsim.sim.straggler`). On the last micro-step of an
accumulation group the gradients are all-reduced over the device-to-device fabric (one
`Resource`): overlapped, bucket by bucket (`accelsim.interconnect.buckets`), each bucket
starting once every device has made its last gradient and the bucket before it is done, while
backward goes on at the speed the running collective leaves it (its share of SMs and memory
bandwidth); not overlapped, as one message once every device has finished backward. Then the
optimizer runs. Time waiting for a batch is a stall, split by where the batch was while the
accelerator waited (still reading: fetch; being prepared: prep; being copied: transfer); time
waiting for the all-reduce after backward is a communication stall. Records:
`accelsim.results.records` (one "allreduce" record per bucket).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from accelsim.interconnect.buckets import advance
from accelsim.results.records import Recorder
from accelsim.sim.allreduce_stage import AllReduceStage, link_j
from accelsim.sim.config import TrainPlan
from accelsim.sim.costs import PhaseCost, StepCosts
from accelsim.sim.groups import GroupedLoads, Pool
from accelsim.sim.readplan import ReadPlan
from accelsim.sim.stages import LoaderStages
from accelsim.sim.straggler import device_slowdowns, slowed


def resource_names(plan: TrainPlan) -> dict[str, str]:
    """Record resource name of each role: storage, network, host_cpu, h2d, d2d."""
    s = plan.system
    h2d = s.host_to_device.kind
    d2d = s.device_to_device.kind if s.device_to_device is not None else "d2d"
    return {"storage": "storage", "network": "network", "host_cpu": "host_cpu", "h2d": h2d,
            "d2d": d2d if d2d not in (h2d, "network", "storage") else f"{d2d}_p2p",
            "dram": "dram"}


class TrainModel(LoaderStages, GroupedLoads, AllReduceStage):
    """One run of the pipeline. Build, call `run()`, read `recorder`."""

    # Most reads or workers one process stands for (`accelsim.sim.groups`); 1: the fine
    # schedule, one process per read and per worker (the reference the tests compare with).
    max_group = 1 << 30

    def __init__(self, plan: TrainPlan, reads: ReadPlan, costs: StepCosts) -> None:
        self.plan, self.reads, self.costs = plan, reads, costs
        self.names = resource_names(plan)
        self.recorder = Recorder()
        self.env = simpy.Environment()
        s, env, n = plan.system, self.env, plan.devices
        medium = s.storage
        self.latency_s = medium.request_latency_s
        if plan.gpudirect and medium.gds_request_latency_s is not None:
            self.latency_s = medium.gds_request_latency_s
        # NB: with jobs sharing the node, this job reads at its share of the storage, the
        # page cache's bandwidth and the NICs (`TrainPlan.share`; the others read alike)
        share = plan.share
        self.storage_bw = s.storage_read_bandwidth_bytes_per_s * share
        self.iops = s.storage_count * medium.random_read_4k_iops * share
        # NB: the whole NIC set of the host carries storage traffic at its achieved bandwidth.
        self.net_bw = (s.nic_count * s.network.achieved_bandwidth_bytes_per_s * share
                       if medium.over_network and s.network is not None else 0.0)
        self.page_bw = s.host.dram_bandwidth_bytes_per_s * share
        slots = max(int(medium.max_concurrency * s.storage_count * share), 1)
        self.slots = simpy.Resource(env, slots) if plan.io_threads * n > slots else None
        self.channel = Pool(env, 1, init=1)
        # The page cache: once read, a dataset that fits in host DRAM is served from memory in
        # later epochs (GPUDirect Storage reads bypass it, as O_DIRECT does).
        # NB: all of host DRAM may cache; the framework's own memory is not subtracted.
        ds = plan.dataset
        self.page_cache = (not plan.gpudirect
                           and ds.file_count * ds.file_size_mean_bytes <= s.host.dram_bytes)
        self.dram_channel = Pool(env, 1, init=1)
        cores = max(plan.prep_cores, 1)
        self.cpu = Pool(env, cores, init=cores)
        self.h2d = [Pool(env, 1, init=1) for _ in range(n)]
        self.d2d = simpy.Resource(env, 1)
        self.nic = simpy.Resource(env, 1)  # NB: the node's NIC rails as one shared channel
        self.io_pool = [Pool(env, plan.io_threads, init=plan.io_threads) for _ in range(n)]
        self.window = [simpy.Container(env, plan.prefetch_batches + 1,
                                       init=plan.prefetch_batches + 1) for _ in range(n)]
        steps, dec = reads.steps, plan.decode
        self.host_prep = not dec.on_device

        def events() -> list[list[simpy.Event]]:
            return [[env.event() for _ in range(steps)] for _ in range(n)]

        # Per (device, step): the batch is read / prepared on the host / on the device /
        # decoded there (stages a run skips alias the one before).
        self.read_ev = events()
        self.prep_ev = events() if self.host_prep else self.read_ev
        self.xfer_ev = self.read_ev if plan.gpudirect else events()
        self.ready_ev = events() if dec.on_device else self.xfer_ev
        self.read_start = np.zeros((n, steps))
        self.read_done = np.zeros((n, steps))
        self.prep_done = np.zeros((n, steps)) if self.host_prep else self.read_done
        self.xfer_done = self.read_done if plan.gpudirect else np.zeros((n, steps))
        self.ready_at = np.zeros((n, steps)) if dec.on_device else self.xfer_done
        # Device decode: on the SMs, which a training step holds too; or on the hardware
        # decoder, beside them.
        self.decoder = ([simpy.Resource(env, 1) for _ in range(n)] if dec.on_device
                        else [])
        self.batch_samples = reads.batch_samples()
        self._arrivals: dict[int, list[tuple[int, float, PhaseCost]]] = {}
        self._comm_done: dict[int, simpy.Event] = {}
        self._cursors: dict[int, dict[int, list[float]]] = {}  # step -> device -> progress
        self._busy: dict[int, list[tuple[float, float]]] = {}  # step -> collective intervals
        # step -> when its last gradients were ready on every device (the slowest's backward)
        self._all_ready: dict[int, float] = {}
        self.contention_s = 0.0  # accelerator time backward lost to running collectives
        # NB: a pageable copy is staged by one core at its share of the host DRAM bandwidth.
        self.copy_bw = s.host.dram_bandwidth_bytes_per_s / s.host.cores
        # Each device's step-time factor: the slowest of all paces synchronised steps.
        self.slowdown = device_slowdowns(n, n * plan.nodes, plan.device_spread)
        self._device_costs: dict[tuple[int, int], PhaseCost] = {}

    def run(self) -> Recorder:
        for d in range(self.plan.devices):
            self.env.process(self._reader(d))
            if self.host_prep:
                self.env.process(self._preparer(d))
            if not self.plan.gpudirect:
                self.env.process(self._transferer(d))
            if self.plan.decode.on_device:
                self.env.process(self._decoder(d))
            self.env.process(self._trainer(d))
        self.env.run()
        return self.recorder

    # ------------------------------------------------------------------ IO

    def _reader(self, d: int) -> Generator[Any, Any, None]:
        """Starts each batch's reads once its prefetch token is free; the reads of the next
        batch queue for the accelerator's IO threads behind this one's (no barrier)."""
        env, r = self.env, self.reads
        for g in range(r.steps):
            yield self.window[d].get(1)
            self.read_start[d, g] = env.now
            threads = np.flatnonzero(r.requests[g, d])
            if not threads.size:
                self._finish(self.read_done, self.read_ev, d, g)
                continue
            groups = self._read_groups(d, g, threads)
            if groups is not None:
                pending = [len(groups)]
                for members in groups:
                    self._read_group(d, g, members, pending)
                continue
            pending = [int(threads.size)]
            for t in threads:
                env.process(self._read(d, g, int(r.requests[g, d, t]), float(r.bytes[g, d, t]),
                                       int(r.samples[g, d, t]), pending))

    def _finish(self, times: np.ndarray, events: list[list[simpy.Event]], d: int,
                g: int) -> None:
        times[d, g] = self.env.now
        events[d][g].succeed()

    def _read(self, d: int, g: int, n_req: int, n_bytes: float, n_samples: int,
              pending: list[int]) -> Generator[Any, Any, None]:
        env, rec = self.env, self.recorder
        yield self.io_pool[d].get(1)
        if self.page_cache and self.reads.epoch[g] > 0:
            yield from self._read_cached(d, g, n_bytes, n_samples)
            self.io_pool[d].put(1)
            pending[0] -= 1
            if not pending[0]:
                self._finish(self.read_done, self.read_ev, d, g)
            return
        slot = None
        if self.slots is not None:
            slot = self.slots.request()
            yield slot
        # NB: a thread's file requests run back to back, each paying the low-load latency.
        yield env.timeout(n_req * self.latency_s)
        yield self.channel.get(1)
        t0 = env.now
        # NB: one request is one IO against the 4 KiB IOPS figure whatever its size.
        store_s = max(n_bytes / self.storage_bw, n_req / self.iops)
        net_s = n_bytes / self.net_bw if self.net_bw else 0.0
        nic = self.nic.request() if net_s else None
        if nic is not None:
            yield nic  # the NICs may be busy with an all-reduce's cross-node phase
            t0 = env.now
        yield env.timeout(max(store_s, net_s))
        if nic is not None:
            self.nic.release(nic)
        # Storage energy follows from these records' busy time (`sim.part_energy`).
        rec.add("storage", "read", t0, t0 + store_s, g, d, n_samples, n_bytes)
        if net_s:
            rec.add("network", "read", t0, t0 + net_s, g, d, n_samples, n_bytes,
                    link_j(self.plan.system.network, n_bytes))
        self.channel.put(1)
        if slot is not None:
            self.slots.release(slot)
        if self.plan.gpudirect:
            link = self.plan.system.host_to_device
            yield self.h2d[d].get(1)
            t0 = env.now
            yield env.timeout(link.latency_s + n_bytes / link.achieved_bandwidth_bytes_per_s)
            rec.add(self.names["h2d"], "h2d", t0, env.now, g, d, n_samples, n_bytes,
                    link_j(link, n_bytes), "gds")
            self.h2d[d].put(1)
        self.io_pool[d].put(1)
        pending[0] -= 1
        if not pending[0]:
            self._finish(self.read_done, self.read_ev, d, g)

    def _read_cached(self, d: int, g: int, n_bytes: float,
                     n_samples: int) -> Generator[Any, Any, None]:
        """A read served by the page cache: a copy at host DRAM bandwidth, shared."""
        yield self.dram_channel.get(1)
        t0 = self.env.now
        yield self.env.timeout(n_bytes / self.page_bw)
        self.recorder.add("page_cache", "read", t0, self.env.now, g, d, n_samples, n_bytes)
        self.dram_channel.put(1)

    # ------------------------------------------------------------------ prepare

    def _preparer(self, d: int) -> Generator[Any, Any, None]:
        env, ds = self.env, self.plan.dataset
        for g in range(self.reads.steps):
            yield self.read_ev[d][g]
            samples = int(self.batch_samples[g, d])
            k = min(self.plan.prep_workers, samples)
            if ds.prep_s_per_sample_per_core > 0 and k > 0:
                groups, alone = self._prep_chunks(samples, k)
                done, pending = env.event(), [len(groups) + len(alone)]
                for size, workers in groups:
                    self._prep_group(d, g, size, workers, pending, done)
                for size in alone:
                    if self.max_group > 1:
                        self._prep_waiting(d, g, size, pending, done)
                    else:  # the fine schedule: a process per worker
                        env.process(self._prep(d, g, size, pending, done))
                yield done
            else:  # nothing to prepare: the batch passes straight through
                self.recorder.add(self.names["host_cpu"], "prep", env.now, env.now, g, d,
                                  samples, samples * ds.decoded_sample_bytes)
            self._finish(self.prep_done, self.prep_ev, d, g)

    def _prep(self, d: int, g: int, n_samples: int, pending: list[int],
              done: simpy.Event) -> Generator[Any, Any, None]:
        env, ds = self.env, self.plan.dataset
        yield self.cpu.get(1)
        t0 = env.now
        # The dataset's per-core figure, already rescaled to the host CPU by the run
        # (`accelsim.sim.hostprep`). NB: one core's speed whatever the load on the others.
        busy_s = n_samples * ds.prep_s_per_sample_per_core
        yield env.timeout(busy_s)
        self.recorder.add(self.names["host_cpu"], "prep", t0, env.now, g, d, n_samples,
                          n_samples * ds.decoded_sample_bytes, busy_s * self.costs.core_power_w)
        self.cpu.put(1)
        pending[0] -= 1
        if not pending[0]:
            done.succeed()

    # ------------------------------------------------------------------ transfer

    def _transferer(self, d: int) -> Generator[Any, Any, None]:
        env, rec, plan = self.env, self.recorder, self.plan
        link = plan.system.host_to_device
        for g in range(self.reads.steps):
            yield self.prep_ev[d][g]
            samples = int(self.batch_samples[g, d])
            stored = float(self.reads.bytes[g, d].sum())
            # Decoded samples cross the link, or the stored (compressed) bytes if the device
            # decodes them.
            n_bytes = float(samples * plan.dataset.decoded_sample_bytes
                            if self.host_prep else stored)
            # NB: host DRAM traffic: stored bytes written and read once, decoded bytes written
            # and read by the DMA once; a pageable copy adds one read and one write.
            dram_bytes = 2 * stored + (2 * n_bytes if self.host_prep else 0.0)
            if not plan.pinned_memory and n_bytes:
                yield self.cpu.get(1)
                t0 = env.now
                # NB: staging copy and DMA run one after the other, not chunk-pipelined.
                yield env.timeout(n_bytes / self.copy_bw)
                rec.add(self.names["host_cpu"], "staging_copy", t0, env.now, g, d, samples,
                        n_bytes, (env.now - t0) * self.costs.core_power_w)
                self.cpu.put(1)
                dram_bytes += 2 * n_bytes
            wait = self.h2d[d].acquire(1)  # None: the link was free, taken at once
            if wait is not None:
                yield wait
            t0 = env.now
            # NB: each accelerator's link at its achieved bandwidth; the host root complex
            # and PCIe switches shared by several devices are not modelled.
            yield env.timeout(link.latency_s + n_bytes / link.achieved_bandwidth_bytes_per_s)
            rec.add(self.names["h2d"], "h2d", t0, env.now, g, d, samples, n_bytes,
                    link_j(link, n_bytes), "pinned" if plan.pinned_memory else "pageable")
            self.h2d[d].give(1)
            rec.add(self.names["dram"], "dram", env.now, env.now, g, d, samples, dram_bytes,
                    dram_bytes * self.costs.dram_j_per_byte)
            self._finish(self.xfer_done, self.xfer_ev, d, g)

    # ------------------------------------------------------------------ compute

    def _compute(self, d: int, g: int, c: PhaseCost, samples: int
                 ) -> Generator[Any, Any, None]:
        """Forward and backward of device d's step g, with the all-reduce if the step syncs."""
        env, rec, name = self.env, self.recorder, f"accel{d}"
        t0 = env.now
        b0 = t0 + c.forward_s
        comm = self.plan.devices * self.plan.nodes > 1 and self._syncs(g)
        if comm:
            self._arrive(g, d, b0, c)
            yield self._comm_event(g)
            share = c.contention_share if self.plan.overlap_allreduce else 0.0
            b1 = advance(self._cursors[g].pop(d), c.backward_s, self._busy[g], share)
            all_ready = self._all_ready.get(g, b1)
            if not self._cursors[g]:
                del self._cursors[g], self._busy[g], self._comm_done[g]
                self._all_ready.pop(g, None)
            self.contention_s += max(b1 - b0 - c.backward_s, 0.0)  # NB: float rounding < 0
            t_comm = env.now
            if b1 > env.now:
                yield env.timeout(b1 - env.now)
        else:
            yield env.timeout(c.forward_s + c.backward_s)
            b1 = t_comm = env.now
        rec.add(name, "compute", t0, b0, g, d, samples, 0.0, c.forward_j, "forward")
        rec.add(name, "compute", b0, b1, g, d, samples, 0.0, c.backward_j, "backward")
        if comm and t_comm > b1:
            # Waiting for the slowest device's last gradients, then for the all-reduce.
            t_sync = min(max(all_ready, b1), t_comm)
            if t_sync > b1:
                rec.add(name, "stall_sync", b1, t_sync, g, d)
            if t_comm > t_sync:
                rec.add(name, "stall_comm", t_sync, t_comm, g, d)

    def _trainer(self, d: int) -> Generator[Any, Any, None]:
        env, rec, name = self.env, self.recorder, f"accel{d}"
        for g in range(self.reads.steps):
            t_wait = env.now
            yield self.ready_ev[d][g]
            self._residence(d, g)
            if env.now > t_wait:
                self._stall(d, g, t_wait, env.now)
            samples = int(self.batch_samples[g, d])
            c = self._device_costs.get((d, samples))
            if c is None:
                c = self._device_costs[d, samples] = slowed(self.costs.compute[samples],
                                                            self.slowdown[d])
            # Decoding on the SMs waits for the step to end, and the step for it.
            # NB: decode kernels take the whole device; none run beside training's.
            sms = self.decoder[d].request() if self.plan.decode.place == "gpu" else None
            if sms is not None:
                yield sms
            yield from self._compute(d, g, c, samples)
            if self._syncs(g):
                t1 = env.now
                yield env.timeout(c.optimizer_s)
                rec.add(name, "compute", t1, env.now, g, d, samples, 0.0, c.optimizer_j,
                        "optimizer")
            if sms is not None:
                self.decoder[d].release(sms)
            self.window[d].put(1)
