"""A storage system as one training node sees it: the node's share, as a storage medium the
training pipeline (`accelsim.sim.train`) reads.

The node is one of `clients` identical hosts reading the system: its own parts (its requests
in flight; its drives for class local) and 1 / clients of the shared parts (the servers'
ports, cores, drives, rating, the fabric). Its NICs stay the node's own (`System.network`),
which the pipeline already shares with the all-reduce, and its cores are the pipeline's prep
workers, so the medium leaves both out.

    medium, note = node_medium(load_storage_system("Cray_C500_4xHDR200_1host"),
                               load_system("dgx-a100"), clients=8, dataset=ds)

NB: "one node times `clients`": the other clients read alike (issue: a slow or busy client is
not simulated here; `accelsim.sim.storage_system.dlio` simulates every host).
"""

from __future__ import annotations

from dataclasses import replace

from accelsim.errors import AccelsimError
from accelsim.profiles.datasets import Dataset
from accelsim.profiles.storage import StorageMedium
from accelsim.profiles.storage_systems import StorageSystem
from accelsim.profiles.systems import System
from accelsim.sim.storage_system.parts import parts_of


def clients_like(storage: StorageSystem, node: System, hosts: int) -> StorageSystem:
    """`storage` read (or written) by `hosts` nodes like `node`: their cores and DRAM, and for
    a system reached over the network their NICs."""
    c = storage.clients
    if storage.servers is not None:
        if node.network is None:
            raise AccelsimError(f"storage system '{storage.name}' is reached over the "
                                f"network and system '{node.name}' has none")
        c = replace(c, nics=node.nic_count, nic_link=node.network)
    return replace(storage, clients=replace(c, hosts=hosts, cores=node.host.cores,
                                            dram_bytes=node.host.dram_bytes))


def node_medium(storage: StorageSystem, node: System, clients: int,
                dataset: Dataset) -> tuple[StorageMedium, str]:
    """(the medium one of `clients` nodes like `node` reads, a note saying what bounds it)."""
    if clients < 1:
        raise AccelsimError(f"--clients {clients}: needs 1 or more")
    c = storage.clients
    system = clients_like(storage, node, clients)
    sample_bytes = dataset.stored_bytes_per_sample
    parts = parts_of(system, min(dataset.file_size_mean_bytes, 4.0 * 2**20), sample_bytes,
                     dataset.file_size_mean_bytes)
    # NB: the client CPU costs were fitted on DLIO's readers; the training pipeline costs its
    # own loader on the host's cores (prep workers), so the share leaves them out too.
    own = {k: v for k, v in parts.host_bytes_per_s.items()
           if k not in ("client NICs", "client CPU")}
    shares = {**own, **{f"{k} / {clients}": v / clients
                        for k, v in parts.shared_bytes_per_s.items()}}
    name = min(shares, key=shares.__getitem__)
    bw = shares[name]
    drive = storage.servers.drive if storage.servers is not None else c.drive
    assert drive is not None
    drives = (storage.servers.count * storage.servers.drives / clients
              if storage.servers is not None else c.drives)
    medium = StorageMedium(
        name=f"{storage.name} (1 of {clients} clients)",
        kind="nvme" if storage.servers is None else "nas",
        description=f"{storage.description}: one client's share",
        read_bandwidth_bytes_per_s=bw,
        random_read_4k_iops=max(drive.random_read_4k_iops * drives, 1.0),
        request_latency_s=parts.request_latency_s,
        max_concurrency=max(int(drive.max_concurrency * drives), 1),
        active_power_w=None, idle_power_w=None, share_of_clients=clients)
    note = (f"storage system {storage.name} ({storage.fs.name}) read by {clients} client "
            f"node(s) like this one: this node's share {bw / 1e9:.2f} GB/s, set by {name}; "
            "the other clients are taken to read alike")
    return medium, note
