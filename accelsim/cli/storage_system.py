"""MLPerf Storage on a storage system described from its parts:
`accelsim simulate unet3d --storage-system NAME|FILE --clients N --emulate-accelerators h100
[--max-accelerators | --devices N]` (`accelsim.sim.storage_system`).

    run_system_emulation("unet3d", "Micron_9550_Gen5_Performance_NVMe", None, "h100", True,
                         {}, as_json=False)
"""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import echo_json
from accelsim.errors import AccelsimError
from accelsim.physical import MAX_DEVICES
from accelsim.profiles.emulation import load_emulation
from accelsim.profiles.storage_systems import StorageSystem, load_storage_system

_KNOBS = ("devices", "steps", "seed")


def load_with_clients(name: str, clients: int | None) -> StorageSystem:
    """The named storage system, read by `clients` hosts if given."""
    system = load_storage_system(name)
    if clients is not None:
        if not 1 <= clients <= MAX_DEVICES:
            raise AccelsimError(f"--clients {clients}: between 1 and {MAX_DEVICES}")
        system = system.with_clients(clients)
    return system


def node_and_dataset(cfg: Any, what: str) -> tuple[Any, Any]:
    """(the system node, the dataset) a training run `cfg` reads; AccelsimError naming
    `what` needs a system where `--hw` names a device."""
    from accelsim.profiles.datasets import load_dataset
    from accelsim.profiles.hardware import resolve_hardware

    node = resolve_hardware(cfg.hardware)[0]
    if node is None:
        raise AccelsimError(f"{what} needs --hw SYSTEM (a whole node), not a device")
    ds = cfg.train.get("dataset") or cfg.scenario.dataset
    return node, (node.default_dataset if ds is None else
                  ds if not isinstance(ds, str) else load_dataset(ds))


def train_on_storage_system(cfg: Any, name: str, clients: int | None,
                            knobs: dict[str, Any]) -> tuple[Any, str]:
    """`cfg` (a training run) reading the storage system `name` as one of `clients` nodes
    (default: its --nodes) does: (the config with that medium, the note saying so)."""
    from dataclasses import replace

    from accelsim.sim.storage_system.medium import node_medium

    if (cfg.mode or cfg.scenario.mode) != "train":
        raise AccelsimError("--storage-system applies to training (or, with "
                            "--emulate-accelerators, to MLPerf Storage): this run is "
                            f"mode {cfg.mode or cfg.scenario.mode}")
    from accelsim.llm.run import routes_to_llm

    if routes_to_llm(cfg):  # a decoder's training step: the system holds its checkpoints
        if clients is not None:
            raise AccelsimError("a decoder's training nodes are the storage system's clients: "
                                "drop --clients (--nodes sets them)")
        if "checkpoint_every" not in knobs:
            raise AccelsimError("--storage-system with a decoder's training holds its "
                                "checkpoints: add --checkpoint-every STEPS")
        return replace(cfg, llm={**cfg.llm, "checkpoint_storage": name}), ""
    for knob in ("storage", "storage_count"):
        if knob in knobs:
            raise AccelsimError(f"--storage-system replaces the storage: drop "
                                f"--{knob.replace('_', '-')}")
    node, dataset = node_and_dataset(cfg, "--storage-system")
    nodes = int(knobs.get("nodes", 1))
    medium, note = node_medium(load_storage_system(name), node,
                               nodes if clients is None else clients, dataset)
    return replace(cfg, train={**cfg.train, "storage": medium, "storage_count": 1}), note


def run_system_emulation(workload: str, system_name: str, clients: int | None,
                         accelerator: str | None, search: bool, knobs: dict[str, Any],
                         as_json: bool) -> None:
    """Print one emulated run (at --devices, default one per client host) or, with `search`,
    the most emulated accelerators the system keeps at the AU threshold."""
    from accelsim.cli.storage_sizing import _workload, check_knobs
    from accelsim.sim.storage_system.dlio import emulate_system
    from accelsim.sim.storage_system.sizing import max_accelerators_system

    if accelerator is None:
        raise AccelsimError("--max-accelerators needs --emulate-accelerators ACCELERATOR "
                            "(a100 or h100)")
    check_knobs(knobs, _KNOBS, "--storage-system with --emulate-accelerators")
    system = load_with_clients(system_name, clients)
    emu = load_emulation(accelerator, _workload(workload))
    run_kw = {k: knobs[k] for k in ("steps", "seed") if k in knobs}
    if search:
        if "devices" in knobs:
            raise AccelsimError("--max-accelerators finds the count: drop --devices")
        rec = max_accelerators_system(emu, system, **run_kw)
    else:
        devices = knobs.get("devices", system.clients.hosts)
        rec = emulate_system(emu, system, devices, **run_kw)
        rec.update(workload=emu.workload, storage_system=system.name,
                   fs_class=system.fs.name, emulated_accelerator=accelerator,
                   au_target=emu.au_target,
                   meets_au_target=rec["accelerator_utilization"] >= emu.au_target)
    if as_json:
        echo_json(rec)
        return
    click.echo("\n".join(system_lines(rec, system, search)))


def _parts_lines(parts: list[dict[str, Any]]) -> list[str]:
    lines = [f"    {'part':<15} {'per':<7} {'capacity':>12} {'busy':>6}"]
    for p in parts:
        cap = f"{p['capacity_gb_s']:,.1f} GB/s"
        lines.append(f"    {p['part']:<15} {p['per']:<7} {cap:>12} {p['busy']:>6.0%}"
                     + ("  saturated" if p["saturated"] else ""))
    return lines


def _limit(parts: list[dict[str, Any]], au: float | None, target: float) -> str:
    """What bounds a run: its saturated parts; else, below the AU target, the reads' fixed
    costs; else nothing (the storage keeps up)."""
    sat = [p["part"] for p in parts if p["saturated"]]
    if sat:
        return ", ".join(sat) + " (saturated)"
    if not parts:
        return "none"
    busiest = f"busiest: {parts[0]['part']}, {parts[0]['busy']:.0%}"
    if au is not None and au < target:
        return (f"no part saturated ({busiest}): the requests' fixed cost and the readers' "
                "concurrency pace the reads")
    return f"nothing: the storage keeps up ({busiest})"


def system_lines(r: dict[str, Any], system: StorageSystem, search: bool) -> list[str]:
    """The terminal text of an emulated run or a sizing on a storage system."""
    s = system.servers
    made = (f"{s.count} server(s) x {s.drives} {s.drive.name}, {s.ports} x {s.port_link.name}"
            if s is not None else
            f"{system.clients.drives} local {system.clients.drive.name}"  # type: ignore[union-attr]
            " per host")
    head = [f"{r['workload']} on {system.name} ({system.fs.name}: {made}; "
            f"{system.clients.hosts} client host(s)), emulated {r['emulated_accelerator']} "
            f"(MLPerf Storage v1.0, AU >= {r['au_target']:.0%})"]
    if not search:
        return head + [
            f"  accelerators     {r['accelerators']}: AU {r['accelerator_utilization']:.1%} "
            f"({'meets' if r['meets_au_target'] else 'misses'} the target), "
            f"{r['storage_throughput_bytes_per_s'] / 1e9:,.2f} GB/s from storage",
            "  limited by       "
            f"{_limit(r['parts'], r['accelerator_utilization'], r['au_target'])}",
            "  parts",
            *_parts_lines(r["parts"]),
        ]
    nxt = r["next_accelerator_utilization"]
    au = r["accelerator_utilization"]
    lines = head + [
        f"  max accelerators {r['max_accelerators']}"
        + (f" (AU {au:.1%})" if au is not None else "")
        + ("" if nxt is None else f"; one more runs at {nxt:.1%}"),
    ]
    if r["storage_throughput_gb_s"] is not None:
        lines.append(f"  throughput       {r['storage_throughput_gb_s']:,.2f} GB/s "
                     f"({r['demand_per_accelerator_gb_s']:.3f} GB/s per accelerator computing "
                     "all the time)")
    lines += [
        f"  next step limit  "
        f"{_limit(r['next_parts'], r['next_accelerator_utilization'], r['au_target'])}",
        f"  closed form      {r['closed_form_accelerators']:,.1f} accelerators, limited by "
        f"{r['closed_form_limit']}",
        "  parts at the next step" if r["next_parts"] else "  parts",
        *_parts_lines(r["next_parts"] or r["parts"]),
    ]
    return lines
