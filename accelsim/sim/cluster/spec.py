"""The knobs of an every-node cluster run, checked: `cluster_spec(config, nodes)`.

`every_node` asks for it; a fabric, a scattered placement, a slow node or a failed link imply
it (they mean nothing for one simulated node). It needs more than one node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.physical import MAX_NODES
from accelsim.sim.cluster.fabric_load import PLACEMENTS

MAX_SLOW_NODE = 100.0  # NB: a node 100x slower than its peers is a failed node, not a slow one


@dataclass(frozen=True)
class ClusterSpec:
    """An every-node run's settings: the fabric (None: non-blocking), rank placement, the slow
    node's factor (1: none) and how many nodes lost one NIC link."""

    fabric: str | None = None
    placement: str = "packed"
    slow_node: float = 1.0
    link_failures: int = 0


def cluster_spec(cfg: Any, nodes: int) -> ClusterSpec | None:
    """The `ClusterSpec` of a TrainConfig `cfg` (None: one node simulated, the others alike);
    AccelsimError naming the knob for a bad value."""
    asked = [name for name, given in (
        ("every_node", cfg.every_node is True), ("fabric", cfg.fabric is not None),
        ("placement", cfg.placement != "packed"), ("slow_node", cfg.slow_node != 1.0),
        ("link_failures", cfg.link_failures != 0)) if given]
    if not isinstance(cfg.every_node, bool):
        raise _bad("every_node", cfg.every_node, "expected true or false")
    if not asked:
        return None
    if nodes < 2:
        raise AccelsimError(f"{asked[0]}: the every-node cluster simulation needs nodes > 1 "
                            "(--nodes N)")
    if cfg.fabric is not None and (not isinstance(cfg.fabric, str) or not cfg.fabric.strip()):
        raise _bad("fabric", cfg.fabric, "expected a fabric name (hw_profiles/fabrics/) or a "
                   ".toml path")
    if cfg.placement not in PLACEMENTS:
        raise _bad("placement", cfg.placement, f"choose {' or '.join(PLACEMENTS)}")
    slow = cfg.slow_node
    if (isinstance(slow, bool) or not isinstance(slow, int | float) or not math.isfinite(slow)
            or not 1.0 <= slow <= MAX_SLOW_NODE):
        raise _bad("slow_node", slow, f"expected a factor from 1 to {MAX_SLOW_NODE:g} (how "
                   "many times slower one node's devices run)")
    failed = cfg.link_failures
    if isinstance(failed, bool) or not isinstance(failed, int) or not 0 <= failed <= MAX_NODES:
        raise _bad("link_failures", failed, "expected a whole number of nodes, >= 0")
    if failed > nodes:
        raise _bad("link_failures", failed, f"more than the {nodes} nodes")
    return ClusterSpec(cfg.fabric, cfg.placement, float(slow), failed)


def _bad(field: str, value: Any, why: str) -> AccelsimError:
    return AccelsimError(f"training config: '{field}' = {value!r}: {why}")
