"""Checkpoints of a decoder's training (issue 21 item 5): every `every` steps each rank writes
its shard of the weights and optimizer state, to the nodes' own drives or to a shared storage
system (`accelsim.profiles.storage_systems`) read and written by the training nodes as its
clients; and the restore that reads it back.

    plan = checkpoint_plan({"checkpoint_every": 100, "checkpoint_mode": "async"}, params,
                           gpus, nodes, system)   # the nodes' own drives
    fig = checkpoint_figures(params, gpus, step_s, plan, system)

The write: the checkpoint's bytes over the least of the write path's capacities (client NICs,
client cores, server ports, server cores, server drives at their datasheet write rate, the
fabric), every rank at once (Megatron's distributed checkpoint and DLIO's checkpointing
workload write one file set per rank in parallel). Before it, each GPU copies its shard to
host memory over its host link.
- sync: training waits for the copy and the write (torch.save / the default save path).
- async: training waits for the copy only; the write overlaps the next `every` steps, and a
  checkpoint whose previous write has not finished waits for it (Megatron's async save,
  PyTorch DCP's async_save). The staged copy must fit in the nodes' DRAM.
The restore: the same bytes read over the read path (the storage system's read model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.llm.train import ADAM_BYTES
from accelsim.llm.train_comm import WEIGHT_BYTES
from accelsim.profiles.storage import StorageMedium
from accelsim.sim.storage_system.medium import clients_like

MODES = ("sync", "async")
# what a checkpoint holds per parameter: the 16-bit weights and the fp32 master copy, momentum
# and variance of mixed-precision Adam (gradients are not saved); MLPerf Storage's checkpointing
# workloads (mlcommons/storage configs/dlio/workload/llama3_*.yaml: model_datatype fp16,
# optimizer_datatype fp32) size theirs the same way, 14 bytes a parameter
CHECKPOINT_BYTES_PER_PARAM = WEIGHT_BYTES + ADAM_BYTES


@dataclass(frozen=True)
class TransferPath:
    """Capacities (bytes/s, all of the job's nodes together) of the parts a checkpoint's
    bytes cross one way, and where they go."""

    destination: str
    parts_bytes_per_s: dict[str, float]
    notes: tuple[str, ...] = ()

    @property
    def limit(self) -> tuple[str, float]:
        """(the part that bounds the transfer, its capacity in bytes/s)."""
        name = min(self.parts_bytes_per_s, key=self.parts_bytes_per_s.__getitem__)
        return name, self.parts_bytes_per_s[name]


def _write_bw(drive: StorageMedium, where: str) -> float:
    if drive.write_bandwidth_bytes_per_s is None:
        why = drive.sources.get("write_bandwidth_mb_s", "absent")
        raise AccelsimError(f"checkpoints write to {drive.name} ({where}), whose profile gives "
                            f"no write_bandwidth_mb_s (hw_profiles/storage/{drive.name}.toml: "
                            f"{why})")
    return drive.write_bandwidth_bytes_per_s


def write_path_local(system: Any, nodes: int) -> TransferPath:
    """Each node writes its shards to its own drives (the system file's [storage])."""
    per_node = system.storage_count * _write_bw(system.storage, f"system {system.name}")
    return TransferPath(f"{system.storage_count} x {system.storage.name} in each node",
                        {"local drives": nodes * per_node},
                        ("NB: the drives' sequential write rate, no file-system or RAID cost",))


def read_path_local(system: Any, nodes: int) -> TransferPath:
    """The restore from the nodes' own drives."""
    return TransferPath(f"{system.storage_count} x {system.storage.name} in each node",
                        {"local drives": nodes * system.storage_read_bandwidth_bytes_per_s})


def write_path_system(storage: Any, node: Any, nodes: int) -> TransferPath:
    """`nodes` training nodes like `node` writing through `storage`'s parts. NB: a written byte
    costs the cores what a read byte costs (the class's per-byte figures, fitted on DLIO's
    reads), and the drives run at their datasheet write rate with no data-protection cost
    (RAID or erasure-coding parity is not in the system files)."""
    storage = clients_like(storage, node, nodes)
    fs, c, s = storage.fs, storage.clients, storage.servers
    parts: dict[str, float] = {}
    per_byte_s = (fs.offload_client_core_s_per_byte if c.offload == "dpu"
                  else fs.client_core_s_per_byte)
    if per_byte_s:
        parts["client CPU"] = nodes * c.cores / per_byte_s
    if s is None:  # class local: the clients' own drives
        assert c.drive is not None
        parts["local drives"] = nodes * c.drives * _write_bw(c.drive, f"system {storage.name}")
    else:
        assert c.nic_link is not None
        parts["client NICs"] = (nodes * c.nics * c.nic_link.bandwidth_bytes_per_s
                                * fs.protocol_efficiency)
        parts["server ports"] = (s.count * s.ports * s.port_link.bandwidth_bytes_per_s
                                 * fs.protocol_efficiency)
        if fs.server_core_s_per_byte:
            parts["server CPU"] = s.count * s.cores / fs.server_core_s_per_byte
        parts["server drives"] = s.count * s.drives * _write_bw(s.drive,
                                                                f"system {storage.name}")
        if storage.fabric_bisection_bytes_per_s is not None:
            parts["fabric"] = storage.fabric_bisection_bytes_per_s
    note = ("NB: writes at the drives' datasheet write rate, no parity or replication cost; "
            "the class's per-byte core costs as for reads")
    return TransferPath(f"storage system {storage.name} ({fs.name}), {nodes} client node(s)",
                        parts, (note,))


def read_path_system(storage: Any, node: Any, nodes: int, shard_bytes: float
                     ) -> TransferPath:
    """The restore: the nodes read their shards through the storage system's read model
    (`accelsim.sim.storage_system.parts`), in requests of the class's RPC size (else 1 MiB)."""
    from accelsim.sim.storage_system.parts import parts_of

    storage = clients_like(storage, node, nodes)
    request = storage.fs.request_bytes or 2**20
    p = parts_of(storage, request, shard_bytes, shard_bytes)
    parts = {name: nodes * bw for name, bw in p.host_bytes_per_s.items()}
    parts.update(p.shared_bytes_per_s)
    return TransferPath(f"storage system {storage.name}", parts)


def checkpoint_figures(params: float, gpus: int, step_s: float, plan: Plan, system: Any
                       ) -> dict[str, Any]:
    """The checkpoint's size, write and restore times, the training time it costs per
    checkpoint (`stall_s`) and as a share of the run (`lost_fraction`)."""
    every, mode, write, read = plan.every, plan.mode, plan.write, plan.read
    size = params * CHECKPOINT_BYTES_PER_PARAM
    part, bw = write.limit
    write_s = size / bw
    # each GPU copies its shard to host memory over its own host link (achieved), all at once
    copy_s = size / gpus / system.host_to_device.achieved_bandwidth_bytes_per_s
    interval_s = every * step_s
    if mode == "async":
        # the write runs beside the next `every` steps; a longer one delays the next checkpoint
        stall_s = copy_s + max(0.0, write_s - interval_s)
    else:
        stall_s = max(copy_s, write_s)  # NB: the copy streams into the write
    read_part, read_bw = read.limit
    return {"bytes": size, "bytes_per_param": CHECKPOINT_BYTES_PER_PARAM, "every_steps": every,
            "mode": mode, "destination": write.destination, "write_s": write_s,
            "write_bytes_per_s": bw, "write_limited_by": part,
            "write_parts_bytes_per_s": dict(write.parts_bytes_per_s),
            "copy_to_host_s": copy_s, "stall_s": stall_s,
            "lost_fraction": stall_s / (interval_s + stall_s),
            "restore_s": size / read_bw, "restore_limited_by": read_part,
            "notes": list(write.notes)}


@dataclass(frozen=True)
class Plan:
    """A run's checkpoints as its knobs ask for them, checked before the step is costed."""

    every: int
    mode: str
    write: TransferPath
    read: TransferPath


def checkpoint_plan(llm: dict[str, Any], params: float, gpus: int, nodes: int,
                    system: Any) -> Plan | None:
    """The checkpoints the knobs ask for (`checkpoint_every`, `checkpoint_mode`,
    `checkpoint_storage`), their paths checked; None when the run takes none."""
    every = llm.get("checkpoint_every")
    if every is None:
        given = [k for k in ("checkpoint_mode", "checkpoint_storage") if k in llm]
        if given:
            verb = "describe" if len(given) > 1 else "describes"
            raise AccelsimError(f"{', '.join(given)} {verb} checkpoints: add "
                                "checkpoint_every (--checkpoint-every STEPS)")
        return None
    mode = llm.get("checkpoint_mode", "sync")
    if mode not in MODES:
        raise AccelsimError(f"knob 'checkpoint_mode' = {mode!r}: choose {' or '.join(MODES)}")
    size = params * CHECKPOINT_BYTES_PER_PARAM
    if mode == "async" and size / nodes > system.host.dram_bytes:
        raise AccelsimError(f"async checkpoints stage {size / nodes / 1e9:,.0f} GB a node in "
                            f"host memory; {system.name} has {system.host.dram_bytes / 1e9:,.0f} "
                            "GB: use checkpoint_mode sync or more nodes")
    name = llm.get("checkpoint_storage")
    if name is None:
        return Plan(every, mode, write_path_local(system, nodes), read_path_local(system, nodes))
    from accelsim.profiles.storage_systems import load_storage_system

    storage = load_storage_system(name)
    return Plan(every, mode, write_path_system(storage, system, nodes),
                read_path_system(storage, system, nodes, size / max(gpus, 1)))
