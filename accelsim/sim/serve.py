"""Inference serving: requests arrive, a dynamic batcher groups them, devices serve batches.

    cfg = ServeConfig("resnet50", device=NullProfile(), rate_per_s=4.0, max_batch=8,
                      max_wait_s=0.01, requests=10_000, seed=1)
    res = simulate_serving(cfg)
    res.throughput_samples_per_s, res.latency_p99_s, res.records   # one record per batch

Arrivals are open loop (Poisson at `rate_per_s`) or closed loop (`concurrency` clients, each
re-issuing when its request completes, after an exponential think time of mean
`think_time_s`). Each device is a SimPy process; idle devices take turns at the batcher (a
`simpy.Resource` of capacity 1), which applies the stateless policy of
`accelsim.sim.batching`. A batch of b costs `accelsim.sim.service.service_table` at b.

Events are per batch, not per request: arrival times are drawn up front (open loop) or when
a client re-issues (closed loop), and the batcher sleeps until the policy's next decision
point (the oldest request's deadline or the arrival that fills a batch), which gives the
same schedule as waking at every arrival.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Generator
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
import simpy

from accelsim.devices.invariants import check_serving
from accelsim.errors import AccelsimError, UnknownNameError
from accelsim.formats import FORMATS, get_format
from accelsim.profiles.hardware import host_clock_hz, host_cpu_profile
from accelsim.profiles.links import Link, load_link
from accelsim.profiles.software import DEFAULT
from accelsim.profiles.stack_choice import check_software, is_stack_file, software_choices
from accelsim.profiles.systems import System, load_system
from accelsim.results.records import Recorder
from accelsim.sim.batching import REL_TOLERANCE, batch_to_take, next_wake_s
from accelsim.sim.service import device_host_link, service_table, static_power_w
from accelsim.workload.scenario import Scenario, resolve_workload

SERVICE_DISTRIBUTIONS = ("fixed", "exponential")
_EXACT_FILL_MAX_PENDING = 256


def _is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


@dataclass(frozen=True)
class ServeConfig:
    """What to serve, on what, under which load. Frozen and picklable; checked on creation.

    workload: a zoo model, built-in scenario or .toml path, or a `Scenario`;
    device: a device profile name/path or object (`NullProfile()`); default: the system's;
    system: a system name or `System` (host link and device count); optional;
    devices: device servers (default: the system's accelerator count, else 1);
    host_link: a link name or `Link` overriding the one inputs and outputs cross;
    rate_per_s (open loop, Poisson) xor concurrency (closed loop) with think_time_s;
    max_batch, max_wait_s: the dynamic batcher; requests: how many to serve;
    service_distribution: "fixed" (the cost model's time) or "exponential" (that mean).
    A scenario's mode and batch size are not used: the batcher forms the batches.
    """

    workload: str | Scenario
    device: Any = None
    system: str | System | None = None
    devices: int | None = None
    host_link: str | Link | None = None
    rate_per_s: float | None = None
    concurrency: int | None = None
    think_time_s: float = 0.0
    max_batch: int = 1
    max_wait_s: float = 0.0
    requests: int = 10_000
    seed: int = 0
    software: str = DEFAULT
    tf32: bool | None = None  # fp32 GEMMs as TF32 (None: the stack's default)
    precision: str | None = None
    service_distribution: str = "fixed"

    def __post_init__(self) -> None:
        def bad(name: str, problem: str) -> AccelsimError:
            return AccelsimError(f"serving: {name} = {getattr(self, name)!r}: {problem}")

        if (self.rate_per_s is None) == (self.concurrency is None):
            raise AccelsimError("serving: give exactly one of rate_per_s (open loop, Poisson "
                                "arrivals) and concurrency (closed loop clients), not "
                                + ("both" if self.rate_per_s is not None else "neither"))
        if self.rate_per_s is not None and not (
                _is_num(self.rate_per_s) and 0 < self.rate_per_s < math.inf):
            raise bad("rate_per_s", "must be a finite number of requests per second > 0")
        if self.concurrency is not None and not (_is_int(self.concurrency)
                                                 and self.concurrency >= 1):
            raise bad("concurrency", "must be a whole number of clients >= 1")
        for name in ("think_time_s", "max_wait_s"):
            value = getattr(self, name)
            if not (_is_num(value) and 0 <= value < math.inf):
                raise bad(name, "must be a finite number of seconds >= 0")
        if self.think_time_s > 0 and self.concurrency is None:
            raise bad("think_time_s", "applies to closed loop (concurrency) only")
        for name in ("max_batch", "requests"):
            if not (_is_int(getattr(self, name)) and getattr(self, name) >= 1):
                raise bad(name, "must be a whole number >= 1")
        if self.devices is not None and not (_is_int(self.devices) and self.devices >= 1):
            raise bad("devices", "must be a whole number of devices >= 1")
        if not _is_int(self.seed) or self.seed < 0:
            raise bad("seed", "must be a whole number >= 0")
        if is_stack_file(self.software):
            check_software(self.software)  # ConfigError naming the stack file
        elif self.software not in software_choices():
            raise bad("software", f"choose one of {', '.join(software_choices())}")
        if self.service_distribution not in SERVICE_DISTRIBUTIONS:
            raise bad("service_distribution", f"choose one of {', '.join(SERVICE_DISTRIBUTIONS)}")
        if self.precision is not None:
            try:
                get_format(self.precision)
            except (UnknownNameError, AttributeError):
                raise bad("precision", f"choose one of {', '.join(FORMATS)}") from None
        if not isinstance(self.workload, str | Scenario):
            raise bad("workload", "must be a zoo model, scenario name, .toml path or Scenario")
        if self.device is None and self.system is None:
            raise AccelsimError("serving: give a device (profile name or object) or a system")
        if self.device is not None and not (isinstance(self.device, str)
                                            or hasattr(self.device, "device_class")):
            raise bad("device", "must be a device profile name, path or profile object")
        if self.system is not None and not isinstance(self.system, str | System):
            raise bad("system", "must be a system name, path or System")
        if self.host_link is not None and not isinstance(self.host_link, str | Link):
            raise bad("host_link", "must be a link name, path or Link")


@dataclass(frozen=True)
class ServeResult:
    """Outcome of `simulate_serving` (SI units). `records`: one row per served batch (see
    `accelsim.results.records`); `requests`: one row per request (arrival_s, start_s, end_s,
    latency_s, wait_s, batch, device); `service`: the service-time table by batch size."""

    workload: str
    device: str
    devices: int
    requests_served: int
    makespan_s: float
    throughput_samples_per_s: float
    latency_mean_s: float
    latency_p50_s: float
    latency_p95_s: float
    latency_p99_s: float
    queueing_delay_mean_s: float
    queueing_delay_p99_s: float
    batch_size_mean: float
    batches: int
    utilization: tuple[float, ...]
    energy_j: float
    energy_j_per_sample: float
    average_power_w: float
    capacity_samples_per_s: float
    offered_load: float | None
    records: pd.DataFrame
    requests: pd.DataFrame
    service: pd.DataFrame

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready scalars (no DataFrames)."""
        skip = ("records", "requests", "service")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        out["utilization"] = list(self.utilization)
        return out


class _Queue:
    """Requests in arrival order. `arrival_s[:n_known]` are placed (sorted); `pending` is a
    heap of closed-loop arrivals issued but not yet placed; `head` is the next to take."""

    def __init__(self, n_total: int, arrival_s: list[float] | None) -> None:
        self.arrival_s = arrival_s if arrival_s is not None else [0.0] * n_total
        self.n_known = n_total if arrival_s is not None else 0
        self.pending: list[float] = []
        self.head = 0

    def arrived(self, now_s: float) -> int:
        """Index one past the last request that has arrived by `now_s`."""
        limit = now_s + REL_TOLERANCE * max(1.0, abs(now_s))
        while self.pending and self.pending[0] <= limit:
            self.arrival_s[self.n_known] = heapq.heappop(self.pending)
            self.n_known += 1
        return bisect_right(self.arrival_s, limit, self.head, self.n_known)

    def head_arrival_s(self) -> float:
        if self.head < self.n_known:
            return self.arrival_s[self.head]
        return self.pending[0] if self.pending else math.inf

    def fill_at_s(self, max_batch: int) -> float:
        """When the request that makes a full batch arrives (inf if not yet issued). With
        many pending arrivals it returns the next one instead: an earlier look is only a
        re-check, and it keeps each look O(log n)."""
        i = self.head + max_batch - 1
        if i < self.n_known:
            return self.arrival_s[i]
        k = i - self.n_known + 1
        if len(self.pending) < k:
            return math.inf
        if k == 1 or len(self.pending) > _EXACT_FILL_MAX_PENDING:
            return self.pending[0]
        return heapq.nsmallest(k, self.pending)[-1]


class _Server:
    """The SimPy model: one process per device, a batcher token, the request queue."""

    def __init__(self, cfg: ServeConfig, n_devices: int, table: pd.DataFrame) -> None:
        self.cfg, self.n_devices = cfg, n_devices
        self.env = simpy.Environment()
        self.batcher = simpy.Resource(self.env, capacity=1)
        self.kick = self.env.event()
        self.rec = Recorder()
        self.service_s = [0.0, *table["service_s"].tolist()]  # index = batch size
        self.energy_j = [0.0, *table["energy_j"].tolist()]
        self.bytes = [0.0, *table["io_bytes"].tolist()]
        self.closed = cfg.concurrency is not None
        arrival_rng, self.think_rng, self.service_rng = np.random.default_rng(cfg.seed).spawn(3)
        n = cfg.requests
        if self.closed:
            self.queue = _Queue(n, None)
            self.issued = min(cfg.concurrency or 0, n)
            self.queue.pending = [0.0] * self.issued  # NB: every client issues at t = 0.
        else:
            gaps_s = arrival_rng.exponential(1.0 / (cfg.rate_per_s or 1.0), n)
            self.queue = _Queue(n, np.cumsum(gaps_s).tolist())
        self.n_batches = 0
        for d in range(n_devices):
            self.env.process(self._device(d))

    def _reissue(self, now_s: float, n_done: int) -> None:
        """Closed loop: the clients of `n_done` completed requests issue their next ones."""
        n = min(n_done, self.cfg.requests - self.issued)
        if n <= 0:
            return
        self.issued += n
        think_s = (self.think_rng.exponential(self.cfg.think_time_s, n).tolist()
                   if self.cfg.think_time_s > 0 else [0.0] * n)  # NB: exponential think time.
        for t in think_s:
            heapq.heappush(self.queue.pending, now_s + t)
        kick, self.kick = self.kick, self.env.event()
        kick.succeed()

    def _take(self) -> Generator[simpy.Event, Any, int]:
        """Wait (holding the batcher) until the policy sends a batch; its size, 0 when done."""
        cfg, q, env = self.cfg, self.queue, self.env
        while q.head < cfg.requests:
            now_s = env.now
            queued = q.arrived(now_s) - q.head
            take = batch_to_take(queued, q.head_arrival_s(), now_s, cfg.max_batch,
                                 cfg.max_wait_s)
            if take:
                return take
            wake_s = next_wake_s(q.head_arrival_s(), q.fill_at_s(cfg.max_batch), cfg.max_wait_s)
            if not self.closed:
                yield env.timeout(max(wake_s - now_s, 0.0))
            elif math.isinf(wake_s):
                yield self.kick
            else:
                yield self.kick | env.timeout(max(wake_s - now_s, 0.0))
        return 0

    def _device(self, d: int) -> Generator[simpy.Event, Any, None]:
        env, rec, resource = self.env, self.rec, f"accel{d}"
        exponential = self.cfg.service_distribution == "exponential"
        while True:
            with self.batcher.request() as turn:
                yield turn
                take = yield from self._take()
                if not take:
                    return
                self.queue.head += take
                step, self.n_batches = self.n_batches, self.n_batches + 1
            mean_s = self.service_s[take]
            service_s = self.service_rng.exponential(mean_s) if exponential else mean_s
            start_s = env.now
            yield env.timeout(service_s)
            # NB: exponential service scales the batch's energy with its drawn time.
            rec.add(resource, "batch", start_s, env.now, step=step, device=d, samples=take,
                    n_bytes=self.bytes[take],
                    energy_j=self.energy_j[take] * service_s / mean_s)
            if self.closed:
                self._reissue(env.now, take)


def _resolve(cfg: ServeConfig) -> tuple[Scenario, Any, Link | None, int, System | None]:
    """Load the workload, device profile, host link, device count and system named by
    `cfg`."""
    from accelsim.profiles.devices import load_profile

    sc = cfg.workload if isinstance(cfg.workload, Scenario) else resolve_workload(cfg.workload)
    system = load_system(cfg.system) if isinstance(cfg.system, str) else cfg.system
    device = cfg.device if cfg.device is not None else system.device  # type: ignore[union-attr]
    profile = load_profile(device) if isinstance(device, str) else device
    if isinstance(cfg.host_link, Link):
        link: Link | None = cfg.host_link
    elif isinstance(cfg.host_link, str):
        link = load_link(cfg.host_link)
    elif system is not None:
        link = system.host_to_device
    else:
        link = device_host_link(profile)
    n_devices = cfg.devices or (system.device_count if system is not None else 1)
    return sc, profile, link, n_devices, system


def _requests_frame(records: pd.DataFrame, arrival_s: list[float]) -> pd.DataFrame:
    """One row per request: batches were taken in step order, oldest requests first."""
    by_step = records.sort_values("step")
    size = by_step["samples"].to_numpy()
    arr = np.asarray(arrival_s)
    start = np.repeat(by_step["start_s"].to_numpy(), size)
    end = np.repeat(by_step["end_s"].to_numpy(), size)
    return pd.DataFrame({"arrival_s": arr, "start_s": start, "end_s": end,
                         "latency_s": end - arr, "wait_s": start - arr,
                         "batch": np.repeat(by_step["step"].to_numpy(), size),
                         "device": np.repeat(by_step["device"].to_numpy(), size)})


def simulate_serving(cfg: ServeConfig) -> ServeResult:
    """Serve `cfg.requests` requests and measure throughput, latency, utilisation, energy."""
    sc, profile, link, n_devices, system = _resolve(cfg)
    precision = cfg.precision or sc.precision
    graph = sc.graph()
    host_hz = host_clock_hz(system) if system is not None else None  # None: reference host
    host_cpu = host_cpu_profile(system) if system is not None else None
    table = service_table(graph, profile, link, cfg.max_batch, precision, cfg.software, host_hz,
                          host_cpu, cfg.tf32)
    server = _Server(cfg, n_devices, table)
    server.env.run()
    records = server.rec.frame()
    reqs = _requests_frame(records, server.queue.arrival_s)
    makespan_s = float(records["end_s"].max())
    busy_s = records.groupby("device")["duration_s"].sum().reindex(range(n_devices),
                                                                    fill_value=0.0)
    idle_s = n_devices * makespan_s - float(busy_s.sum())
    energy_j = float(records["energy_j"].sum()) + static_power_w(profile) * idle_s
    per_batch_s = table["service_s"].to_numpy()
    capacity = n_devices * float(np.max(table.index.to_numpy() / per_batch_s))
    lat, wait = reqs["latency_s"].to_numpy(), reqs["wait_s"].to_numpy()
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    res = ServeResult(
        workload=graph.name, device=profile.name, devices=n_devices,
        requests_served=len(reqs), makespan_s=makespan_s,
        throughput_samples_per_s=len(reqs) / makespan_s,
        latency_mean_s=float(lat.mean()), latency_p50_s=float(p50), latency_p95_s=float(p95),
        latency_p99_s=float(p99), queueing_delay_mean_s=float(wait.mean()),
        queueing_delay_p99_s=float(np.percentile(wait, 99)),
        batch_size_mean=float(records["samples"].mean()), batches=len(records),
        utilization=tuple(float(b / makespan_s) for b in busy_s),
        energy_j=energy_j, energy_j_per_sample=energy_j / len(reqs),
        average_power_w=energy_j / makespan_s, capacity_samples_per_s=capacity,
        offered_load=None if cfg.rate_per_s is None else cfg.rate_per_s / capacity,
        records=records, requests=reqs, service=table.copy())
    check_serving(res, cfg.requests, static_power_w(profile), {
        "device": profile.name, "workload": graph.name, "devices": n_devices,
        "precision": precision, "mode": "serve", "software": cfg.software,
        "max_batch": cfg.max_batch, "requests": cfg.requests, "seed": cfg.seed})
    return res
