"""The smallest storage system of a family that keeps N emulated accelerators at the AU
threshold, and what limits the next step up.

A family is a storage system file scaled by one part count: storage servers (each with its
drives, cores and ports), or for class local the drives in each host. The search: the closed
form (`sizing.closed_form`) finds the smallest count whose capacity carries N accelerators,
then the DLIO simulation checks it (and steps up until it passes, or down while the one
below passes too). If the servers cannot help (the client hosts bound the count), the answer
says so and names the client part instead.

    rec = size_storage(load_emulation("h100", "unet3d"),
                       load_storage_system("Cray_ClusterStor_E1000_6xSlingShot200_5hosts"), 64)
    rec["servers"], rec["limit_next_step"]
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.physical import MAX_DEVICES
from accelsim.profiles.emulation import Emulation
from accelsim.profiles.storage_systems import StorageSystem
from accelsim.sim.storage_system.dlio import emulate_system
from accelsim.sim.storage_system.sizing import closed_form

MAX_UNITS = 4096  # servers (or local drives per host) the search goes up to


def scaled(system: StorageSystem, units: int) -> StorageSystem:
    """`system` with `units` storage servers (class local: `units` drives per host)."""
    if system.servers is None:
        return replace(system, clients=replace(system.clients, drives=units))
    return replace(system, servers=replace(system.servers, count=units))


def units_of(system: StorageSystem) -> int:
    return system.clients.drives if system.servers is None else system.servers.count


def _fits(emu: Emulation, system: StorageSystem, accelerators: int) -> bool:
    return closed_form(emu, system)["accelerators"] >= accelerators


def size_storage(emu: Emulation, family: StorageSystem, accelerators: int,
                 simulate: bool = True, seed: int = 0) -> dict[str, Any]:
    """The fewest units of `family` that keep `accelerators` emulated accelerators at AU >=
    au_target (closed form, then simulated), and the limit one unit up. JSON-ready."""
    if not 1 <= accelerators <= MAX_DEVICES:
        raise AccelsimError(f"--accelerators {accelerators}: between 1 and {MAX_DEVICES}")
    unit = "servers" if family.servers is not None else "local drives per host"
    top = scaled(family, MAX_UNITS)
    ceiling = closed_form(emu, top)
    if ceiling["accelerators"] < accelerators:
        return _no_size(emu, family, accelerators, unit, ceiling)
    lo, hi = 0, MAX_UNITS  # fits(hi), not fits(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _fits(emu, scaled(family, mid), accelerators) else (mid, hi)
    units, runs = hi, {}
    if simulate:
        def passes(n_units: int) -> bool:
            if n_units not in runs:
                runs[n_units] = emulate_system(emu, scaled(family, n_units), accelerators,
                                               seed=seed)
            return runs[n_units]["accelerator_utilization"] >= emu.au_target
        while not passes(units) and units < MAX_UNITS:
            units = min(units * 2, MAX_UNITS) if units > 8 else units + 1
        while units > 1 and passes(units - 1):
            units -= 1
    best = scaled(family, units)
    cf, up = closed_form(emu, best), closed_form(emu, scaled(family, units + 1))
    run = runs.get(units)
    return {
        "workload": emu.workload, "emulated_accelerator": emu.accelerator,
        "accelerators": accelerators, "au_target": emu.au_target,
        "family": family.name, "fs_class": family.fs.name, "unit": unit,
        "client_hosts": family.clients.hosts, "units": units,
        "drives_total": (units * best.servers.drives if best.servers is not None
                         else units * best.clients.hosts),
        "accelerators_at_size": cf["accelerators"],
        "accelerators_one_unit_up": up["accelerators"],
        "limit_at_size": cf["limit"], "limit_next_step": up["limit"],
        "next_step_is_client_bound": up["limit"].startswith("client"),
        "accelerator_utilization": run["accelerator_utilization"] if run else None,
        "storage_throughput_gb_s": (run["storage_throughput_bytes_per_s"] / 1e9
                                    if run else None),
        "parts": run["parts"] if run else [],
        "simulated_units": sorted(runs),
    }


def _no_size(emu: Emulation, family: StorageSystem, accelerators: int, unit: str,
             ceiling: dict[str, Any]) -> dict[str, Any]:
    """No count of units carries `accelerators`: the client side bounds them."""
    return {
        "workload": emu.workload, "emulated_accelerator": emu.accelerator,
        "accelerators": accelerators, "au_target": emu.au_target,
        "family": family.name, "fs_class": family.fs.name, "unit": unit,
        "client_hosts": family.clients.hosts, "units": None, "drives_total": None,
        "accelerators_at_size": ceiling["accelerators"], "accelerators_one_unit_up": None,
        "limit_at_size": ceiling["limit"], "limit_next_step": ceiling["limit"],
        "next_step_is_client_bound": True, "accelerator_utilization": None,
        "storage_throughput_gb_s": None, "parts": [], "simulated_units": [],
    }
