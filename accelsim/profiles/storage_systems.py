"""Shared storage systems described from their parts, and the file-system classes they run.

Data: `hw_profiles/storage_systems/<name>.toml` (one per system) and
`hw_profiles/fs_classes/<class>.toml` (one per protocol / file-system class). A system is
storage servers (count, drives per server with a `hw_profiles/storage/` medium, cores, network
ports with a `hw_profiles/links/` profile, optionally the vendor's rated read throughput), the
client hosts that read it (count, cores, DRAM, NICs; local drives for class "local") and a
class whose per-class costs (`FsClass`) are fitted on MLPerf Storage rows, never per system.

System schema (a contract; `accelsim.sim.storage_system` reads `StorageSystem`):

========================= ======== ===========================================================
key                       required meaning
========================= ======== ===========================================================
description               yes      one line
fs_class                  yes      a `hw_profiles/fs_classes/` name: local, lustre, nvme-tcp, ...
submitter                 no       who built or submitted it
servers.count             yes*     storage servers that serve data (*absent for class local)
servers.drives            yes*     data drives per server
servers.drive             yes*     the `hw_profiles/storage/` medium of one drive
servers.cores             yes*     CPU cores per server serving I/O
servers.ports             yes*     client-facing network ports per server
servers.port_link         yes*     the `hw_profiles/links/` profile of one port
servers.rated_read_gb_s   no       > 0; the vendor's rated read of one server (a controller
                                   limit the parts do not show)
clients.hosts             yes      client hosts (each runs the training or DLIO processes)
clients.cores             yes      physical cores per host
clients.dram_gb           yes      DRAM per host visible to the job (the page cache's room)
clients.nics              yes*     storage-facing NIC ports per host (*not for class local)
clients.nic_link          yes*     the `hw_profiles/links/` profile of one client port
clients.drives            local    local drives per host (class local only)
clients.drive             local    their medium (class local only)
clients.offload           no       "dpu": the protocol runs on a DPU, not on the host's cores
clients.requests_in_flight no      a mount option: requests a client keeps outstanding per
                                   server (Lustre's max_rpcs_in_flight), over the class's
fabric.bisection_gb_s     no       > 0; the switch fabric's bisection (absent: non-blocking)
========================= ======== ===========================================================

Class schema: `FS_FIELDS` (each figure sourced; fitted ones say on which rows).

    >>> sys = load_storage_system("Micron_9550_Gen5_Performance_NVMe")
    >>> sys.fs.name, sys.clients.hosts
    ('local', 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError, ConfigError
from accelsim.physical import BANDWIDTH, BYTES, DURATION
from accelsim.profiles.links import Link, load_link
from accelsim.profiles.storage import StorageMedium, load_storage
from accelsim.schema import GB, Field, count, fraction, non_negative, parse_profile, positive, text
from accelsim.tomlfiles import find_profile, read_toml

FS_CLASSES = ("local", "lustre", "gpfs", "nfs", "nvme-tcp", "nvme-rdma")
OFFLOADS = ("dpu",)
US_PER_MB = 1e-6 / 1e6  # core-microseconds per MB -> core-seconds per byte

FS_FIELDS = (
    text("description"),
    fraction("protocol_efficiency"),
    non_negative("request_latency_us", 1e-6, "request_latency_s", span=DURATION),
    non_negative("client_core_us_per_mb", US_PER_MB, "client_core_s_per_byte"),
    non_negative("client_core_us_per_sample", 1e-6, "client_core_s_per_sample"),
    non_negative("client_core_us_per_file", 1e-6, "client_core_s_per_file"),
    non_negative("offload_client_core_us_per_mb", US_PER_MB, "offload_client_core_s_per_byte",
                 required=False),
    non_negative("server_core_us_per_mb", US_PER_MB, "server_core_s_per_byte"),
    fraction("drive_read_efficiency"),
    count("requests_in_flight", required=False),
    positive("request_size_kib", 1024.0, "request_bytes", required=False, span=BYTES),
)


@dataclass(frozen=True)
class FsClass:
    """The per-class costs of one protocol / file system, SI units."""

    name: str
    description: str
    protocol_efficiency: float  # payload share of a port's rate
    request_latency_s: float  # one file request's fixed cost (open, round trip) beyond the
    # drive's own latency, paid by the reading thread
    client_core_s_per_byte: float  # client CPU per byte read (protocol, copies)
    client_core_s_per_sample: float  # client CPU per sample read (one read call and its
    # handling by the reader), on the host's cores even with a DPU
    client_core_s_per_file: float  # client CPU per file opened (open, close, the reader's
    # setup of a new file), on the host's cores
    server_core_s_per_byte: float  # server CPU per byte served
    drive_read_efficiency: float  # sustained share of a drive's sequential read
    offload_client_core_s_per_byte: float | None = None  # the same with a DPU
    requests_in_flight: int | None = None  # a client's requests outstanding per server
    request_bytes: float | None = None  # bytes one such request carries (RPC size)
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Servers:
    count: int
    drives: int
    drive: StorageMedium
    cores: int
    ports: int
    port_link: Link
    rated_read_bytes_per_s: float | None = None


@dataclass(frozen=True)
class Clients:
    hosts: int
    cores: int
    dram_bytes: float
    nics: int = 0
    nic_link: Link | None = None
    drives: int = 0
    drive: StorageMedium | None = None
    offload: str | None = None
    requests_in_flight: int | None = None  # a mount option overriding the class's


@dataclass(frozen=True)
class StorageSystem:
    """One storage system and the clients that read it; `servers` is None for class local."""

    name: str
    description: str
    fs: FsClass
    clients: Clients
    servers: Servers | None = None
    fabric_bisection_bytes_per_s: float | None = None
    submitter: str | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def with_clients(self, hosts: int) -> StorageSystem:
        """The same system read by `hosts` client hosts of the same make."""
        return replace(self, clients=replace(self.clients, hosts=hosts))


_SERVER_FIELDS = (count("count"), count("drives"), text("drive"), count("cores"), count("ports"),
                  text("port_link"),
                  positive("rated_read_gb_s", GB, "rated_read_bytes_per_s", required=False,
                           span=BANDWIDTH))
_CLIENT_FIELDS = (count("hosts"), count("cores"),
                  positive("dram_gb", GB, "dram_bytes", span=BYTES),
                  count("nics", required=False), text("nic_link", required=False),
                  count("drives", required=False), text("drive", required=False),
                  text("offload", choices=OFFLOADS, required=False),
                  count("requests_in_flight", required=False))
FIELDS = (
    text("description"),
    text("fs_class", choices=FS_CLASSES),
    text("submitter", required=False),
    Field("servers", dict, required=False, sub=_SERVER_FIELDS),
    Field("clients", dict, sub=_CLIENT_FIELDS),
    Field("fabric", dict, required=False,
          sub=(positive("bisection_gb_s", GB, "bisection_bytes_per_s", span=BANDWIDTH),)),
)


def load_fs_class(name_or_path: str | Path) -> FsClass:
    """A file-system class by name (`available_fs_classes()`) or a TOML path."""
    path = find_profile(name_or_path, "fs_classes/*.toml", "file-system class")
    values, sources = parse_profile(read_toml(path), FS_FIELDS, str(path))
    return FsClass(name=path.stem, sources=sources, **values)


def _part(loader: Any, name: str, source: str, where: str) -> Any:
    """A named drive or link profile; a missing one is an error of this file's field."""
    try:
        return loader(name)
    except AccelsimError as err:
        raise ConfigError(source, where, name, f"cannot be loaded ({err})") from err


def _needs(values: dict[str, Any], keys: tuple[str, ...], source: str, table: str,
           why: str) -> None:
    for key in keys:
        if values.get(key) is None:
            raise ConfigError(source, f"{table}.{key}", None, f"missing: {why}")


def load_storage_system(name_or_path: str | Path) -> StorageSystem:
    """A storage system by name (`available_storage_systems()`) or a TOML path, its drives,
    links and class loaded and checked."""
    path = find_profile(name_or_path, "storage_systems/*.toml", "storage system")
    src = str(path)
    values, sources = parse_profile(read_toml(path), FIELDS, src)
    fs = _part(load_fs_class, values["fs_class"], src, "fs_class")
    c = values["clients"]
    local = fs.name == "local"
    if local:
        if values["servers"] is not None:
            raise ConfigError(src, "servers", "table",
                              "class 'local' has no storage servers: drop [servers]")
        _needs(c, ("drives", "drive"), src, "clients", "class 'local' reads drives in the host")
        for key in ("nics", "nic_link", "offload", "requests_in_flight"):
            if c.get(key) is not None:
                raise ConfigError(src, f"clients.{key}", c[key],
                                  "class 'local' reads no network: drop it")
    else:
        if values["servers"] is None:
            raise ConfigError(src, "servers", None,
                              f"missing: class '{fs.name}' is served by storage servers")
        _needs(c, ("nics", "nic_link"), src, "clients", "clients reach the servers over NICs")
        for key in ("drives", "drive"):
            if c.get(key) is not None:
                raise ConfigError(src, f"clients.{key}", c[key],
                                  "local drives belong to class 'local' only")
        if c.get("requests_in_flight") is not None and fs.requests_in_flight is None:
            raise ConfigError(src, "clients.requests_in_flight", c["requests_in_flight"],
                              f"class '{fs.name}' bounds no requests in flight")
        if c.get("offload") is not None and fs.offload_client_core_s_per_byte is None:
            raise ConfigError(src, "clients.offload", c["offload"],
                              f"class '{fs.name}' gives no offload_client_core_us_per_mb")
    clients = Clients(
        hosts=c["hosts"], cores=c["cores"], dram_bytes=c["dram_bytes"], nics=c["nics"] or 0,
        nic_link=None if local else _part(load_link, c["nic_link"], src, "clients.nic_link"),
        drives=c["drives"] or 0,
        drive=_part(load_storage, c["drive"], src, "clients.drive") if local else None,
        offload=c["offload"], requests_in_flight=c["requests_in_flight"])
    servers = None
    if values["servers"] is not None:
        s = values["servers"]
        servers = Servers(
            count=s["count"], drives=s["drives"],
            drive=_part(load_storage, s["drive"], src, "servers.drive"), cores=s["cores"],
            ports=s["ports"], port_link=_part(load_link, s["port_link"], src, "servers.port_link"),
            rated_read_bytes_per_s=s["rated_read_bytes_per_s"])
    fabric = values["fabric"]
    return StorageSystem(
        name=path.stem, description=values["description"], fs=fs, clients=clients,
        servers=servers, submitter=values["submitter"], sources=sources,
        fabric_bisection_bytes_per_s=None if fabric is None else fabric["bisection_bytes_per_s"])


def available_storage_systems() -> list[str]:
    return sorted(builtin_files("hw_profiles", "storage_systems/*.toml"))


def available_fs_classes() -> list[str]:
    return sorted(builtin_files("hw_profiles", "fs_classes/*.toml"))
