"""Who is slow in a cluster: each node's compute factor and the nodes that lost a NIC link.

A node of k devices runs each synchronised step at the pace of its slowest device
(`accelsim.sim.straggler`): device j of node n takes `1 + spread x z_nj` times the nominal
time, z drawn from a standard normal with the run's seed, so the node's factor is
`1 + spread x max_j z_nj`. A slow node (`slow_node` > 1) has every device that much slower on
top (a thermally throttled node, a bad DIMM). A failed link takes one of a node's NIC rails
away; NCCL carries that rail's traffic over the node's other NICs (PXN), so the node's network
bandwidth falls to (rails - 1) / rails.

    factors = node_factors(2048, 8, 0.03, seed=0, slow_node=1.3)   # factors[0] is the slow one
    failed = failed_links(2048, 2, seed=0)                          # node indices, ascending
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import AccelsimError

MIN_FACTOR = 0.5  # NB: a normal draw below 1 - 0.5/spread would make a device 2x as fast: cut
SLOW_NODE = 0  # the slow node's index: the first of the first group (packed placement)


def node_factors(nodes: int, devices: int, spread: float, seed: int,
                 slow_node: float = 1.0) -> np.ndarray:
    """Step-time factor of each node (its slowest device's), shape (nodes,); node SLOW_NODE
    times `slow_node`. Deterministic in `seed`."""
    if spread > 0.0:
        rng = np.random.default_rng([seed, nodes, devices])
        z = rng.standard_normal((nodes, devices)).max(axis=1)
        factors = np.maximum(1.0 + spread * z, MIN_FACTOR)
    else:
        factors = np.ones(nodes)
    factors[SLOW_NODE] *= slow_node
    return factors


def failed_links(nodes: int, count: int, seed: int) -> np.ndarray:
    """Indices of the `count` nodes (of `nodes`) that each lost one NIC link, drawn with
    `seed` among all but the slow node where there are others (faults are independent)."""
    if count > nodes:
        raise AccelsimError(f"link_failures = {count}: more than the {nodes} nodes")
    if count == 0:
        return np.zeros(0, dtype=int)
    pool = np.arange(1, nodes) if count < nodes else np.arange(nodes)
    rng = np.random.default_rng([seed, nodes, 7])
    return np.sort(rng.choice(pool, size=count, replace=False))


def rail_share(rails: int, failed: int) -> float:
    """The network bandwidth a node keeps with `failed` of its `rails` links down (0 < share
    <= 1); AccelsimError where no link is left."""
    if failed >= rails:
        raise AccelsimError(f"a node with {rails} NIC link(s) and a failed link has no way to "
                            "the network: it cannot join (give link_failures 0, or a system "
                            "with more NICs)")
    return (rails - failed) / rails
