"""This host's power as data: RAPL where the kernel exposes it readable, else unknown.

    rapl = read_rapl()                     # Rapl (package zones) or None
    watts = rapl.mean_power_w(before, rapl.energy_uj())

Linux's powercap exposes the package energy counters of Intel and AMD (Zen) CPUs as
`/sys/class/powercap/intel-rapl:<n>/energy_uj` (a counter that wraps at `max_energy_range_uj`)
and their long-term limit (PL1) as `constraint_0_power_limit_uw`. A VM, or a host where they are
readable by root only, has none: the profile writer then marks the TDP as not limiting the
clock (`power.limits_clock = false`), so an assumed figure throttles nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"intel-rapl:\d+")  # package zones (their subzones: intel-rapl:0:0)


def _number(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Rapl:
    """The readable package zones: their folders, wrap ranges (uJ) and limits (W; None where
    a zone gives none)."""

    zones: tuple[Path, ...]
    ranges_uj: tuple[float, ...]
    limits_w: tuple[float | None, ...]

    @property
    def limit_w(self) -> float | None:
        """The packages' long-term power limit summed, W (None unless every zone gives one)."""
        if not self.limits_w or any(w is None for w in self.limits_w):
            return None
        return float(sum(w for w in self.limits_w if w is not None))

    def energy_uj(self) -> tuple[float, ...]:
        """Each zone's energy counter now, uJ (nan where it became unreadable)."""
        return tuple(_number(z / "energy_uj") or float("nan") for z in self.zones)

    def mean_power_w(self, start: tuple[float, ...], end: tuple[float, ...],
                     seconds: float) -> float | None:
        """Mean package power between two `energy_uj` readings `seconds` apart, W (a counter
        that wrapped adds its range; None when a reading is missing or no time passed)."""
        if seconds <= 0 or any(x != x for x in (*start, *end)):
            return None
        joules = sum(((b - a) % r if r else b - a) / 1e6
                     for a, b, r in zip(start, end, self.ranges_uj, strict=True))
        return joules / seconds


def read_rapl(root: Path = POWERCAP) -> Rapl | None:
    """The package RAPL zones under `root` whose energy counter this process can read, None
    where there is none (a VM, an OS without powercap, counters readable by root only)."""
    try:
        folders = sorted(p for p in root.iterdir() if _PACKAGE.fullmatch(p.name))
    except OSError:
        return None
    zones = [z for z in folders if _number(z / "energy_uj") is not None]
    if not zones:
        return None
    limits = []
    for zone in zones:
        uw = _number(zone / "constraint_0_power_limit_uw")
        limits.append(uw / 1e6 if uw else None)
    return Rapl(zones=tuple(zones),
                ranges_uj=tuple(_number(z / "max_energy_range_uj") or 0.0 for z in zones),
                limits_w=tuple(limits))
