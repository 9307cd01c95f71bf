"""`accelsim collective`: an nccl-tests-style table of one collective on a system's
device-to-device fabric, per message size: time, algorithm bandwidth and bus bandwidth, from
the same model the training pipeline uses (`accelsim.interconnect.nccl`).

    accelsim collective --hw dgx-h100 --op allreduce --sizes 8B:8GB --algorithm auto --json
    accelsim collective --hw dgx-a100 --nodes 4     # hierarchical, over the nodes' NIC rails
    accelsim collective --hw dgx-h100 --nccl-tests -b 8 -e 128M -f 2 -g 8   # nccl-tests' table

Across nodes (`accelsim.interconnect.multinode`): in-node reduce-scatter, cross-node
all-reduce of the shard (ring or tree), in-node all-gather.
"""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json
from accelsim.errors import AccelsimError
from accelsim.interconnect.collectives import ALL_ALGORITHMS, OPS
from accelsim.interconnect.multinode import cluster_record
from accelsim.interconnect.nccl import AUTO, parse_size, parse_sizes
from accelsim.interconnect.nccl_tests import (
    DATATYPE_BYTES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MIN_BYTES,
    DEFAULT_STEP_BYTES,
    REDOPS,
    compare_measured,
    nccl_buffer,
    nccl_sizes,
    parse_nccl_tests,
    ranks_listed,
    render_comparison,
    render_nccl_tests,
)
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
    from accelsim.results.textfit import wrap_lines

    return "\n".join(wrap_lines(lines))


def _nccl_size(flag: str, text: str | None, default: int) -> int:
    return default if text is None else parse_size(text, text, flag)


@cli.command()
@click.option("--hw", "hardware", required=True,
              help="A system with several accelerators (e.g. dgx-a100), or a .toml path.")
@click.option("--op", type=click.Choice(OPS), default="allreduce", show_default=True,
              help="The collective.")
@click.option("--sizes", default=None,
              help="Message sizes: FIRST:LAST in powers of two, or one SIZE (K, M, G = 1024^n; "
                   "all-gather, reduce-scatter and all-to-all: the whole buffer, as nccl-tests). "
                   "[default: 8B:8GB]")
@click.option("--algorithm", type=click.Choice([*ALL_ALGORITHMS, AUTO]), default=AUTO,
              show_default=True, help="ring, tree or nvls (all-reduce), ring (all-gather, "
              "reduce-scatter), p2p (all-to-all); auto takes the fastest.")
@click.option("--devices", "-g", "--ngpus", "devices", type=click.IntRange(min=2), default=None,
              help="Accelerators taking part (default: all of the system's; per node with "
                   "--nodes). -g as nccl-tests.")
@click.option("--nodes", type=click.IntRange(min=1, max=MAX_NODES), default=1,
              show_default=True,
              help="Nodes joined by the system's NICs: hierarchical collective across them.")
@click.option("-b", "--minbytes", "min_bytes", default=None,
              help="nccl-tests' -b: the first size (default 32M, as nccl-tests; instead of "
                   "--sizes).")
@click.option("-e", "--maxbytes", "max_bytes", default=None,
              help="nccl-tests' -e: the last size (default 32M).")
@click.option("-f", "--stepfactor", "step_factor", type=click.IntRange(min=1), default=None,
              help="nccl-tests' -f: multiply the size by this factor per row.")
@click.option("-i", "--stepbytes", "step_bytes", default=None,
              help="nccl-tests' -i: add this many bytes per row (default 1M when no -f).")
@click.option("-d", "--datatype", type=click.Choice(list(DATATYPE_BYTES)), default="float",
              show_default=True,
              help="nccl-tests' -d: the element type (counts and the type column; the model "
                   "times bytes alone).")
@click.option("-o", "--redop", type=click.Choice(REDOPS), default="sum", show_default=True,
              help="nccl-tests' -o: the reduction (the redop column; the model times every "
                   "reduction alike).")
@click.option("--nccl-tests", "nccl_format", is_flag=True,
              help="Print nccl-tests' own table: size count type redop root time algbw busbw "
                   "#wrong, out-of-place and in-place, in B, elements, us and GB/s, and the "
                   "average bus bandwidth footer.")
@click.option("--measured", "measured_path", type=click.Path(exists=True, dir_okay=False),
              help="An nccl-tests output (e.g. all_reduce_perf's log): predict its sizes and "
                   "print predicted vs measured bus bandwidth, the median and worst error.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object; `rows` has one row per size.")
def collective(hardware: str, op: str, sizes: str | None, algorithm: str, devices: int | None,
               nodes: int, min_bytes: str | None, max_bytes: str | None,
               step_factor: int | None, step_bytes: str | None, datatype: str, redop: str,
               nccl_format: bool, measured_path: str | None, as_json: bool) -> None:
    """Time, algorithm bandwidth and bus bandwidth of a collective per message size."""
    if as_json and nccl_format:
        raise AccelsimError("--json and --nccl-tests: choose one output")
    if measured_path is not None:
        _measured(hardware, op, algorithm, devices, nodes, measured_path, as_json)
        return
    nccl_flags = (min_bytes, max_bytes, step_factor, step_bytes)
    if sizes is not None and any(f is not None for f in nccl_flags):
        raise AccelsimError("--sizes and -b/-e/-f/-i: give the sizes one way")
    system, _ = resolve_hardware(hardware)
    if any(f is not None for f in nccl_flags):
        size_list = nccl_sizes(_nccl_size("-b", min_bytes, DEFAULT_MIN_BYTES),
                               _nccl_size("-e", max_bytes, DEFAULT_MAX_BYTES), step_factor,
                               None if step_bytes is None else _nccl_size("-i", step_bytes, 1))
        step = (f"{step_factor}(factor)" if step_factor is not None and step_factor > 1
                else f"{_nccl_size('-i', step_bytes, DEFAULT_STEP_BYTES)}(bytes)")
    else:
        size_list, step = parse_sizes(sizes or "8B:8GB"), "2(factor)"
    if not nccl_format:
        record = cluster_record(system, op, size_list, algorithm, devices, nodes)
        if as_json:
            echo_json(record)
            return
        click.echo(render_collective(record))
        return
    ranks = (system.device_count if devices is None else devices) * nodes
    buffers = [b for b in (nccl_buffer(op, s, datatype, ranks) for s in size_list)
               if b.size_bytes > 0]
    if not buffers:
        raise AccelsimError(f"every size rounds to no {datatype} element per rank on {ranks} "
                            "ranks: give a larger -e")
    record = cluster_record(system, op, [b.size_bytes for b in buffers], algorithm, devices,
                            nodes)
    click.echo(render_nccl_tests(record, datatype, redop, buffers, step))


def _measured(hardware: str, op: str, algorithm: str, devices: int | None, nodes: int,
              path: str, as_json: bool) -> None:
    """`--measured FILE`: the model at the file's sizes against its out-of-place figures."""
    from pathlib import Path

    text = Path(path).read_text(errors="replace")
    try:
        measured = parse_nccl_tests(text)
    except AccelsimError as err:
        raise AccelsimError(f"--measured {path}: {err}") from None
    system, _ = resolve_hardware(hardware)
    record = cluster_record(system, op, [int(s) for s in measured.rows["size_bytes"]],
                            algorithm, devices, nodes)
    table = compare_measured(measured, record["rows"])
    listed = ranks_listed(text)
    note = (f"the file lists {listed} ranks, the model runs {record['devices']} (set -g/--nodes)"
            if listed is not None and listed != record["devices"] else None)
    if as_json:
        echo_json({"system": record["system"], "op": op, "devices": record["devices"],
                   "nodes": record["nodes"], "note": note,
                   "rows": table.to_dict(orient="records")})
        return
    where = f"{op} on {record['devices']} x {record['device']}, {record['system']}"
    click.echo(render_comparison(table, where) + (f"\nNB: {note}" if note else ""))
