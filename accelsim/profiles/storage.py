"""Persistent storage media: local NVMe/SATA/HDD/eMMC, a NAS over NFS, an object store.

Data: one TOML per medium in `hw_profiles/storage/`, name = file stem. Schema (a contract;
the SimPy pipeline reads `StorageMedium`, one device of a RAID set; the system says how many):

========================= ======== ===========================================================
key                       required meaning
========================= ======== ===========================================================
kind                      yes      "nvme" | "sata" | "hdd" | "emmc" | "nas" | "object"
description               yes      one line
read_bandwidth_mb_s       yes*     > 0; sequential (streaming) read. *May be left out for
                                   kind "object" only: no medium limit is published there and
                                   the client's network link bounds it (stored as inf).
write_bandwidth_mb_s      no       > 0; sequential write
random_read_4k_iops       yes      > 0; 4 KiB random reads per second at `max_concurrency`
request_latency_us        yes      >= 0; time to first byte of one request at low load, through
                                   the kernel path (POSIX read, NFS RPC or HTTP GET)
gds_request_latency_us    no       >= 0; the same through GPUDirect Storage (NVMe only)
max_concurrency           yes      >= 1; outstanding requests the medium serves at once (queue
                                   depth, NCQ slots, connections per prefix)
active_power_w            no       >= 0; one device's draw while it reads (absent: unknown)
idle_power_w              no       >= 0, <= active_power_w; its draw while idle (absent: unknown)
========================= ======== ===========================================================

plus `[sources]`. kind "nas" and "object" are reached over the host's network link.
Page-cache reads are not a medium: they run at the host's DRAM bandwidth (see sim.system).

Example::

    >>> nvme = load_storage("nvme-gen4")
    >>> nvme.read_bandwidth_bytes_per_s
    7000000000.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError
from accelsim.physical import BANDWIDTH, DURATION, OPS_RATE, POWER
from accelsim.schema import (
    MB,
    Field,
    count,
    flagged_fields,
    non_negative,
    parse_field,
    parse_profile,
    positive,
    text,
)
from accelsim.tomlfiles import find_profile, read_toml

STORAGE_KINDS = ("nvme", "sata", "hdd", "emmc", "nas", "object")
NETWORK_KINDS = ("nas", "object")
UNBOUNDED_KINDS = ("object",)  # kinds that may omit read_bandwidth_mb_s

FIELDS = (
    text("kind", choices=STORAGE_KINDS),
    text("description"),
    positive("read_bandwidth_mb_s", MB, "read_bandwidth_bytes_per_s", required=False,
             span=BANDWIDTH),
    positive("write_bandwidth_mb_s", MB, "write_bandwidth_bytes_per_s", required=False,
             span=BANDWIDTH),
    positive("random_read_4k_iops", attr="random_read_4k_iops", span=OPS_RATE),
    non_negative("request_latency_us", 1e-6, "request_latency_s", span=DURATION),
    non_negative("gds_request_latency_us", 1e-6, "gds_request_latency_s", required=False,
                 span=DURATION),
    count("max_concurrency"),
    non_negative("active_power_w", required=False, span=POWER),
    non_negative("idle_power_w", required=False, span=POWER),
)


@dataclass(frozen=True)
class StorageMedium:
    """One storage device (or service endpoint) in SI units."""

    name: str
    kind: str
    description: str
    read_bandwidth_bytes_per_s: float
    random_read_4k_iops: float
    request_latency_s: float
    max_concurrency: int
    write_bandwidth_bytes_per_s: float | None = None
    gds_request_latency_s: float | None = None
    active_power_w: float | None = None  # None: not published
    idle_power_w: float | None = None
    # one node's share of a storage system read by this many client nodes
    # (`accelsim.sim.storage_system.medium`); None: the medium itself
    share_of_clients: int | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def over_network(self) -> bool:
        """True for a NAS or object store: reads also cross the host's network link."""
        return self.kind in NETWORK_KINDS

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


def _fields(kind: str) -> tuple[Field, ...]:
    """FIELDS for a medium of `kind`: only UNBOUNDED_KINDS may omit read_bandwidth_mb_s."""
    return tuple(replace(f, required=kind not in UNBOUNDED_KINDS)
                 if f.key == "read_bandwidth_mb_s" else f for f in FIELDS)


def load_storage(name_or_path: str | Path) -> StorageMedium:
    """A built-in medium by name (`available_storage()`) or a user TOML by path."""
    path = find_profile(name_or_path, "storage/*.toml", "storage medium")
    raw = read_toml(path)
    values, sources = parse_profile(raw, _fields(parse_field(raw, FIELDS[0], str(path))),
                                    str(path))
    if values["read_bandwidth_bytes_per_s"] is None:
        # NB: no published medium limit; the network link in front of it bounds reads.
        values["read_bandwidth_bytes_per_s"] = math.inf
    idle, active = values["idle_power_w"], values["active_power_w"]
    if idle is not None and active is not None and idle > active:
        raise ConfigError(str(path), "idle_power_w", idle,
                          f"must be at most active_power_w = {active:g}")
    return StorageMedium(name=path.stem, sources=sources, **values)


def available_storage() -> list[str]:
    return sorted(builtin_files("hw_profiles", "storage/*.toml"))
