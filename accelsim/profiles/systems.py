"""A whole system: host CPU and DRAM, accelerators, the links between them, storage, and the
dataset it reads by default. The SimPy pipeline is built from one `System`.

Data: one TOML per system in `hw_profiles/systems/`, name = file stem. Schema (a contract):

======================================= ======== ============================================
key                                     required meaning
======================================= ======== ============================================
description                             yes      one line
default_dataset                         yes      a dataset name (hw_profiles/datasets/) or path
gpudirect_storage                       yes      bool: storage -> device memory without a
                                                 host bounce buffer (needs nvme or nas storage)
gpudirect_rdma                          yes      bool: NIC <-> device memory (needs a network)
host.cpu                                yes      a CPU profile name (checked non-empty; the
                                                 device loader owns CPU profiles), or a table
                                                 {name, cores, clock_ghz} defining it inline
host.sockets                            yes      >= 1
host.cores                              yes      >= 1; cores available to input preparation
host.dram_gb                            yes      > 0; host memory
host.dram_bandwidth_gb_s                yes      > 0; all sockets together; also the
                                                 page-cache read bandwidth (upper bound)
accelerator.device                      yes      a device profile name or .toml path (loaded
                                                 by `accelsim.profiles.hardware.system_device`)
accelerator.count                       yes      >= 1
links.host_to_device                    yes      a link name (hw_profiles/links/) or path
links.device_to_device                  no       a link name; required when count > 1
links.network                           no       a link name (one NIC port: InfiniBand, RoCE /
                                                 Ethernet); required for nas/object storage and
                                                 for multi-node runs (`nodes` > 1)
links.nic_count                         no       >= 1; required with, and only with, network:
                                                 the node's NIC ports (rails), shared by storage
                                                 reads over the network and cross-node traffic
storage.name                            yes      a storage name (hw_profiles/storage/) or path
storage.count                           yes      >= 1; devices striped together (RAID 0)
======================================= ======== ============================================

plus `[sources]`, keyed by dotted path (``"host.dram_gb"``); names of parts and booleans are
sourced too. Link, storage and dataset names are resolved and loaded; a path (ending in
.toml) is read relative to the system file.

Example::

    >>> dgx = load_system("dgx-a100")
    >>> dgx.host_to_device.bandwidth_bytes_per_s, dgx.storage_read_bandwidth_bytes_per_s
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError, UnknownNameError
from accelsim.physical import BANDWIDTH, BYTES, FREQUENCY, MAX_DEVICES, MAX_THREADS
from accelsim.profiles.datasets import Dataset, load_dataset
from accelsim.profiles.links import Link, load_link
from accelsim.profiles.storage import StorageMedium, load_storage
from accelsim.schema import GB, Field, count, flag, flagged_fields, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

GDS_STORAGE_KINDS = ("nvme", "nas")

_INLINE_CPU = (text("name"), count("cores", high=MAX_THREADS),
               positive("clock_ghz", 1e9, "clock_hz", span=FREQUENCY))
FIELDS = (
    text("description"),
    text("default_dataset"),
    flag("gpudirect_storage"),
    flag("gpudirect_rdma"),
    Field("host", dict, sub=(
        Field("cpu", (str, dict), sourced=True, sub=_INLINE_CPU, si_type=str),
        count("sockets", high=MAX_THREADS),
        count("cores", high=MAX_THREADS),
        positive("dram_gb", GB, "dram_bytes", si_type=int, span=BYTES),
        positive("dram_bandwidth_gb_s", GB, "dram_bandwidth_bytes_per_s", span=BANDWIDTH),
    )),
    Field("accelerator", dict, sub=(text("device", sourced=True),
                                    count("count", high=MAX_DEVICES))),
    Field("links", dict, sub=(
        text("host_to_device", sourced=True),
        text("device_to_device", required=False, sourced=True),
        text("network", required=False, sourced=True),
        count("nic_count", required=False, high=MAX_THREADS),
    )),
    Field("storage", dict, sub=(text("name", sourced=True), count("count", high=MAX_THREADS))),
)


@dataclass(frozen=True)
class InlineCpu:
    """A CPU defined inside a system file (edge SoCs without a profile of their own)."""

    name: str
    cores: int
    clock_hz: float


@dataclass(frozen=True)
class Host:
    cpu: str
    sockets: int
    cores: int
    dram_bytes: int
    dram_bandwidth_bytes_per_s: float
    cpu_inline: InlineCpu | None = None

    @property
    def page_cache_bandwidth_bytes_per_s(self) -> float:
        """Reads served from the page cache run at DRAM bandwidth."""
        # NB: theoretical DRAM bandwidth; measured page-cache throughput not found.
        return self.dram_bandwidth_bytes_per_s


@dataclass(frozen=True)
class System:
    name: str
    description: str
    host: Host
    device: str
    device_count: int
    host_to_device: Link
    device_to_device: Link | None
    network: Link | None
    nic_count: int
    storage: StorageMedium
    storage_count: int
    default_dataset: Dataset
    gpudirect_storage: bool
    gpudirect_rdma: bool
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def storage_read_bandwidth_bytes_per_s(self) -> float:
        """All storage devices striped together."""
        # NB: ideal RAID 0 scaling; no controller or filesystem limit.
        return self.storage_count * self.storage.read_bandwidth_bytes_per_s

    @property
    def network_bandwidth_bytes_per_s(self) -> float:
        """All NICs together, per direction; 0 without a network."""
        if self.network is None:
            return 0.0
        return self.nic_count * self.network.bandwidth_bytes_per_s

    @property
    def flagged_fields(self) -> tuple[str, ...]:
        return flagged_fields(self.sources)


T = TypeVar("T")


def _resolve(loader: Callable[[str | Path], T], value: str, base: Path, src: str,
             where: str) -> T:
    """Load a part by built-in name or by path relative to the system file."""
    ref: str | Path = base / value if value.endswith(".toml") else value
    try:
        return loader(ref)
    except UnknownNameError as exc:
        raise ConfigError(src, where, value, str(exc)) from None


def _check(ok: bool, src: str, where: str, value: Any, problem: str) -> None:
    if not ok:
        raise ConfigError(src, where, value, problem)


def load_system(name_or_path: str | Path) -> System:
    """A built-in system by name (`available_systems()`) or a user TOML by path."""
    path = find_profile(name_or_path, "systems/*.toml", "system")
    src, base = str(path), path.parent
    v, sources = parse_profile(read_toml(path), FIELDS, src)
    h, acc, ln, st = v["host"], v["accelerator"], v["links"], v["storage"]

    cpu_inline = InlineCpu(**h["cpu"]) if isinstance(h["cpu"], dict) else None
    if cpu_inline is None:
        cpus = builtin_files("hw_profiles", "devices/*.toml")
        # NB: a name that is no profile was taken as "no CPU profile" (the stand-in host):
        # a typo or an upper-case name changed the figures without a word.
        _check(h["cpu"] in cpus, src, "host.cpu", h["cpu"], "not a built-in CPU profile "
               "(names are lower case, e.g. epyc-7763, xeon-8380); or define the CPU inline "
               "as a [host.cpu] table")
    host = Host(cpu=cpu_inline.name if cpu_inline else h["cpu"], sockets=h["sockets"],
                cores=h["cores"], dram_bytes=h["dram_bytes"],
                dram_bandwidth_bytes_per_s=h["dram_bandwidth_bytes_per_s"],
                cpu_inline=cpu_inline)
    if cpu_inline:
        _check(host.cores <= host.sockets * cpu_inline.cores, src, "host.cores", host.cores,
               f"exceeds sockets x host.cpu.cores = {host.sockets * cpu_inline.cores}")

    def link(key: str) -> Link | None:
        name = ln[key]
        return None if name is None else _resolve(load_link, name, base, src, f"links.{key}")

    host_to_device, d2d, network = link("host_to_device"), link("device_to_device"), link("network")
    assert host_to_device is not None  # required key, checked by parse_profile
    storage = _resolve(load_storage, st["name"], base, src, "storage.name")
    dataset = _resolve(load_dataset, v["default_dataset"], base, src, "default_dataset")

    _check(acc["count"] == 1 or d2d is not None, src, "links.device_to_device", None,
           f"required when accelerator.count = {acc['count']} > 1")
    _check((network is None) == (ln["nic_count"] is None), src, "links.nic_count",
           ln["nic_count"], "must be given exactly when links.network is")
    _check(not storage.over_network or network is not None, src, "links.network", None,
           f"required: storage '{storage.name}' is reached over the network")
    _check(not v["gpudirect_storage"] or storage.kind in GDS_STORAGE_KINDS, src,
           "gpudirect_storage", True,
           f"needs {' or '.join(GDS_STORAGE_KINDS)} storage, not {storage.kind}")
    _check(not v["gpudirect_rdma"] or network is not None, src, "gpudirect_rdma", True,
           "needs links.network")

    return System(
        name=path.stem, description=v["description"], host=host, device=acc["device"],
        device_count=acc["count"], host_to_device=host_to_device, device_to_device=d2d,
        network=network, nic_count=ln["nic_count"] or 0, storage=storage,
        storage_count=st["count"], default_dataset=dataset,
        gpudirect_storage=v["gpudirect_storage"], gpudirect_rdma=v["gpudirect_rdma"],
        sources=sources)


def available_systems() -> list[str]:
    return sorted(builtin_files("hw_profiles", "systems/*.toml"))
