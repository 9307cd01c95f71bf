"""`accelsim collective`: an nccl-tests-style table of one collective on a system's
device-to-device fabric, per message size: time, algorithm bandwidth and bus bandwidth, from
the same model the training pipeline uses (`accelsim.interconnect.nccl`).

    accelsim collective --hw dgx-h100 --op allreduce --sizes 8B:8GB --algorithm auto --json
    accelsim collective --hw dgx-a100 --nodes 4     # hierarchical, over the nodes' NIC rails

Across nodes (`accelsim.interconnect.multinode`): in-node reduce-scatter, cross-node
all-reduce of the shard (ring or tree), in-node all-gather.
"""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json
from accelsim.interconnect.collectives import ALL_ALGORITHMS, OPS
from accelsim.interconnect.multinode import cluster_record
from accelsim.interconnect.nccl import AUTO, parse_sizes
from accelsim.physical import MAX_NODES
from accelsim.profiles.hardware import resolve_hardware


def render_collective(r: dict[str, Any]) -> str:
    """nccl-tests-like text: a header, then one line per size (time in us, GB/s)."""
    over = f" over {r['link']} +" if r["link"] is not None else ","
    where = (f"{r['nodes']} nodes x {r['devices_per_node']} x {r['device']}{over} "
             f"{r['rails']} x {r['network']}" if r["nodes"] > 1
             else f"{r['devices']} x {r['device']} over {r['link']} ({r['link_kind']})")
    lines = [
        f"# {r['op']} on {r['system']}: {where}, algorithm {r['algorithm']}",
        *([f"# achievable {r['achievable_bandwidth_gb_s']:.1f} of "
           f"{r['link_bandwidth_gb_s']:.1f} GB/s per device per direction: "
           f"{r['achievable_basis']}",
           f"# latency {r['latency_s'] * 1e6:g} us per step "
           f"({r['latency_source'] or 'no source'})"] if r["link"] is not None
          else ["# one device per node: no in-node phase"]),
        *([f"# network: {r['network_basis']}; {r['network_latency_s'] * 1e6:g} us per step"]
          if r["nodes"] > 1 else []),
        "#",
        f"# {'size (B)':>14} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}  "
        "algorithm",
    ]
    for row in r["rows"]:
        lines.append(f"  {row['size_bytes']:>14} {row['time_s'] * 1e6:>12.2f} "
                     f"{row['algorithm_bandwidth_gb_s']:>13.2f} "
                     f"{row['bus_bandwidth_gb_s']:>13.2f}  {row['algorithm']}")
    return "\n".join(lines)


@cli.command()
@click.option("--hw", "hardware", required=True,
              help="A system with several accelerators (e.g. dgx-a100), or a .toml path.")
@click.option("--op", type=click.Choice(OPS), default="allreduce", show_default=True,
              help="The collective.")
@click.option("--sizes", default="8B:8GB", show_default=True,
              help="Message sizes: FIRST:LAST in powers of two, or one SIZE (K, M, G = 1024^n; "
                   "all-gather, reduce-scatter and all-to-all: the whole buffer, as nccl-tests).")
@click.option("--algorithm", type=click.Choice([*ALL_ALGORITHMS, AUTO]), default=AUTO,
              show_default=True, help="ring, tree or nvls (all-reduce), ring (all-gather, "
              "reduce-scatter), p2p (all-to-all); auto takes the fastest.")
@click.option("--devices", type=click.IntRange(min=2), default=None,
              help="Accelerators taking part (default: all of the system's; per node with "
                   "--nodes).")
@click.option("--nodes", type=click.IntRange(min=1, max=MAX_NODES), default=1,
              show_default=True,
              help="Nodes joined by the system's NICs: hierarchical collective across them.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object; `rows` has one row per size.")
def collective(hardware: str, op: str, sizes: str, algorithm: str, devices: int | None,
               nodes: int, as_json: bool) -> None:
    """Time, algorithm bandwidth and bus bandwidth of a collective per message size."""
    system, _ = resolve_hardware(hardware)
    record = cluster_record(system, op, parse_sizes(sizes), algorithm, devices, nodes)
    if as_json:
        echo_json(record)
        return
    click.echo(render_collective(record))
