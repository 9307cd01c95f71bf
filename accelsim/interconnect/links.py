"""Closed forms over one link (`accelsim.profiles.links.Link`): the time and energy of a transfer.

    >>> from accelsim.profiles.links import load_link
    >>> link = load_link("pcie-gen4-x16")
    >>> round(transfer_time_s(31.5e9, link), 3)   # 1 s of payload + latency
    1.0
"""

from __future__ import annotations

from accelsim.profiles.links import BITS_PER_BYTE, Link


def transfer_time_s(n_bytes: float, link: Link, achieved: bool = False) -> float:
    """Closed form: latency + bytes / bandwidth (theoretical, or achieved if asked)."""
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be >= 0, got {n_bytes!r}")
    bw = link.achieved_bandwidth_bytes_per_s if achieved else link.bandwidth_bytes_per_s
    # NB: no packet/TLP overhead beyond what the efficiency figure captures; no contention.
    return link.latency_s + n_bytes / bw


def transfer_energy_j(n_bytes: float, link: Link) -> float | None:
    """Energy to move `n_bytes` across `link`; None where the link has no energy figure."""
    if link.energy_j_per_bit is None:
        return None
    return n_bytes * BITS_PER_BYTE * link.energy_j_per_bit
