"""What the SimPy training model (`accelsim.sim.train`) needs beyond the plan: the compute of
one step per batch size, the gradient all-reduce (whole and per bucket) and the host's energy
rates. Built by `accelsim.sim.run`; SI units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PhaseCost:
    """One accelerator's training step at one batch size, from the device cost model."""

    forward_s: float = 0.0
    backward_s: float = 0.0
    optimizer_s: float = 0.0
    forward_j: float = 0.0
    backward_j: float = 0.0
    optimizer_j: float = 0.0
    bucket_ready_s: tuple[float, ...] = ()  # per gradient bucket, after backward starts
    contention_share: float = 0.0  # backward speed lost while a collective runs

    def ready_s(self, bucket: int) -> float:
        """When `bucket`'s last gradient is ready, at full speed (end of backward if unknown)."""
        ready = self.bucket_ready_s
        return ready[bucket] if bucket < len(ready) else self.backward_s


@dataclass(frozen=True)
class StepCosts:
    """Everything the SimPy model needs beyond the plan: per-batch-size compute, the
    all-reduce (of all gradients in one message, and per bucket), and the host's energy
    rates."""

    compute: Mapping[int, PhaseCost]  # by per-accelerator batch size
    allreduce_s: float  # all gradients, one message
    allreduce_wire_bytes: float
    core_power_w: float  # one busy host core
    dram_j_per_byte: float
    bucket_bytes: tuple[float, ...] = ()
    bucket_time_s: tuple[float, ...] = ()
    bucket_wire_bytes: tuple[float, ...] = ()
    bucket_algorithm: tuple[str, ...] = ()
    allreduce_algorithm: str = "ring"  # of the one-message all-reduce
    # multi-node: of each time above, the part on the network (holding the node's NICs)
    bucket_network_s: tuple[float, ...] = ()
    bucket_network_wire_bytes: tuple[float, ...] = ()
    allreduce_network_s: float = 0.0
