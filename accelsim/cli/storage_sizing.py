"""`accelsim simulate WORKLOAD --hw SYSTEM --emulate-accelerators a100 [--max-accelerators]`:
storage sized as MLPerf Storage v1.0 does (`accelsim.sim.mlperf_storage`).

    run_sizing("unet3d-train", "dgx-a100", "a100", True, {"storage_count": 4}, as_json=False)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from accelsim.cli.common import echo_json
from accelsim.errors import AccelsimError
from accelsim.profiles.emulation import WORKLOADS, load_emulation
from accelsim.sim.knobs import KNOBS, check_range
from accelsim.sim.mlperf_storage import emulate, max_accelerators

# Knobs that mean something to an emulated run (the rest size a model, which DLIO runs none of).
_KNOBS = ("storage", "storage_count", "devices", "steps", "seed", "prefetch")


def _workload(name: str) -> str:
    if name in WORKLOADS:
        return name
    from accelsim.workload.scenario import resolve_workload

    model = resolve_workload(name).model
    if model not in WORKLOADS:
        raise AccelsimError(f"--emulate-accelerators: MLPerf Storage emulates "
                            f"{', '.join(WORKLOADS)}; '{name}' trains '{model}'")
    return model


def _system(hardware: str, knobs: dict[str, Any]) -> Any:
    from accelsim.profiles.hardware import resolve_hardware
    from accelsim.profiles.storage import load_storage

    system = resolve_hardware(hardware)[0]
    if "storage" in knobs:
        medium = load_storage(knobs["storage"])
        if medium.over_network and system.network is None:
            raise AccelsimError(f"storage '{medium.name}' is reached over the network and "
                                f"system '{system.name}' has none")
        system = replace(system, storage=medium)
    if "storage_count" in knobs:
        system = replace(system, storage_count=knobs["storage_count"])
    return system


def check_knobs(knobs: dict[str, Any], allowed: tuple[str, ...], what: str) -> None:
    """Only the knobs in `allowed` mean something to an emulated run, each in its range."""
    extra = sorted(set(knobs) - set(allowed))
    if extra:
        raise AccelsimError(f"{what} takes only --{', --'.join(allowed)}; "
                            f"drop {', '.join(extra)}")
    for name, value in knobs.items():
        if not isinstance(value, str):
            check_range(name, value, KNOBS[name].low, KNOBS[name].high)


def run_sizing(workload: str, hardware: str, accelerator: str | None, search: bool,
               knobs: dict[str, Any], as_json: bool) -> None:
    """Print the emulated run (at --devices, default the system's count) or, with `search`,
    the most emulated accelerators the storage keeps at the AU threshold."""
    if accelerator is None:
        raise AccelsimError("--max-accelerators needs --emulate-accelerators ACCELERATOR "
                            "(a100 or h100)")
    check_knobs(knobs, _KNOBS, "--emulate-accelerators")
    wl, system = _workload(workload), _system(hardware, knobs)
    run_kw = {k: knobs[k] for k in ("steps", "seed", "prefetch") if k in knobs}
    if search:
        if "devices" in knobs:
            raise AccelsimError("--max-accelerators finds the count: drop --devices")
        rec = max_accelerators(wl, system, accelerator, **run_kw)
    else:
        emu = load_emulation(accelerator, wl)
        rec = emulate(emu, system, knobs.get("devices", system.device_count), **run_kw)
        rec["meets_au_target"] = rec["accelerator_utilization"] >= emu.au_target
        rec.update(workload=wl, system=system.name, emulated_accelerator=accelerator,
                   au_target=emu.au_target)
    if as_json:
        echo_json(rec)
        return
    click.echo("\n".join(_lines(rec, search)))


def _lines(r: dict[str, Any], search: bool) -> list[str]:
    head = (f"{r['workload']} on {r['system']}, emulated {r['emulated_accelerator']} "
            f"(MLPerf Storage v1.0, AU >= {r['au_target']:.0%})")
    if not search:
        return [head, f"  accelerators {r['devices']}: AU {r['accelerator_utilization']:.1%} "
                f"({'meets' if r['meets_au_target'] else 'misses'} the target), "
                f"{r['samples_per_s']:,.1f} samples/s, storage delivers "
                f"{r['storage_throughput_bytes_per_s'] / 1e9:.2f} GB/s"]
    nxt = r["next_accelerator_utilization"]
    lines = [
        head,
        f"  storage          {r['storage_count']} x {r['storage']}, "
        f"{r['storage_read_bandwidth_gb_s']:.2f} GB/s read",
        f"  max accelerators {r['max_accelerators']}"
        + (f" (AU {r['accelerator_utilization']:.1%}" if r["accelerator_utilization"] is not None
           else " (") + ("" if nxt is None else
                         f"{'; ' if r['max_accelerators'] else ''}one more runs at {nxt:.1%}")
        + ")",
        f"  storage needed   {r['storage_throughput_needed_gb_s']:.2f} GB/s at the threshold "
        f"({r['demand_per_accelerator_gb_s']:.3f} GB/s per accelerator computing all the "
        "time)" + ("" if r["simulated_storage_throughput_gb_s"] is None else
                   f"; simulated {r['simulated_storage_throughput_gb_s']:.2f} GB/s delivered"),
        f"  closed form      storage bandwidth / (AU target x demand) = "
        f"{r['closed_form_accelerators']:.2f} accelerators",
    ]
    return lines + [f"  note             {n}" for n in r["notes"]]
