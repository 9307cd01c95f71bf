"""Fewer events per epoch: the alike reads and preparations of one batch as one group.

A mixin of `accelsim.sim.train.TrainModel` (whose pools, channels, plan and recorder it uses).
The fine schedule runs one process per (batch, IO thread) read and per (batch, worker) chunk
of samples; the coarse one runs one chain of event callbacks (no process) per *group* of them:

- reads: the threads of a batch whose reads are alike (the same number of file requests, so
  the same latency) and which all find an IO thread free when the batch starts. The group takes
  its threads at once, waits the shared latency, then holds the storage channel for the sum of
  its members' service times (each from the same formula as a single read), its members served
  back to back in thread order, as the fine schedule serves reads that reach the channel at
  one instant. Every member keeps its own "storage" (and "network", "page_cache") record.
- preparation: the workers of a batch with the same number of samples (the same busy time) that
  find a free core when the batch is read; they start and end together in both schedules. Those
  that find no core queue for one each, as in the fine schedule (event callbacks, no process).

Kept per read (fine): a batch whose threads are not all free when it starts or that leaves a
prefetch slot free (the next batch would start on threads freed one read at a time), storage
with a concurrency cap below the threads' (`TrainModel.slots`) and GPUDirect reads (each
read's copy to the device overlaps the next read's service).

`TrainModel.max_group` caps a group's members; 1 runs the fine schedule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import simpy

from accelsim.sim.allreduce_stage import link_j


class Pool(simpy.Container):
    """A `Container` of identical units (IO threads, cores) that a group can also take
    without an event, when they are free."""

    def take(self, n: int) -> None:
        """Take `n` free units now; ValueError unless that many are free and no one queues."""
        if self.get_queue or self.level < n:
            raise ValueError(f"{n} units asked, {self.level} free, {len(self.get_queue)} "
                             "waiting")
        # NB: what a granted `get(n)` does, less its event (nothing waits on it).
        self._level -= n

    def acquire(self, n: int) -> simpy.Event | None:
        """Take `n` units: None if taken at once (free, no one queued before), else the
        `get` event to wait for."""
        if self.get_queue or self.level < n:
            return self.get(n)
        self._level -= n
        return None

    def give(self, n: int) -> None:
        """Give `n` units back: at once if no one queues for them, else by a `put`, whose
        event hands them to the queue in order."""
        if self.get_queue:
            self.put(n)
        else:
            self._level += n  # NB: what a `put(n)` does, less its event (no one to wake)


class GroupedLoads:
    """Grouped reads and preparations of `TrainModel` (a mixin; no state of its own)."""

    env: Any
    plan: Any
    reads: Any
    recorder: Any
    costs: Any
    names: dict[str, str]
    max_group: int

    # ------------------------------------------------------------------ reads

    def _read_groups(self, d: int, g: int, threads: np.ndarray) -> list[np.ndarray] | None:
        """The batch's reading threads cut into groups of equal request counts, in order of
        arrival at the channel; None where the batch is read one process per thread."""
        pool = self.io_pool[d]
        # A next batch about to start (a prefetch token free) would take the threads as each
        # read ends, not as the group ends: this batch is read per thread.
        if (self.max_group <= 1 or self.plan.gpudirect or self.slots is not None
                or pool.level < threads.size or pool.get_queue or self.window[d].level):
            return None
        n_req = self.reads.requests[g, d, threads]
        groups = []
        values = sorted(set(n_req.tolist()))
        for n in values:
            members = threads if len(values) == 1 else threads[n_req == n]
            groups += [members[i:i + self.max_group]
                       for i in range(0, members.size, self.max_group)]
        return groups

    def _read_group(self, d: int, g: int, members: np.ndarray, pending: list[int]) -> None:
        """Members' reads of batch g of device d, their threads taken now (the caller saw them
        free): one latency, then the channel held for all their service times, one after
        another. A chain of event callbacks: no process of its own."""
        env, r = self.env, self.reads
        cached = bool(self.page_cache and r.epoch[g] > 0)
        channel = self.dram_channel if cached else self.channel
        self.io_pool[d].take(int(members.size))
        held: list[Any] = []  # the NICs' request, if the reads cross the network

        def ask(_: Any = None) -> None:
            wait = channel.acquire(1)
            if wait is None:
                on_channel()
            else:
                wait.callbacks.append(on_channel)

        def on_channel(_: Any = None) -> None:
            if not cached and self.net_bw:
                # NB: the group holds the NICs for all its reads; an all-reduce's cross-node
                # phase queued meanwhile waits for the group, not for one read.
                held.append(self.nic.request())
                held[0].callbacks.append(serve)
            else:
                serve()

        def serve(_: Any = None) -> None:
            t_end = self._served(d, g, members, cached)
            env.timeout(max(t_end - env.now, 0.0)).callbacks.append(end)

        def end(_: Any) -> None:
            if held:
                self.nic.release(held[0])
            channel.give(1)
            # NB: the group's threads come free together at its end, where the fine schedule
            # frees each at its own read's end; a next batch does not start meanwhile
            # (`_read_groups`) unless a step ends and frees a prefetch slot during it.
            self.io_pool[d].give(int(members.size))
            pending[0] -= 1
            if not pending[0]:
                self._finish(self.read_done, self.read_ev, d, g)

        if cached:
            ask()
        else:
            # NB: as for one read: its file requests back to back, each at low-load latency
            env.timeout(int(r.requests[g, d, members[0]]) * self.latency_s).callbacks.append(ask)

    def _served(self, d: int, g: int, members: np.ndarray, cached: bool) -> float:
        """Records each member's service from now on, back to back (a read's formula each:
        the page cache's bandwidth, or storage's bandwidth, IOPS and network); the end."""
        rec, r, t = self.recorder, self.reads, self.env.now
        n_bytes = r.bytes[g, d, members].tolist()
        n_samples = r.samples[g, d, members].tolist()
        if cached:
            for b, s in zip(n_bytes, n_samples, strict=True):
                t1 = t + b / self.page_bw
                rec.add("page_cache", "read", t, t1, g, d, s, b)
                t = t1
            return t
        n_req, network = int(r.requests[g, d, members[0]]), self.plan.system.network
        for b, s in zip(n_bytes, n_samples, strict=True):
            store_s = max(b / self.storage_bw, n_req / self.iops)
            net_s = b / self.net_bw if self.net_bw else 0.0
            rec.add("storage", "read", t, t + store_s, g, d, s, b)
            if net_s:
                rec.add("network", "read", t, t + net_s, g, d, s, b, link_j(network, b))
            t = t + max(store_s, net_s)
        return t

    # ------------------------------------------------------------------ preparation

    def _prep_chunks(self, samples: int, k: int) -> tuple[list[tuple[int, int]], list[int]]:
        """The batch's k workers as (samples each, workers) groups that start now on free
        cores, and the samples of each worker left to wait for a core alone."""
        base, extra = divmod(samples, k)
        sizes = [base + 1] * extra + [base] * (k - extra)
        free = 0 if self.max_group <= 1 or self.cpu.get_queue else min(self.cpu.level, k)
        groups: list[tuple[int, int]] = []
        for size in dict.fromkeys(sizes[:free]):
            m = sizes[:free].count(size)
            groups += [(size, min(self.max_group, m - i)) for i in range(0, m, self.max_group)]
        return groups, sizes[free:]

    def _prep_group(self, d: int, g: int, n_samples: int, workers: int, pending: list[int],
                    done: simpy.Event) -> None:
        """`workers` workers of batch g of device d, each preparing `n_samples` samples on its
        own core: the cores taken now (the caller saw them free), one timeout for all, a
        record each when it ends."""
        self.cpu.take(workers)
        self._prep_run(d, g, n_samples, workers, pending, done)

    def _prep_waiting(self, d: int, g: int, n_samples: int, pending: list[int],
                      done: simpy.Event) -> None:
        """One worker of batch g of device d that found no free core: it queues for one
        (first come, first served, as `TrainModel._prep`), then prepares its samples."""
        self.cpu.get(1).callbacks.append(
            lambda _: self._prep_run(d, g, n_samples, 1, pending, done))

    def _prep_run(self, d: int, g: int, n_samples: int, workers: int, pending: list[int],
                  done: simpy.Event) -> None:
        """`workers` workers holding a core each prepare `n_samples` samples each from now."""
        env, ds = self.env, self.plan.dataset
        t0 = env.now
        busy_s = n_samples * ds.prep_s_per_sample_per_core

        def end(_: simpy.Event) -> None:
            row = (self.names["host_cpu"], "prep", t0, env.now, g, d, n_samples,
                   n_samples * ds.decoded_sample_bytes, busy_s * self.costs.core_power_w)
            rec = self.recorder
            rec.add(*row)
            rec.rows.extend([rec.rows[-1]] * (workers - 1))  # the others' records: alike
            self.cpu.give(workers)
            pending[0] -= 1
            if not pending[0]:
                done.succeed()

        env.timeout(busy_s).callbacks.append(end)

    # The pools and events this mixin uses, set by `TrainModel`.
    io_pool: list[Pool]
    window: list[simpy.Container]
    cpu: Pool
    slots: Any
    channel: Pool
    dram_channel: Pool
    nic: simpy.Resource
    page_cache: bool
    latency_s: float
    storage_bw: float
    iops: float
    net_bw: float
    page_bw: float
    read_done: Any
    read_ev: Any
    _finish: Any
