"""The terminal text of a federated run's record (`accelsim.sim.federated`)."""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 100  # terminal columns


def _duration(seconds: float | None) -> str:
    from accelsim.results.render import duration_text

    return "-" if seconds is None else duration_text(seconds)


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


def _joules(j: float | None) -> str:
    return "unknown" if j is None else f"{j:,.1f} J"


def federated_lines(r: dict[str, Any]) -> list[str]:
    """Lines of at most `WIDTH` columns (wrapped with a hanging indent): the answer (round
    time, the rounds' total) first."""
    f, w, hw = r["federated"], r["workload"], r["hardware"]
    net, rs, ph = f["network"], f["round_s"], f["client_phase_s"]
    energy = f["client_energy_j_per_round"]
    deadline = ("" if f["deadline_s"] is None else
                f", deadline {_duration(f['deadline_s'])}")
    lines = [
        f"{w['name']} federated: {f['clients_per_round']} of {f['clients']} {hw['name']} "
        f"clients a round ({hw['class']}, {hw['software']}), {f['rounds']} rounds over "
        f"{net['name']}",
        f"  round        {_duration(rs['mean'])} mean (p50 {_duration(rs['p50'])}, max "
        f"{_duration(rs['max'])}); {f['rounds']} rounds in {_duration(f['total_s'])}",
        f"  clients      {f['finished_per_round']:,.1f} of {f['clients_per_round']} a round "
        f"finish in time ({f['finished_share']:.0%}){deadline}",
        f"  per client   download {_duration(ph['download'])}, {f['local_steps']} steps "
        f"{_duration(ph['compute'])}, upload {_duration(ph['upload'])} "
        f"(update {_mb(f['update_bytes'])} {f['update_precision']})",
        f"  network      {net['downlink_mbps']:g} Mbit/s down, {net['uplink_mbps']:g} up, "
        f"RTT {_duration(net['rtt_s'])}; {_mb(f['bytes_per_round']['down'])} down, "
        f"{_mb(f['bytes_per_round']['up'])} up a round",
        f"  energy       {_joules(energy['total'])} a client a round: compute "
        f"{_joules(energy['compute'])}, radio {_joules(energy['radio'])}",
        f"  server       {f['server']}: averages the updates in {_duration(f['aggregate_s'])}",
        f"  bottleneck   {r['bottleneck']}: {r['bottleneck_detail']}",
    ]
    lines += [f"  note         {n}" for n in r["notes"]]
    return [part for line in lines for part in textwrap.wrap(
        line, WIDTH, subsequent_indent=" " * 15, break_on_hyphens=False)]
