"""The notes a training run carries about what its figures rest on: the device speed spread
between its accelerators (`spread_note`) and the links whose energy is unknown
(`link_notes`). Plain functions of the resolved plan (`accelsim.sim.config.TrainPlan`).
"""

from __future__ import annotations

from accelsim.profiles.links import Link
from accelsim.sim.config import TrainPlan
from accelsim.sim.straggler import class_spread, expected_max


def spread_note(plan: TrainPlan) -> str:
    """What the device speed spread of a multi-device run rests on, and its slowest device."""
    fitted, line = class_spread(plan.device_profile)
    if plan.device_spread != fitted:
        line = f"step-time spread between devices {plan.device_spread:.2%} (as given)"
    n = plan.devices * plan.nodes
    return (f"{line}; the slowest of {n} devices takes "
            f"x{1 + plan.device_spread * expected_max(n):.4g} the nominal step time")


def link_notes(plan: TrainPlan, d2d: Link | None) -> list[str]:
    """A note per link the run uses whose energy is unknown: no energy per bit, and for the
    network no NIC power either (`accelsim.sim.part_energy` counts the NICs' draw)."""
    s = plan.system
    net = s.network if s.storage.over_network or plan.nodes > 1 else None
    used = [s.host_to_device, d2d, net if net is not None and net.active_power_w is None
            else None]
    return [f"link '{link.name}' has no energy figure: the links' energy is unknown (null)"
            for link in dict.fromkeys(u for u in used if u is not None)
            if link.energy_j_per_bit is None]
