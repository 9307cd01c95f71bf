"""Cluster fabrics: how the nodes of a multi-node run are switched together, for the every-node
cluster simulation (`accelsim.sim.cluster`). The nodes' own NICs (rails, link) come from the
system file; a fabric says how their switches group and climb.

Data: one TOML per fabric in `hw_profiles/fabrics/`, name = file stem. Schema:

    description        str    one line
    topology           str    "rail-optimised fat tree" (NIC r of every node on leaf r of its
                              group) or "fat tree" (a node's NICs on its group's leaves)
    nodes_per_group    int    nodes under one set of leaf switches (NVIDIA's scalable unit, a
                              pod): traffic between two of them stays below the group's uplinks
    oversubscription   >= 1   a group's downlink bandwidth over its uplink bandwidth (1: full
                              bisection; 7: uplinks carry a seventh of what the nodes can send)
    tiers              int    switch tiers a path between groups climbs (2: leaf and spine)
    switch_latency_ns  >= 0   one pass through a switch

plus `[sources]`. A run without a fabric file gets `nonblocking(nodes)`: one group, no
oversubscription (every node one switch hop from every other, as the closed forms assume).

    fab = load_fabric("dgx-superpod-h100")
    fab.groups(512), fab.uplink_share(512)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.physical import DURATION, MAX_NODES, Span
from accelsim.schema import count, flagged_fields, non_negative, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

TOPOLOGIES = ("rail-optimised fat tree", "fat tree")
OVERSUBSCRIPTION = Span(1.0, 1e3, "")  # NB: above 1:1000 a fabric is a single uplink

FIELDS = (
    text("description"),
    text("topology", TOPOLOGIES),
    count("nodes_per_group", high=MAX_NODES),
    positive("oversubscription", span=OVERSUBSCRIPTION),
    count("tiers", high=5),
    non_negative("switch_latency_ns", 1e-9, "switch_latency_s", span=DURATION),
)


@dataclass(frozen=True)
class FabricProfile:
    """A cluster fabric in SI units (s); bandwidths are the nodes' (the system's NICs)."""

    name: str
    description: str
    topology: str
    nodes_per_group: int
    oversubscription: float
    tiers: int
    switch_latency_s: float
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def groups(self, nodes: int) -> int:
        """Groups a job of `nodes` nodes, packed in order, occupies."""
        return math.ceil(nodes / self.nodes_per_group)

    @property
    def uplink_share(self) -> float:
        """A group's uplink bandwidth per node of a full group, as a share of a node's NICs."""
        return 1.0 / self.oversubscription

    @property
    def extra_hops(self) -> int:
        """Switch passes a path between groups adds to one inside a group (up and down)."""
        return 2 * (self.tiers - 1)

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


def nonblocking(nodes: int) -> FabricProfile:
    """The fabric the closed forms assume: every node in one group under one switch tier."""
    return FabricProfile("nonblocking", "ideal non-blocking switch (no fabric file given)",
                         "fat tree", max(1, nodes), 1.0, 1, 0.0)


def load_fabric(name_or_path: str | Path) -> FabricProfile:
    """A built-in fabric by name (`available_fabrics()`) or a user TOML by path."""
    path = find_profile(name_or_path, "fabrics/*.toml", "fabric")
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
    return FabricProfile(name=path.stem, sources=sources, **values)


def available_fabrics() -> list[str]:
    return sorted(builtin_files("hw_profiles", "fabrics/*.toml"))
