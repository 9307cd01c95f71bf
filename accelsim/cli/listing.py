"""`accelsim list`: the built-in hardware, scenarios and models."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json


def profile_row(p: Any) -> dict[str, Any]:
    """Key figures of a device profile."""
    peaks = p.compute.matrix_peak_flops_per_s or p.compute.vector_peak_flops_per_s
    best = max(peaks.items(), key=lambda kv: kv[1]) if peaks else None
    mem = p.offchip_memory
    return {
        "name": p.name, "class": p.device_class, "display_name": p.display_name,
        "peak_tflops": round(best[1] / 1e12, 1) if best else None,
        "peak_precision": best[0] if best else None,
        "memory_gb": round(mem.capacity_bytes / 1e9, 1) if mem and mem.capacity_bytes else None,
        "memory_bandwidth_gb_s": round(mem.bandwidth_bytes_per_s / 1e9, 1) if mem else None,
        "tdp_w": p.power.tdp_w,
    }


def system_row(s: Any) -> dict[str, Any]:
    """Key figures of a system profile."""
    return {"name": s.name, "device": s.device, "devices": s.device_count,
            "host_link": s.host_to_device.name,
            "device_link": s.device_to_device.name if s.device_to_device else None,
            "storage": f"{s.storage_count}x {s.storage.name}",
            "dataset": s.default_dataset.name, "gpudirect_storage": s.gpudirect_storage}


def stack_row(s: Any) -> dict[str, Any]:
    """Key figures of a software stack (host times on its reference host)."""
    return {"name": s.name, "classes": ",".join(s.classes),
            "default_for": ",".join(s.default_for), "aliases": ",".join(s.aliases),
            "host_us_per_kernel": ",".join(f"{c} {t * 1e6:g}" for c, t in s.per_kernel_s.items()),
            "host_us_per_step": (s.per_step_s + s.per_request_s) * 1e6,
            "fuses": ",".join(s.fuses), "description": s.description}


def storage_system_row(s: Any) -> dict[str, Any]:
    """Key figures of a storage system described from its parts."""
    srv, c = s.servers, s.clients
    return {"name": s.name, "class": s.fs.name,
            "servers": srv.count if srv else 0,
            "drives": (f"{srv.count * srv.drives}x {srv.drive.name}" if srv
                       else f"{c.drives}x {c.drive.name} per host"),
            "ports": f"{srv.count * srv.ports}x {srv.port_link.name}" if srv else "",
            "clients": c.hosts,
            "client_nics": f"{c.nics}x {c.nic_link.name}" if c.nic_link else ""}


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_cmd(as_json: bool) -> None:
    """Built-in device profiles, systems, software stacks, storage systems, scenarios, zoo
    models and decoder configs."""
    from accelsim.profiles.devices import list_profiles
    from accelsim.profiles.fabrics import available_fabrics
    from accelsim.profiles.software import builtin_stacks
    from accelsim.profiles.storage_systems import available_storage_systems, load_storage_system
    from accelsim.profiles.systems import available_systems, load_system
    from accelsim.workload.llm_configs import config_files
    from accelsim.workload.scenario import scenario_names
    from accelsim.workload.zoo import model_names

    profiles = [profile_row(p) for p in list_profiles()]
    systems = [system_row(load_system(n)) for n in available_systems()]
    stacks = [stack_row(s) for s in builtin_stacks().values()]
    storage = [storage_system_row(load_storage_system(n)) for n in available_storage_systems()]
    decoders = sorted(config_files())
    if as_json:
        echo_json({"profiles": profiles, "systems": systems, "software": stacks,
                   "storage_systems": storage,
                   "workloads": scenario_names() + model_names(),
                   "scenarios": scenario_names(), "models": model_names(),
                   "decoders": decoders, "fabrics": available_fabrics()})
        return
    import pandas as pd  # the tables: only for the text output

    from accelsim.results.textfit import frame_table, wrap_lines

    def blanks(rows: list[dict[str, Any]]) -> str:
        """The table within the terminal's 100 columns, missing figures blank."""
        return "\n".join(frame_table(pd.DataFrame(rows)))

    click.echo(blanks(profiles))
    click.echo("\n" + blanks(systems))
    click.echo("\n" + "\n".join(frame_table(pd.DataFrame(stacks).drop(columns="description"))))
    click.echo("\n" + blanks(storage))
    click.echo("\n" + "\n".join(wrap_lines([
        f"scenarios: {', '.join(scenario_names())}", f"models: {', '.join(model_names())}",
        "decoders (workloads/llm/*.json, token-level; or any config.json path): "
        + ", ".join(decoders),
        f"fabrics (every-node cluster runs, --fabric): {', '.join(available_fabrics())}"])))
