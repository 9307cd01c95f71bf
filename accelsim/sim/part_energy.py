"""Energy of a training run's parts besides the accelerators, the host CPU and DRAM: storage
devices, NICs, switches (NVSwitch chips, fabric switch ports) and device JPEG decoding.

    parts, notes = part_energy_j(plan, df, run_s, resource_names(plan))
    parts["storage"]      # J, or None where a power figure is not published

Each part draws its idle power for the whole run and its active power while busy:

    E = count x (idle_w x run_s + (active_w - idle_w) x busy_s)

with `busy_s` the time its resource's records cover (the storage channel, the network channel,
the device-to-device fabric), records that overlap counted once; the fabric's switches are not
busy during a collective's cross-node phase (the bytes are on the NICs then). A part the run
does not use is 0 J; a part whose power is not published is None, with a note naming it, and
the total counts only the known parts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

PARTS = ("storage", "nics", "switches", "decode")
# Record kinds of a collective's phases (the image pipeline's buckets, the LLM exchange's ZeRO
# reduce-scatters and all-gathers).
COLLECTIVE_KINDS = ("allreduce", "reducescatter", "allgather", "alltoall")


def _intervals(df: pd.DataFrame, resource: str,
               kinds: tuple[str, ...] | None = None) -> np.ndarray:
    """Merged (start, end) intervals of `resource`'s records (of `kinds`), in time order."""
    sel = (df["resource"] == resource) & (df["end_s"] > df["start_s"])
    if kinds is not None:
        sel &= df["kind"].isin(kinds)
    rows = df.loc[sel, ["start_s", "end_s"]].to_numpy(dtype=float)
    if not len(rows):
        return rows.reshape(-1, 2)
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    reach = np.maximum.accumulate(rows[:, 1])  # the furthest end so far
    # an interval starts a new merged one where it begins after everything before has ended
    first = np.flatnonzero(np.concatenate(([True], rows[1:, 0] > reach[:-1])))
    last = np.concatenate((first[1:] - 1, [len(rows) - 1]))
    return np.column_stack((rows[first, 0], reach[last]))


def busy_s(df: pd.DataFrame, resource: str, idle_during: str | None = None) -> float:
    """Seconds `resource`'s records cover (overlaps once), less the time the collective
    records (`COLLECTIVE_KINDS`) of resource `idle_during` cover within them."""
    own = _intervals(df, resource)
    total = float((own[:, 1] - own[:, 0]).sum())
    if idle_during is None or not len(own):
        return total
    for start, end in _intervals(df, idle_during, COLLECTIVE_KINDS):
        total -= float(np.clip(np.minimum(own[:, 1], end) - np.maximum(own[:, 0], start), 0.0,
                               None).sum())
    return total


def _draw_j(count: int, idle_w: float | None, active_w: float | None, run_s: float,
            busy_s: float) -> float | None:
    """count x (idle x run + (active - idle) x busy); None when either figure is unknown."""
    if idle_w is None or active_w is None:
        return None
    # NB: busy time of the shared channel counts every device of the set as active.
    return count * (idle_w * run_s + (active_w - idle_w) * min(busy_s, run_s))


def part_energy_j(plan: Any, df: pd.DataFrame, run_s: float,
                  names: dict[str, str]) -> tuple[dict[str, float | None], list[str]]:
    """Energy of each of `PARTS` over a run of `run_s` seconds (`plan`: a `TrainPlan`, `df`:
    its records, `names`: `accelsim.sim.train.resource_names`), and notes on the unknown."""
    s, notes = plan.system, []
    medium = s.storage
    storage = _draw_j(s.storage_count, medium.idle_power_w, medium.active_power_w, run_s,
                      busy_s(df, "storage"))
    if storage is None:
        notes.append(f"storage '{medium.name}' has no published power figure: its energy is "
                     "unknown (null)")

    nics: float | None = 0.0
    switches: float | None = 0.0
    net = s.network
    # NB: the NICs count when the run uses the network (storage over it, or several nodes);
    # a network the run does not touch is left out, idle or not.
    if net is not None and (medium.over_network or plan.nodes > 1):
        nics = _draw_j(s.nic_count, net.idle_power_w, net.active_power_w, run_s,
                       busy_s(df, names["network"]))
        ports = net.switch_port_power_w
        switches = None if ports is None else s.nic_count * ports * run_s
        if nics is None or ports is None:
            notes.append(f"network '{net.name}' has no published NIC or switch-port power: "
                         "their energy is unknown (null)")
    d2d = s.device_to_device
    if d2d is not None and d2d.kind == "nvswitch" and plan.devices > 1 and switches is not None:
        # NB: the fabric's chips are all busy while a collective runs over it, except in its
        # cross-node phase.
        chips = _draw_j(d2d.switch_count or 1, d2d.idle_power_w, d2d.active_power_w, run_s,
                        busy_s(df, names["d2d"], idle_during=names["network"]))
        if chips is None:
            notes.append(f"switch '{d2d.name}' has no published power: its energy is unknown "
                         "(null)")
        switches = None if chips is None else switches + chips

    decoded = df[df["kind"] == "decode"]
    decode: float | None = float(decoded["energy_j"].sum())
    if len(decoded) and plan.decode.power_w is None:
        decode = None  # the note comes with the decode plan
    return {"storage": storage, "nics": nics, "switches": switches, "decode": decode}, notes
