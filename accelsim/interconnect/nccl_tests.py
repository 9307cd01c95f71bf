"""nccl-tests' own format, written and read: the size sequence of its `-b/-e/-f/-i` flags, the
element counts its `-d` datatypes give per collective, its table (out-of-place and in-place
columns `size count type redop root time algbw busbw #wrong`, in bytes, elements, us and GB/s,
and the `# Avg bus bandwidth` footer), and a parser for that table, whether nccl-tests or
`accelsim collective --nccl-tests` wrote it.

    sizes = nccl_sizes(min_bytes=8, max_bytes=2**27, step_factor=2)
    text = render_nccl_tests(record, "float", "sum", rows)     # record: cluster_record(...)
    table = parse_nccl_tests(open("all_reduce_perf.log").read())

Format facts follow nccl-tests' printed output (src/common.cu of NVIDIA/nccl-tests, as its
users post it): size and count right-aligned in 12 columns, time printed with 2 decimals under
100 us, 1 under 10,000 us, none above; the average bus bandwidth is the mean of the
out-of-place and in-place bus bandwidths of every row, printed with %g.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelsim.errors import AccelsimError

# nccl-tests' -d names and their bytes per element.
DATATYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
                  "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
REDOPS = ("sum", "prod", "max", "min", "avg")  # nccl-tests' -o names
# The binary each accelsim collective corresponds to, for the header.
BINARIES = {"allreduce": "all_reduce_perf", "allgather": "all_gather_perf",
            "reducescatter": "reduce_scatter_perf", "alltoall": "alltoall_perf"}
REDUCING = ("allreduce", "reducescatter")  # the others print redop "none"
# nccl-tests' defaults when -b, -e or -i is not given: 32 MiB to 32 MiB, 1 MiB steps.
DEFAULT_MIN_BYTES = 32 * 2**20
DEFAULT_MAX_BYTES = 32 * 2**20
DEFAULT_STEP_BYTES = 2**20
MAX_ROWS = 10_000  # a guard against -i 1 over gigabytes, not an nccl-tests limit
_MPI_PREFIX = re.compile(r"^\[\d+,\d+\]<std(out|err)>:")


def nccl_sizes(min_bytes: int = DEFAULT_MIN_BYTES, max_bytes: int = DEFAULT_MAX_BYTES,
               step_factor: int | None = None, step_bytes: int | None = None) -> list[int]:
    """nccl-tests' loop: from min_bytes while at most max_bytes, times step_factor (-f) when
    it is above 1, else plus step_bytes (-i, 1 MiB by default), as nccl-tests steps."""
    if min_bytes > max_bytes:
        raise AccelsimError(f"-b {min_bytes}: larger than -e {max_bytes}")
    if step_factor is not None and step_factor <= 1:
        step_factor = None  # nccl-tests' -f 1 (its default): steps of -i bytes
    step = DEFAULT_STEP_BYTES if step_bytes is None else step_bytes
    if step < 1:
        raise AccelsimError(f"-i {step}: a step is at least 1 byte")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        if len(out) > MAX_ROWS:
            raise AccelsimError(f"-b {min_bytes} -e {max_bytes}: more than {MAX_ROWS} sizes; "
                                "give a larger -i or a step factor -f")
        size = size * step_factor if step_factor is not None else size + step
    return out


@dataclass(frozen=True)
class Buffer:
    """One nccl-tests row's buffer: `size_bytes` as printed (the larger of send and receive)
    and `count`, the elements nccl-tests prints (per rank for all-gather, reduce-scatter and
    all-to-all, the whole buffer for all-reduce)."""

    size_bytes: int
    count: int


def nccl_buffer(op: str, size_bytes: int, datatype: str, n_ranks: int) -> Buffer:
    """The buffer nccl-tests runs for `-b SIZE`: elements of `datatype`, all-gather and
    reduce-scatter per-rank counts rounded down to 16-byte multiples, all-to-all to whole
    per-rank counts (nccl-tests' getCollByteCount)."""
    elt = DATATYPE_BYTES[datatype]
    count = size_bytes // elt
    if op == "allreduce":
        return Buffer(count * elt, count)
    per_rank = count // n_ranks
    if op in ("allgather", "reducescatter"):
        # NB: nccl-tests aligns to 16 bytes with a mask (-(16 / elt)); the same for 1-8 B types.
        per_rank -= per_rank % max(16 // elt, 1)
    return Buffer(per_rank * n_ranks * elt, per_rank)


def _time_us(t_us: float) -> str:
    if t_us >= 10_000:
        return f"{t_us:7.0f}"
    return f"{t_us:7.1f}" if t_us >= 100 else f"{t_us:7.2f}"


def _group(time_s: float, algbw: float, busbw: float) -> str:
    return f"  {_time_us(time_s * 1e6)}  {algbw:6.2f}  {busbw:6.2f}  {'N/A':>5}"


def render_nccl_tests(record: dict[str, Any], datatype: str, redop: str,
                      buffers: list[Buffer], step: str) -> str:
    """nccl-tests' text for `record` (`cluster_record`), whose rows ran `buffers`' sizes:
    a header, one row per size with out-of-place and in-place columns, and the footer.
    `step` is nccl-tests' own wording ('2(factor)' or '1048576(bytes)')."""
    rows = record["rows"]
    n = record["devices"]
    sizes = [b.size_bytes for b in buffers]
    lines = [
        f"# accelsim collective (simulated, not measured): {BINARIES[record['op']]} on "
        f"{record['system']}, {record['algorithm']} algorithm",
        f"# nThread 1 nGpus {n} minBytes {min(sizes)} maxBytes {max(sizes)} step: {step} "
        "warmup iters: 0 iters: 1 agg iters: 1 validation: 0 graph: 0",
        "#",
        "# Using devices",
    ]
    per_node = record.get("devices_per_node", n)
    for rank in range(n):
        node, dev = divmod(rank, per_node)
        host = f"{record['system']}-{node}" if record["nodes"] > 1 else record["system"]
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {0:6d} on {host:>10} device {dev:2d} "
                     f"[0x00] {record['device']}")
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10,
        f"#{'size':>11}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        + f"  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}" * 2,
        f"#{'(B)':>11}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
        + f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}" * 2,
    ]
    shown_redop = redop if record["op"] in REDUCING else "none"
    busbws: list[float] = []
    for buf, row in zip(buffers, rows, strict=True):
        # NB: in-place runs the same model as out-of-place (no buffer-reuse effect).
        group = _group(row["time_s"], row["algorithm_bandwidth_gb_s"],
                       row["bus_bandwidth_gb_s"])
        lines.append(f"{buf.size_bytes:12d}  {buf.count:12d}  {datatype:>8}  "
                     f"{shown_redop:>6}  {-1:6d}{group}{group}")
        busbws += [row["bus_bandwidth_gb_s"]] * 2
    lines += ["# Out of bounds values : 0 OK",
              f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):g} ",
              "#"]
    return "\n".join(lines)


NCCL_COLUMNS = ["size_bytes", "count", "type", "redop", "root", "time_us", "algbw_gb_s",
                "busbw_gb_s", "wrong", "in_place_time_us", "in_place_algbw_gb_s",
                "in_place_busbw_gb_s", "in_place_wrong"]


@dataclass(frozen=True)
class NcclTable:
    """A parsed nccl-tests table: one row per size (`NCCL_COLUMNS`; `wrong` is None where
    nccl-tests printed N/A, `redop` or `root` None where its version printed no such column),
    and the footer's average bus bandwidth (None when the footer is missing)."""

    rows: pd.DataFrame
    avg_bus_bandwidth_gb_s: float | None


def _wrong(token: str) -> float | None:
    return None if token == "N/A" else float(token)


def parse_nccl_tests(text: str) -> NcclTable:
    """nccl-tests' output (any of its versions: with or without the root and redop columns,
    lines prefixed by mpirun's `[1,0]<stdout>:`), the rows and the average bus bandwidth;
    other lines (NCCL INFO, rank lists) are skipped. AccelsimError when no row is found."""
    rows: list[dict[str, Any]] = []
    avg: float | None = None
    for raw in text.splitlines():
        line = _MPI_PREFIX.sub("", raw).strip()
        if line.startswith("# Avg bus bandwidth"):
            avg = float(line.split(":", 1)[1].split()[0])
            continue
        tokens = line.split()
        if line.startswith("#") or len(tokens) < 11 or not all(
                t.isdigit() for t in tokens[:2]):
            continue
        middle, groups = tokens[2:-8], tokens[-8:]
        if not 1 <= len(middle) <= 3:
            continue
        redop = root = None
        if len(middle) == 3:
            redop, root = middle[1], int(middle[2])
        elif len(middle) == 2:
            if re.fullmatch(r"-?\d+", middle[1]):
                root = int(middle[1])
            else:
                redop = middle[1]
        try:
            out = [float(groups[0]), float(groups[1]), float(groups[2]), _wrong(groups[3])]
            inp = [float(groups[4]), float(groups[5]), float(groups[6]), _wrong(groups[7])]
        except ValueError:
            continue
        rows.append(dict(zip(NCCL_COLUMNS, [int(tokens[0]), int(tokens[1]), middle[0], redop,
                                            root, *out, *inp], strict=True)))
    if not rows:
        raise AccelsimError("no nccl-tests rows found (lines of size, count, type, ..., "
                            "time, algbw, busbw, #wrong twice)")
    table = pd.DataFrame(rows, columns=NCCL_COLUMNS)
    for col in ("wrong", "in_place_wrong"):
        table[col] = pd.to_numeric(table[col])
    return NcclTable(table, avg)


def ranks_listed(text: str) -> int | None:
    """How many ranks an nccl-tests log ran: one more than the highest rank its `#  Rank N`
    lines list (a log may keep only some of them); None if it lists none."""
    ranks = {int(m.group(1)) for line in text.splitlines()
             if (m := re.search(r"#\s*Rank\s+(\d+)\s", _MPI_PREFIX.sub("", line)))}
    return max(ranks) + 1 if ranks else None


def compare_measured(measured: NcclTable, predicted_rows: list[dict[str, Any]]
                     ) -> pd.DataFrame:
    """Measured (out-of-place) against predicted, one row per size: size_bytes, measured and
    predicted time_us and busbw_gb_s, and busbw_error (predicted / measured - 1)."""
    m = measured.rows
    out = pd.DataFrame({
        "size_bytes": m["size_bytes"].to_numpy(),
        "measured_time_us": m["time_us"].to_numpy(),
        "predicted_time_us": [r["time_s"] * 1e6 for r in predicted_rows],
        "measured_busbw_gb_s": m["busbw_gb_s"].to_numpy(),
        "predicted_busbw_gb_s": [r["bus_bandwidth_gb_s"] for r in predicted_rows]})
    # NB: a measured busbw printed as 0.00 (tiny messages) has no defined ratio: NaN.
    measured_bw = out["measured_busbw_gb_s"].where(out["measured_busbw_gb_s"] > 0)
    out["busbw_error"] = out["predicted_busbw_gb_s"] / measured_bw - 1
    return out


def render_comparison(table: pd.DataFrame, where: str) -> str:
    """The comparison as text: one line per size, then the median and worst |error|."""
    lines = [f"# predicted ({where}) vs measured (nccl-tests, out-of-place)",
             f"# {'size (B)':>12} {'measured us':>12} {'predicted us':>12} "
             f"{'measured busbw':>14} {'predicted busbw':>15} {'error':>8}"]
    for row in table.itertuples():
        err = "-" if pd.isna(row.busbw_error) else f"{row.busbw_error:+.1%}"
        lines.append(f"  {row.size_bytes:>12} {row.measured_time_us:>12.2f} "
                     f"{row.predicted_time_us:>12.2f} {row.measured_busbw_gb_s:>14.2f} "
                     f"{row.predicted_busbw_gb_s:>15.2f} {err:>8}")
    errors = table["busbw_error"].dropna().abs()
    if len(errors):
        lines.append(f"{len(errors)} sizes compared: median |busbw error| "
                     f"{errors.median():.1%}, worst {errors.max():.1%} (GB/s = 1e9 B/s)")
    return "\n".join(lines)
