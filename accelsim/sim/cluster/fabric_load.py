"""What a job's traffic asks of its fabric's group uplinks, and how much that slows the network
phase of the all-reduce.

Layout: the job's nodes fill the fabric's groups in order (`nodes_per_group` each, the last
one partly). Ranks: "packed" puts ring neighbours in the same group (a topology-aware launcher:
each group has one ring edge leaving it and one entering, per ring), "scattered" orders ranks
at random (a scheduler that ignores topology: a node's ring successor is outside its group with
probability (N - n_g) / (N - 1)). NB: the double-binary tree is taken to cross groups as the
ring does; its upper levels cross more often under packed ranks (log2 of the groups per tree).

Per direction, a group's uplinks carry `nodes_per_group x NIC bandwidth / oversubscription`
(they are sized for a full group). During the network phase every node sends at its NIC's
achievable rate; the crossing part of that, plus the storage reads coming into the group when
the storage is reached over the network, share the uplinks fairly: where they ask more than the
uplinks carry, the network phase takes demand / capacity times as long (the slowest group
paces the ring).

    load = GroupLoad.of(fabric, nodes=512, placement="scattered")
    load.slowdown(nic_bytes_per_s=25e9, storage_bytes_per_s=np.zeros(load.groups))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.profiles.fabrics import FabricProfile

PLACEMENTS = ("packed", "scattered")


@dataclass(frozen=True)
class GroupLoad:
    """The groups a job fills and the ring traffic that leaves each, in node sends."""

    fabric: FabricProfile
    nodes: int
    placement: str
    group_of: np.ndarray  # (nodes,) group index of each node
    nodes_in_group: np.ndarray  # (groups,)
    crossing_sends: np.ndarray  # (groups,) nodes' sends that leave the group, in node units

    @classmethod
    def of(cls, fabric: FabricProfile, nodes: int, placement: str) -> GroupLoad:
        per = fabric.nodes_per_group
        group_of = np.arange(nodes) // per
        counts = np.bincount(group_of).astype(float)
        if len(counts) == 1:
            crossing = np.zeros(1)
        elif placement == "packed":
            crossing = np.ones(len(counts))  # NB: one ring edge leaves each group (per ring)
        else:
            crossing = counts * (nodes - counts) / (nodes - 1)
        return cls(fabric, nodes, placement, group_of, counts, crossing)

    @property
    def groups(self) -> int:
        return len(self.nodes_in_group)

    def uplink_bytes_per_s(self, nic_bytes_per_s: float) -> float:
        """One group's uplink bandwidth per direction."""
        return self.fabric.nodes_per_group * nic_bytes_per_s / self.fabric.oversubscription

    def utilization(self, nic_bytes_per_s: float,
                    storage_bytes_per_s: np.ndarray) -> np.ndarray:
        """Per group: what the network phase and the storage reads ask of the uplinks (into
        the group, the busier direction) over what they carry; above 1 they are congested."""
        asked = self.crossing_sends * nic_bytes_per_s + storage_bytes_per_s
        return asked / self.uplink_bytes_per_s(nic_bytes_per_s)

    def slowdown(self, nic_bytes_per_s: float, storage_bytes_per_s: np.ndarray) -> float:
        """How many times longer the network phase takes (>= 1): the busiest group's share."""
        return max(1.0, float(self.utilization(nic_bytes_per_s, storage_bytes_per_s).max()))

    def storage_cap_bytes_per_s(self, nic_bytes_per_s: float) -> float:
        """The most one node can read through its group's uplinks while every node of the
        fullest group reads (the all-reduce aside)."""
        return self.uplink_bytes_per_s(nic_bytes_per_s) / float(self.nodes_in_group.max())

    def extra_latency_s(self, ring_steps: int) -> float:
        """Latency a collective of `ring_steps` steps adds by crossing groups: every step waits
        for its slowest edge, and one edge crosses where there is more than one group."""
        if self.groups == 1:
            return 0.0
        return ring_steps * self.fabric.extra_hops * self.fabric.switch_latency_s
