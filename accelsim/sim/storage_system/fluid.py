"""Concurrent reads sharing a storage system's parts, on a SimPy clock.

Each read is a flow of bytes from one client host with a weight (the reader threads it keeps
busy). The flows of a host share that host's capacity (the least of its parts: NICs, cores,
local drives); all flows share the shared capacity (the least of the servers' ports, cores,
drives, rating and the fabric). Rates are max-min fair per unit of weight: water-filling
over hosts, recomputed at every start and end of a flow, so a host that cannot use its share
of the servers leaves it to the others. SimPy keeps the clock: a flow's end is a timeout,
superseded (by a generation count) when a start or end changes the rates.

NB: a flow-level model (as SimGrid's), not packets or RPCs: one flow per (accelerator, batch)
costs two events, where per-RPC `Resource`s would cost millions per epoch.

    reads = SharedReads(env, host_cap_bytes_per_s=np.array([12.5e9, 12.5e9]),
                        shared_cap_bytes_per_s=20e9)
    yield reads.read(host=0, n_bytes=1e9, weight=4)
    reads.served_bytes  # per host, so far
"""

from __future__ import annotations

import heapq
import math
from itertools import count

import numpy as np
import simpy

_EPS_BYTES = 1e-3  # a flow within a milli-byte of its end has ended
_TINY = 1e-12  # a weight (or rate) to divide by where a host has none
_BIG = 1e300  # the level of a host with no flow: above any other, finite (0 x it = 0)


def water_fill(cap: list[float], weight: list[float], shared: float) -> list[float]:
    """Bytes/s per unit weight on each host: host h takes min(cap_h, weight_h x L), with the
    level L set so that the hosts' total is `shared` (or every host at its cap, if less).
    Hosts with no weight get 0. (Plain lists: tens of hosts, called at every flow event.)"""
    active = [h for h, w in enumerate(weight) if w > 0]
    rate = [0.0] * len(cap)
    if sum(cap[h] for h in active) <= shared:
        for h in active:
            rate[h] = cap[h] / weight[h]
        return rate
    # Hosts saturate in order of cap / weight; the rest share what is left at one level.
    active.sort(key=lambda h: cap[h] / weight[h])
    left, rest_w = shared, sum(weight[h] for h in active)
    level = left / rest_w
    for h in active:
        x = cap[h] / weight[h]
        if x >= level:
            break
        left -= cap[h]
        rest_w -= weight[h]
        level = left / rest_w
    for h in active:
        rate[h] = min(cap[h] / weight[h], level)
    return rate


def water_fill_array(cap: np.ndarray, weight: np.ndarray, shared: float) -> np.ndarray:
    """`water_fill` on arrays, for many hosts (the same levels, vectorised)."""
    active = weight > 0
    x = np.where(active, cap / np.maximum(weight, _TINY), _BIG)  # each host's own level
    if float(cap @ active) <= shared:
        return np.where(active, x, 0.0)
    level = shared / float(weight.sum())
    if level <= float(x.min()):  # no host reaches its own cap: all at one level
        return np.where(active, level, 0.0)
    order = np.argsort(x, kind="stable")
    xs, cs, ws = x[order], (cap * active)[order], weight[order]
    # The first host (cheapest first) whose own level, with those before it capped and the
    # rest at that level, overfills the shared part sets the level.
    capped = np.concatenate(([0.0], np.cumsum(cs)[:-1]))
    rest_w = ws[::-1].cumsum()[::-1]
    k = int(np.argmax((capped + xs * rest_w > shared) & (ws > 0)))
    level = (shared - capped[k]) / rest_w[k]
    return np.where(active, np.minimum(x, level), 0.0)


SMALL = 8  # hosts up to which plain lists beat numpy's per-call cost


class SharedReads:
    """Flows of bytes from client hosts through their own and the shared parts."""

    def __init__(self, env: simpy.Environment, host_cap_bytes_per_s: np.ndarray,
                 shared_cap_bytes_per_s: float) -> None:
        self.env = env
        self.cap = np.asarray(host_cap_bytes_per_s, dtype=float)
        self.shared = float(shared_cap_bytes_per_s)
        hosts = self.cap.size
        self.level = np.zeros(hosts)  # bytes served per unit weight since the start
        self.weight = np.zeros(hosts)
        self.rate = np.zeros(hosts)  # bytes/s per unit weight
        self.served = np.zeros(hosts)
        self.head = np.full(hosts, np.inf)  # the level at which each host's next flow ends
        # kept as weights change (`_weigh`): each host's own level cap / weight (_BIG with no
        # weight, as `water_fill_array` has it) and the caps of the hosts with weight
        self._own = np.full(hosts, _BIG)
        self._active_cap = 0.0
        self._flows: list[list[tuple[float, int, simpy.Event, float]]] = [[] for _ in
                                                                          range(hosts)]
        self._seq = count()
        self._t_s = 0.0
        self._generation = 0
        self._timer_at_s = math.inf  # when the pending timer fires

    @property
    def served_bytes(self) -> np.ndarray:
        """Bytes each host has received so far."""
        self._advance()
        return self.served.copy()

    def read(self, host: int, n_bytes: float, weight: float,
             done: simpy.Event | None = None) -> simpy.Event:
        """An event (`done`, or a new one) that fires when `n_bytes` have reached `host`
        (weight > 0)."""
        done = self.env.event() if done is None else done
        if n_bytes <= 0:
            done.succeed()
            return done
        self._advance()
        flows = self._flows[host]
        heapq.heappush(flows, (self.level[host] + n_bytes / weight, next(self._seq), done,
                               weight))
        self.head[host] = flows[0][0]
        self._weigh(host, self.weight[host] + weight)
        # A start only slows flows: a pending timer still fires no later than the next end.
        self._reschedule(timer_stays=math.isfinite(self._timer_at_s))
        return done

    def _advance(self) -> None:
        dt = self.env.now - self._t_s
        if dt > 0:
            step = self.rate * dt
            self.level += step
            self.served += step * self.weight
        self._t_s = self.env.now

    def _weigh(self, host: int, weight: float) -> None:
        """Set `host`'s weight, keeping its own level and the active caps' sum."""
        was = self.weight[host] > 0
        self.weight[host] = weight
        now = weight > 0
        self._own[host] = self.cap[host] / weight if now else _BIG
        if now != was:
            self._active_cap += self.cap[host] if now else -self.cap[host]

    def _rates(self) -> tuple[np.ndarray, float | None]:
        """`water_fill_array`'s rates, its two common cases from the kept sums: every active
        host at its own cap, or every one at the shared level below all their caps (then
        also that one level; else None)."""
        w, shared = self.weight, self.shared
        # NB: the kept sum decides only clear of the threshold (its rounding differs from a
        # dot product's); near it the exact function does
        margin = 1e-9 * shared
        if self._active_cap < shared - margin:
            return np.where(w > 0, self._own, 0.0), None
        if self._active_cap > shared + margin:
            level = shared / float(w.sum())
            if level <= float(self._own.min()):
                return np.where(w > 0, level, 0.0), level
        return water_fill_array(self.cap, w, shared), None

    def _reschedule(self, timer_stays: bool = False) -> None:
        w = self.weight
        one_level = None
        if self.cap.size == 1:
            self.rate[0] = min(self.cap[0], self.shared) / w[0] if w[0] > 0 else 0.0
        elif self.cap.size <= SMALL:
            self.rate = np.array(water_fill(self.cap.tolist(), w.tolist(), self.shared))
        else:
            self.rate, one_level = self._rates()
        if timer_stays:
            return
        if one_level is not None and one_level > 0:
            # every host with a flow at one rate (one without has head inf): the same wait,
            # as division by one positive number keeps the order of what it divides
            wait_s = float((self.head - self.level).min()) / one_level
        else:
            wait_s = float(np.min(np.where(self.rate > 0, (self.head - self.level)
                                           / np.maximum(self.rate, _TINY), np.inf)))
        at_s = self.env.now + max(wait_s, 0.0)
        # A pending timer that fires no later stays (if early, it re-arms when it fires): a
        # start, which only slows flows, costs no event.
        if math.isfinite(wait_s) and at_s < self._timer_at_s:
            self._generation += 1
            self._timer_at_s = at_s
            gen = self._generation
            timer = self.env.timeout(max(wait_s, 0.0))
            timer.callbacks.append(lambda _ev: self._wake(gen))

    def _wake(self, generation: int) -> None:
        if generation != self._generation:
            return  # superseded by an earlier end
        self._timer_at_s = math.inf
        self._advance()
        due = np.flatnonzero(self.head - self.level <= _EPS_BYTES + 1e-12 * self.head)
        for h in due.tolist():
            flows, level = self._flows[h], self.level[h]
            while flows and flows[0][0] - level <= _EPS_BYTES + 1e-12 * flows[0][0]:
                _end, _seq, done, weight = heapq.heappop(flows)
                self._weigh(h, self.weight[h] - weight)
                done.succeed()
            if flows:
                self.head[h] = flows[0][0]
            else:
                self.head[h] = np.inf
                self._weigh(h, 0.0)  # no drift from float sums
        self._reschedule()
