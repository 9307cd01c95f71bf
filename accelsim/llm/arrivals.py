"""Where a decoder engine's requests come from: open loop (every arrival time known before the
run: Poisson draws or a trace) or closed loop (clients that send their next request when their
last one returns).

    env = simpy.Environment()
    clients = Clients(env, requests=1000, concurrency=16, think_s=0.5, replicas=2, seed=0)
    Engine(costs, Requests(clients.arrival_s[k::2], ...), ..., arrivals=clients.replica(k))

An engine reads its requests' arrival times from `Requests.arrival_s` (in arrival order; `inf`
for a request not sent yet), waits for the next one with `until` and reports the requests that
return with `returned`: the whole protocol (`Arrivals`).

Closed loop as the request-level server has it (`accelsim.sim.serve`): `concurrency` clients
each send a request at t = 0 and, when it returns, the next one after a think time drawn from
an exponential of mean `think_s` (none when 0), until `requests` have been sent in all. The
load balancer deals requests to the replicas in turn in the order they arrive (the open loop's
round robin: request i to replica i mod replicas), so a client's requests do not stay on one
replica. Requests are numbered in arrival order, and request i has the i-th drawn lengths.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import simpy


class Arrivals(Protocol):
    """What an engine asks of its source of requests. `ahead`: every arrival time is known
    before the run (a static batch may be timed to the arrival that fills it)."""

    env: simpy.Environment
    ahead: bool

    def until(self, when_s: float) -> simpy.Event:
        """An event at `when_s` (inf: never) or, sooner, when a request not yet sent arrives."""
        ...

    def returned(self, ids: np.ndarray) -> simpy.Event | None:
        """The engine's requests `ids` returned now (`env.now`); an event to wait for before
        the engine's next step (None: go on)."""
        ...


class OpenArrivals:
    """Every arrival time known up front: waiting is a timeout, returns change nothing."""

    ahead = True

    def __init__(self, env: simpy.Environment | None = None) -> None:
        self.env = env if env is not None else simpy.Environment()

    def until(self, when_s: float) -> simpy.Event:
        return self.env.timeout(when_s - self.env.now)

    def returned(self, ids: np.ndarray) -> None:
        return None


class Clients:
    """Closed-loop clients in `env` over `replicas` engines; see the module docstring.
    `arrival_s[i]` is request i's arrival time once it has arrived, inf before."""

    def __init__(self, env: simpy.Environment, requests: int, concurrency: int, think_s: float,
                 replicas: int, seed: int) -> None:
        self.env, self.n, self.think_s, self.replicas = env, requests, think_s, replicas
        # Over several replicas, requests sent at once may be dealt to an engine by another
        # replica's returns at the same instant, still to come: the engine lets those in
        # (a zero timeout, after the events already due now) before it picks its next step.
        self.settles = replicas > 1 and think_s <= 0
        # NB: a stream of its own, so that the lengths (drawn from `seed`) do not move with it
        self.rng = np.random.default_rng(seed).spawn(1)[0]
        self.arrival_s = np.full(requests, np.inf)
        self.feeds = [_Feed(self) for _ in range(replicas)]
        self.arrived = 0
        self.sent = min(concurrency, requests)
        for _ in range(self.sent):  # NB: every client sends its first request at t = 0
            self._arrive()

    def replica(self, k: int) -> Arrivals:
        """The source replica `k`'s engine reads (its requests are `arrival_s[k::replicas]`)."""
        return self.feeds[k]

    def _arrive(self, _: Any = None) -> None:
        i = self.arrived
        self.arrival_s[i] = self.env.now
        self.arrived += 1
        self.feeds[i % self.replicas].kick()

    def returned(self, count: int) -> None:
        """`count` requests returned now: their clients send their next ones (while any of the
        `requests` are left to send)."""
        m = min(count, self.n - self.sent)
        if m <= 0:
            return
        self.sent += m
        if self.think_s <= 0:
            for _ in range(m):
                self._arrive()
            return
        for z in self.rng.exponential(self.think_s, m).tolist():  # NB: exponential think time
            self.env.timeout(z).callbacks.append(self._arrive)


class _Feed:
    """One replica's view of the clients: its engine waits on `kick` when it has nothing to
    do, and an arrival dealt to it wakes it."""

    ahead = False

    def __init__(self, clients: Clients) -> None:
        self.clients, self.env = clients, clients.env
        self.waiting: simpy.Event | None = None

    def kick(self) -> None:
        if self.waiting is not None and not self.waiting.triggered:
            self.waiting.succeed()

    def until(self, when_s: float) -> simpy.Event:
        self.waiting = self.env.event()
        if when_s == np.inf:
            return self.waiting
        return self.waiting | self.env.timeout(when_s - self.env.now)

    def returned(self, ids: np.ndarray) -> simpy.Event | None:
        self.clients.returned(len(ids))
        return self.env.timeout(0.0) if self.clients.settles else None
