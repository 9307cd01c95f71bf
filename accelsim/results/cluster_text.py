"""The terminal line of an every-node cluster run (`accelsim.sim.cluster`): what each node's
time went to, the slowest node, the fabric's state, and the one-node model beside it."""

from __future__ import annotations

from typing import Any

_CAUSES = (("compute", "compute"), ("slowest_node", "waiting for the slowest"),
           ("communication", "all-reduce"), ("input", "input"))


def cluster_lines(r: dict[str, Any]) -> list[str]:
    """One labelled line for a record with a `cluster` block, none without."""
    c = r.get("cluster")
    if not c:
        return []
    share = c["time_share"]
    spent = ", ".join(f"{label} {share[key]:.1%}" for key, label in _CAUSES)
    groups = (f"{c['groups']} group{'s' if c['groups'] > 1 else ''} of up to "
              f"{c['nodes_per_group']}, 1:{c['oversubscription']:g}")
    faults = []
    if c["slow_node"] > 1.0:
        faults.append(f"node 0 slowed x{c['slow_node']:g}")
    if c["link_failures"]:
        faults.append(f"{c['link_failures']} node(s) with a failed link")
    fault_text = f"; faults: {', '.join(faults)}" if faults else ""
    return [f"  cluster      {c['nodes_simulated']:,} nodes simulated on {c['fabric']} ({groups}, "
            f"ranks {c['placement']}){fault_text}; node time: {spent}; slowest node "
            f"{c['slowest_node']} x{c['node_factor_max']:.3g} (median "
            f"x{c['node_factor_median']:.3g}); network phase up to "
            f"x{c['network_slowdown_max']:.3g}, uplinks at most "
            f"{c['uplink_utilization_peak']:.0%} asked; the one-node model says "
            f"{c['one_node_model_throughput_samples_per_s']:,.0f} samples/s"]
