"""Point-to-point and switched links: PCIe, NVLink, NVSwitch, Ethernet, InfiniBand, ICI, USB.

Data: one TOML per link in `hw_profiles/links/`, name = file stem. Schema (a contract; the
SimPy pipeline reads `Link`):

====================================== ======== ===================================================
key                                    required meaning
====================================== ======== ===================================================
kind                                   yes      "pcie" | "nvlink" | "nvswitch" | "ethernet" |
                                                "infiniband" | "ici" | "usb"
description                            yes      one line
bandwidth_gb_s_per_direction           yes      > 0; theoretical, per direction, per endpoint
                                                (per GPU for NVLink/NVSwitch, per port for NICs)
latency_us                             yes      >= 0; fixed cost paid once per transfer
achieved_efficiency                    no       (0, 1]; published achieved / theoretical
energy_pj_per_bit                      no       >= 0; absent where no figure was found
lanes                                  no       PCIe lane count
transfer_rate_gt_s_per_lane            no       PCIe signalling rate (128b/130b encoding, Gen3+)
link_count                             no       NVLink links per GPU, ICI links per chip
per_link_bandwidth_gb_s_per_direction  no       one link's bandwidth
switch_count                           no       switch chips per node (NVSwitch)
in_switch_reduction                    no       true: the switch reduces and multicasts (NVLink
                                                SHARP), so NCCL's nvls all-reduce runs over it
active_power_w                         no       >= 0; draw while carrying traffic of one NIC
                                                port (network kinds) or one switch chip
                                                (nvswitch); absent: unknown
idle_power_w                           no       >= 0, <= active_power_w; the same while idle
switch_port_power_w                    no       >= 0; network kinds: the fabric switch's draw
                                                per port, whatever the traffic
====================================== ======== ===================================================

plus `[sources]`: one entry per number (see `accelsim.schema`). Cross-field checks: lanes x
rate x 128/130 / 8 and link_count x per-link bandwidth must both match the total within 1 %.

The transfer closed forms over a `Link` are in `accelsim.profiles.links`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError
from accelsim.physical import BANDWIDTH, DURATION, ENERGY, FREQUENCY, POWER
from accelsim.schema import (
    GB,
    count,
    flag,
    flagged_fields,
    fraction,
    non_negative,
    parse_profile,
    positive,
    text,
)
from accelsim.tomlfiles import find_profile, read_toml

LINK_KINDS = ("pcie", "nvlink", "nvswitch", "ethernet", "infiniband", "ici", "usb")
PCIE_ENCODING = 128 / 130  # PCIe Gen3+ line code [PCIE_NOTES]
BITS_PER_BYTE = 8
_MATCH_TOLERANCE = 0.01

FIELDS = (
    text("kind", choices=LINK_KINDS),
    text("description"),
    positive("bandwidth_gb_s_per_direction", GB, "bandwidth_bytes_per_s", span=BANDWIDTH),
    non_negative("latency_us", 1e-6, "latency_s", span=DURATION),
    fraction("achieved_efficiency", required=False),
    non_negative("energy_pj_per_bit", 1e-12, "energy_j_per_bit", required=False, span=ENERGY),
    count("lanes", required=False),
    positive("transfer_rate_gt_s_per_lane", 1e9, "transfer_rate_t_per_s_per_lane",
             required=False, span=FREQUENCY),
    count("link_count", required=False),
    positive("per_link_bandwidth_gb_s_per_direction", GB, "per_link_bandwidth_bytes_per_s",
             required=False, span=BANDWIDTH),
    count("switch_count", required=False),
    flag("in_switch_reduction", required=False),
    non_negative("active_power_w", required=False, span=POWER),
    non_negative("idle_power_w", required=False, span=POWER),
    non_negative("switch_port_power_w", required=False, span=POWER),
)


@dataclass(frozen=True)
class Link:
    """A link's data in SI units. Bandwidth is per direction; links are full duplex."""

    name: str
    kind: str
    description: str
    bandwidth_bytes_per_s: float
    latency_s: float
    achieved_efficiency: float | None = None
    energy_j_per_bit: float | None = None
    lanes: int | None = None
    transfer_rate_t_per_s_per_lane: float | None = None
    link_count: int | None = None
    per_link_bandwidth_bytes_per_s: float | None = None
    switch_count: int | None = None
    in_switch_reduction: bool | None = None
    active_power_w: float | None = None  # per NIC port or switch chip; None: not published
    idle_power_w: float | None = None
    switch_port_power_w: float | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def achieved_bandwidth_bytes_per_s(self) -> float:
        """Bandwidth times the published achieved efficiency (theoretical if none)."""
        # NB: one published efficiency stands for every transfer size and direction.
        return self.bandwidth_bytes_per_s * (self.achieved_efficiency or 1.0)

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= _MATCH_TOLERANCE * max(abs(a), abs(b))


def load_link(name_or_path: str | Path) -> Link:
    """A built-in link by name (`available_links()`) or a user TOML by path."""
    path = find_profile(name_or_path, "links/*.toml", "link")
    src = str(path)
    values, sources = parse_profile(read_toml(path), FIELDS, src)
    link = Link(name=path.stem, sources=sources, **values)
    bw = link.bandwidth_bytes_per_s
    if link.lanes and link.transfer_rate_t_per_s_per_lane:
        lane_bw = link.lanes * link.transfer_rate_t_per_s_per_lane * PCIE_ENCODING / BITS_PER_BYTE
        if not _near(lane_bw, bw):
            raise ConfigError(src, "bandwidth_gb_s_per_direction", bw / GB,
                              f"disagrees with lanes x rate x 128/130 / 8 = {lane_bw / GB:.3g}")
    if link.link_count and link.per_link_bandwidth_bytes_per_s:
        total = link.link_count * link.per_link_bandwidth_bytes_per_s
        if not _near(total, bw):
            raise ConfigError(src, "bandwidth_gb_s_per_direction", bw / GB,
                              f"disagrees with link_count x per-link = {total / GB:.3g}")
    if link.idle_power_w is not None and link.idle_power_w > (link.active_power_w or 0.0):
        raise ConfigError(src, "idle_power_w", link.idle_power_w,
                          "must be given with, and at most, active_power_w")
    return link


def available_links() -> list[str]:
    return sorted(builtin_files("hw_profiles", "links/*.toml"))
