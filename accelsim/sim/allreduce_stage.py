"""The gradient all-reduce of the training pipeline: a mixin of
`accelsim.sim.train.TrainModel`, whose environment, plan, costs, recorder and resources it
uses. The last device to start a syncing step's backward starts the all-reduce; overlapped,
it runs bucket by bucket (`accelsim.interconnect.buckets`), each bucket once every device has
made its last gradient (backward slowed meanwhile by the collectives' share of the device);
not overlapped, as one message. Across nodes each collective's cross-node phase holds the
node's NICs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from accelsim.interconnect.buckets import advance
from accelsim.profiles.links import BITS_PER_BYTE, Link
from accelsim.sim.costs import PhaseCost


def link_j(link: Link | None, n_bytes: float) -> float:
    """Energy of `n_bytes` over `link`, J (0 where the link has no energy figure)."""
    if link is None or link.energy_j_per_bit is None:
        return 0.0  # NB: links without a published energy figure cost nothing here.
    return n_bytes * BITS_PER_BYTE * link.energy_j_per_bit


def staged_collective(env: simpy.Environment, nic: simpy.Resource, total_s: float,
                      network_s: float, on_network: Callable[[float, float], None]
                      ) -> Generator[Any, Any, None]:
    """One collective of `total_s` seconds. With a cross-node phase (`network_s` > 0, one of
    `accelsim.interconnect.multinode`'s hierarchical collectives): the in-node reduce-scatter
    (half the in-node time), the cross-node phase holding the node's NICs (`nic`), then the
    in-node all-gather; `on_network(start_s, end_s)` records the cross-node phase. Shared by
    the pipeline's all-reduce and a decoder's data-parallel exchange (`accelsim.llm.dp_events`).
    """
    if network_s <= 0:
        yield env.timeout(total_s)
        return
    # NB: the in-node time splits evenly between the reduce-scatter and the all-gather.
    yield env.timeout((total_s - network_s) / 2)
    with nic.request() as req:
        yield req
        start_s = env.now
        yield env.timeout(network_s)
        on_network(start_s, env.now)
    yield env.timeout((total_s - network_s) / 2)


class AllReduceStage:
    """All-reduce processes of `TrainModel` (a mixin; its state lives in TrainModel)."""

    env: Any
    plan: Any
    reads: Any
    costs: Any
    recorder: Any
    names: dict[str, str]

    def _comm_event(self, g: int) -> simpy.Event:
        ev = self._comm_done.get(g)
        if ev is None:
            ev = self._comm_done[g] = self.env.event()
        return ev

    def _syncs(self, g: int) -> bool:
        """Micro-step g ends an accumulation group: all-reduce, then the optimizer."""
        return (g + 1) % self.plan.accumulate == 0 or g == self.reads.steps - 1

    def _arrive(self, g: int, d: int, backward_s: float, c: PhaseCost) -> None:
        """Device d starts step g's backward at `backward_s`; the last to arrive starts the
        step's all-reduce."""
        arrivals = self._arrivals.setdefault(g, [])
        arrivals.append((d, backward_s, c))
        if len(arrivals) == self.plan.devices:
            del self._arrivals[g]
            self.env.process(self._allreduce(g, arrivals))

    def _allreduce(self, g: int, arrivals: list[tuple[int, float, PhaseCost]]
                   ) -> Generator[Any, Any, None]:
        env, costs, rec = self.env, self.costs, self.recorder
        busy: list[tuple[float, float]] = []
        cursors = {d: [b, 0.0, 0] for d, b, _ in arrivals}  # time, work done, busy index
        self._busy[g], self._cursors[g] = busy, cursors
        if self.plan.overlap_allreduce:
            k = len(costs.bucket_bytes)
            parts = [(f"bucket {i + 1}/{k}, {costs.bucket_bytes[i] / 1e6:.3g} MB, "
                      f"{costs.bucket_algorithm[i]}", costs.bucket_time_s[i],
                      costs.bucket_wire_bytes[i], i) for i in range(k)]
        else:
            parts = [(f"all gradients, one message, {costs.allreduce_algorithm}",
                      costs.allreduce_s, costs.allreduce_wire_bytes, -1)]
        link = self.plan.system.device_to_device
        with self.d2d.request() as req:
            yield req
            for detail, dur_s, wire, i in parts:
                # The bucket starts when its last gradient is ready on every device (each
                # slowed by the collectives running so far).
                ready = max(advance(cursors[d], c.ready_s(i) if i >= 0 else c.backward_s,
                                    busy, c.contention_share if i >= 0 else 0.0)
                            for d, _, c in arrivals)
                self._all_ready[g] = ready  # the last part's: every device's backward done
                if ready > env.now:
                    yield env.timeout(ready - env.now)
                t0 = env.now
                yield from self._collective(g, i, dur_s, detail)
                busy.append((t0, env.now))
                rec.add(self.names["d2d"], "allreduce", t0, env.now, g, -1, 0, wire,
                        link_j(link, wire), detail)
        self._comm_event(g).succeed()

    def _collective(self, g: int, i: int, dur_s: float, detail: str
                    ) -> Generator[Any, Any, None]:
        """One all-reduce (bucket i, or all gradients if i < 0) of `dur_s`; across nodes its
        cross-node phase, between the in-node reduce-scatter and all-gather, holds the NICs."""
        costs = self.costs
        net_s = (costs.allreduce_network_s if i < 0 else
                 costs.bucket_network_s[i] if i < len(costs.bucket_network_s) else 0.0)

        def on_network(start_s: float, end_s: float) -> None:
            wire = (sum(costs.bucket_network_wire_bytes) if i < 0
                    else costs.bucket_network_wire_bytes[i])
            self.recorder.add(self.names["network"], "allreduce", start_s, end_s, g, -1, 0,
                              wire, link_j(self.plan.system.network, wire), detail)

        yield from staged_collective(self.env, self.nic, dur_s, net_s, on_network)
