"""The parts of a storage system that a read crosses, each as a capacity in bytes/s.

A read from client host h crosses that host's parts (its NICs, its cores; for class local its
own drives) and the parts every host shares (the servers' ports, cores and drives, a vendor's
rated controller limit, the fabric). The closed forms here bound the throughput; the SimPy
model (`accelsim.sim.storage_system.fluid`) shares the same capacities among concurrent reads.

    p = parts_of(load_storage_system("Micron_9550_Gen5_Performance_NVMe"), request_bytes=1e6)
    p.host_bytes_per_s, p.shared_bytes_per_s, p.limit(hosts=1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.profiles.storage import StorageMedium
from accelsim.profiles.storage_systems import StorageSystem

IOPS_REQUEST_BYTES = 4096  # the IOPS figure of a drive's datasheet is for 4 KiB reads


@dataclass(frozen=True)
class Parts:
    """Capacities (bytes/s) of one client host's parts and of the shared parts, by name."""

    host_bytes_per_s: dict[str, float]
    shared_bytes_per_s: dict[str, float]
    request_latency_s: float  # one file request's fixed cost: the class's round trip + drive's

    @property
    def host_cap_bytes_per_s(self) -> float:
        return min(self.host_bytes_per_s.values(), default=math.inf)

    @property
    def shared_cap_bytes_per_s(self) -> float:
        return min(self.shared_bytes_per_s.values(), default=math.inf)

    def limit(self, hosts: int) -> tuple[float, str]:
        """(the most bytes/s `hosts` reading hosts draw together, the part that sets it)."""
        host_name = min(self.host_bytes_per_s, key=self.host_bytes_per_s.__getitem__)
        host_total = hosts * self.host_cap_bytes_per_s
        if not self.shared_bytes_per_s or host_total <= self.shared_cap_bytes_per_s:
            return host_total, host_name
        name = min(self.shared_bytes_per_s, key=self.shared_bytes_per_s.__getitem__)
        return self.shared_cap_bytes_per_s, name


def drive_bytes_per_s(drive: StorageMedium, efficiency: float, request_bytes: float) -> float:
    """One drive's sustained read: its sequential read at the class's efficiency, or its IOPS
    at this request size, whichever is less."""
    # NB: IOPS are published for 4 KiB reads; a larger request is taken to cost one IO per
    # 4 KiB only up to the bandwidth bound (the drive is bandwidth-bound above ~16 KiB).
    iops_bound = drive.random_read_4k_iops * max(request_bytes, IOPS_REQUEST_BYTES)
    return min(drive.read_bandwidth_bytes_per_s * efficiency, iops_bound)


def parts_of(system: StorageSystem, request_bytes: float, sample_bytes: float,
             file_bytes: float) -> Parts:
    """The capacities of `system`'s parts for reads of `request_bytes` each, of samples of
    `sample_bytes` in files of `file_bytes` each."""
    fs, c, s = system.fs, system.clients, system.servers
    per_byte_s = (fs.offload_client_core_s_per_byte if c.offload == "dpu"
                  else fs.client_core_s_per_byte)
    # NB: every sample is one read call the client handles (DLIO reads sample by sample).
    core_s = ((per_byte_s or 0.0) + fs.client_core_s_per_sample / sample_bytes
              + fs.client_core_s_per_file / file_bytes)
    host: dict[str, float] = {}
    if core_s:
        host["client CPU"] = c.cores / core_s
    shared: dict[str, float] = {}
    if s is None:
        assert c.drive is not None
        drive = c.drive
        host["local drives"] = c.drives * drive_bytes_per_s(drive, fs.drive_read_efficiency,
                                                            request_bytes)
    else:
        assert c.nic_link is not None
        drive = s.drive
        host["client NICs"] = c.nics * c.nic_link.bandwidth_bytes_per_s * fs.protocol_efficiency
        in_flight = c.requests_in_flight or fs.requests_in_flight
        if in_flight and fs.request_bytes:
            # Little's law: the requests a client keeps outstanding to each server, each
            # carrying one RPC's bytes over its round trip and its time on the client's NICs.
            # NB: one target per server (Lustre keeps the limit per OST; their count per
            # server is not in the systems' descriptions).
            rpc_s = fs.request_latency_s + fs.request_bytes / host["client NICs"]
            host["client requests"] = in_flight * s.count * fs.request_bytes / rpc_s
        shared["server ports"] = (s.count * s.ports * s.port_link.bandwidth_bytes_per_s
                                  * fs.protocol_efficiency)
        if fs.server_core_s_per_byte:
            shared["server CPU"] = s.count * s.cores / fs.server_core_s_per_byte
        shared["server drives"] = s.count * s.drives * drive_bytes_per_s(
            drive, fs.drive_read_efficiency, request_bytes)
        if s.rated_read_bytes_per_s is not None:
            shared["server rating"] = s.count * s.rated_read_bytes_per_s
        if system.fabric_bisection_bytes_per_s is not None:
            shared["fabric"] = system.fabric_bisection_bytes_per_s
    return Parts(host, shared, fs.request_latency_s + drive.request_latency_s)
