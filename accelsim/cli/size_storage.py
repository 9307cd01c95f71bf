"""`accelsim size-storage WORKLOAD --accelerators N --emulate-accelerators A --family SYSTEM
[--clients H]`: the smallest storage system of a family that keeps N emulated accelerators
at MLPerf Storage's AU threshold (`accelsim.sim.storage_system.size`)."""

from __future__ import annotations

import click

from accelsim.cli.common import cli, echo_json


@cli.command("size-storage")
@click.argument("workload")
@click.option("--accelerators", "accelerators", type=int, required=True, metavar="N",
              help="Emulated accelerators the storage must keep at the AU threshold.")
@click.option("--emulate-accelerators", "emulated", required=True, metavar="ACCELERATOR",
              help="The accelerator DLIO emulates (a100, h100).")
@click.option("--family", "family", required=True, metavar="NAME|FILE",
              help="A storage system (hw_profiles/storage_systems/) scaled by its server "
              "count (class local: by the drives in each host).")
@click.option("--clients", "clients", type=int, metavar="H",
              help="Client hosts reading it (default: the file's).")
@click.option("--closed-form", "closed", is_flag=True,
              help="Answer from the closed form alone (no simulation).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def size_storage(workload: str, accelerators: int, emulated: str, family: str,
                 clients: int | None, closed: bool, as_json: bool) -> None:
    """The fewest storage servers of a family that keep N emulated accelerators at MLPerf
    Storage's AU threshold, and what limits one server more."""
    from accelsim.cli.storage_sizing import _workload
    from accelsim.cli.storage_system import load_with_clients
    from accelsim.profiles.emulation import load_emulation
    from accelsim.sim.storage_system.size import size_storage as search

    system = load_with_clients(family, clients)
    emu = load_emulation(emulated, _workload(workload))
    rec = search(emu, system, accelerators, simulate=not closed)
    if as_json:
        echo_json(rec)
        return
    head = (f"{rec['workload']}: {accelerators} emulated {emulated} on the {family} family "
            f"({rec['fs_class']}, {rec['client_hosts']} client host(s)), AU >= "
            f"{rec['au_target']:.0%}")
    if rec["units"] is None:
        click.echo("\n".join([
            head,
            f"  no size fits: with any number of {rec['unit']}, the clients carry "
            f"{rec['accelerators_at_size']:,.1f} accelerators at most, limited by "
            f"{rec['limit_at_size']}: add client hosts (--clients) or faster ones"]))
        return
    lines = [head, f"  smallest size    {rec['units']} {rec['unit']} ({rec['drives_total']} "
             f"drives), carrying {rec['accelerators_at_size']:,.1f} accelerators by the "
             f"closed form, limited by {rec['limit_at_size']}"]
    if rec["accelerator_utilization"] is not None:
        lines.append(f"  simulated        AU {rec['accelerator_utilization']:.1%} at "
                     f"{accelerators} accelerators, "
                     f"{rec['storage_throughput_gb_s']:,.2f} GB/s from storage")
    nxt = (f"  one more         {rec['accelerators_one_unit_up']:,.1f} accelerators, limited "
           f"by {rec['limit_next_step']}")
    if rec["next_step_is_client_bound"]:
        nxt += ": the clients bound it, more servers would not help"
    lines.append(nxt)
    click.echo("\n".join(lines))
