"""What this host says about itself (Linux `/proc` and `/sys`, as `lscpu` reads them).

    facts = host_facts()      # HostFacts: cores, clock, SIMD width, caches, memory, disk
    nearest_builtin(facts)    # the built-in CPU profile closest to it ("epyc-7763", ...)

Nothing here is measured by timing: these are the figures the kernel exposes, each with the
file it came from. A figure the host does not expose is None, and the profile writer says what
stands in for it.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")
CPU_SYS = Path("/sys/devices/system/cpu")
SIMD_FLAGS = (("avx512f", 512), ("avx2", 256), ("avx", 256), ("sse2", 128), ("asimd", 128))


@dataclass(frozen=True)
class HostFacts:
    """This host's CPU and memory as the OS exposes them (None: not exposed)."""

    hostname: str
    model_name: str
    vendor: str
    cores: int  # logical CPUs this process may run on
    clock_hz: float | None
    max_clock_hz: float | None
    simd_width_bits: int
    has_fma: bool
    l3_cache_bytes: float | None
    memory_bytes: float | None
    cpu_family: int | None
    flags: frozenset[str]

    @property
    def clock_source(self) -> str:
        return (f"{CPU_SYS}/cpu0/cpufreq/cpuinfo_max_freq" if self.max_clock_hz
                else f"{CPUINFO} 'cpu MHz'")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where unreadable)."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def _read_number(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _size_bytes(text: str) -> float | None:
    """'32768K' / '32 MiB' -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?\s*", text)
    if not match:
        return None
    return float(match[1]) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match[2]]


def _l3_bytes() -> float | None:
    """The last-level (L3) cache of cpu0, from /sys/.../cache/index*/size."""
    for index in sorted((CPU_SYS / "cpu0" / "cache").glob("index*")):
        if _read_number(index / "level") == 3:
            try:
                return _size_bytes((index / "size").read_text())
            except OSError:
                return None
    return None


def _memory_bytes() -> float | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_facts() -> HostFacts:
    """This host's facts (Linux; elsewhere most figures are None)."""
    info = _cpuinfo()
    flags = frozenset(info.get("flags", info.get("Features", "")).split())
    simd = next((bits for flag, bits in SIMD_FLAGS if flag in flags), 128)
    mhz = info.get("cpu MHz")
    max_khz = _read_number(CPU_SYS / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    vendor_id = info.get("vendor_id", "")
    vendor = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}.get(vendor_id, vendor_id or
                                                                  platform.machine())
    family = info.get("cpu family")
    return HostFacts(
        hostname=socket.gethostname(), model_name=info.get("model name", platform.processor()
                                                           or "unknown CPU"),
        vendor=vendor or "unknown", cores=len(os.sched_getaffinity(0)),
        clock_hz=float(mhz) * 1e6 if mhz else None,
        max_clock_hz=max_khz * 1e3 if max_khz else None,
        simd_width_bits=simd, has_fma="fma" in flags or "asimd" in flags,
        l3_cache_bytes=_l3_bytes(), memory_bytes=_memory_bytes(),
        cpu_family=int(family) if family and family.isdigit() else None, flags=flags)


def memory_technology(facts: HostFacts) -> str:
    """DDR generation guessed from the CPU family. NB: a guess (a VM exposes no DIMMs): AMD
    family 26 (Zen 5) and Intel cores with AMX (Sapphire Rapids on) take DDR5, others DDR4."""
    ddr5 = (facts.vendor == "AMD" and (facts.cpu_family or 0) >= 26) or "amx_tile" in facts.flags
    return "ddr5" if ddr5 else "ddr4"


def nearest_builtin(facts: HostFacts) -> str:
    """The built-in CPU profile closest to this host: same vendor, and for Intel the one with
    AMX when the host has it. NB: by vendor and ISA only; core counts and clocks differ."""
    if facts.vendor == "AMD":
        return "epyc-7763"
    return "xeon-8480" if "amx_tile" in facts.flags else "xeon-8380"
