"""Multi-node rows of calibration_measurements.csv, and the host-preparation check, for
`collective_fidelity.py` (which runs them and writes one report).

- NCCL-017 / NCCL-018: nccl-tests all_reduce_perf on 24 A100s, 3 servers x 8 GPUs with 4 HDR
  InfiniBand ports each, 8 B to 128 MiB doubling (-b 8 -e 128M, -f 2 by default). Predicted by
  `accelsim.interconnect.multinode` on dgx-a100 with its NIC count set to the rows' 4 (every
  other figure as the profile has it); NCCL-018 is the peak bus bandwidth (taken at the
  largest message), NCCL-017 the average over the sweep as nccl-tests prints it. Nothing is
  fitted: InfiniBand has no achievable fraction (its theoretical bandwidth stands).
- DLE-TF-BERT-053..068: BERT-Large pre-training on 1, 4, 16 and 32 DGX-2H (16 V100 each),
  global batch fixed, accumulation shrinking with the node count (as listed). Scaling
  efficiency against the 1-node row of the same precision and sequence length, predicted by
  the training pipeline with `nodes` (dgx-2 profile, its 8 EDR ports).
- Host preparation: every ResNet-50 scaling row run again with the input prepared on the host
  CPU (imagenet-records at the host-rescaled per-core cost, `accelsim.sim.hostprep`, the
  framework's core per GPU taken out), to see whether 8-16 GPU processes sharing the host's
  cores explain the fp16 scaling losses. Nothing is fitted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from statistics import mean, median

import pandas as pd

from accelsim.interconnect.collectives import bus_factor
from accelsim.interconnect.multinode import fabric, multinode_time_s
from accelsim.interconnect.nccl import parse_sizes
from accelsim.profiles.systems import load_system


def nccl_multinode() -> dict[str, float]:
    """Predicted (peak, average) bus bandwidth of NCCL-018 / NCCL-017, GB/s."""
    fab = fabric(replace(load_system("dgx-a100"), nic_count=4), 3)
    busbw = []
    for size in parse_sizes("8B:128MB"):
        t, _, _ = multinode_time_s("allreduce", "auto", fab, float(size))
        busbw.append(size / t * bus_factor("allreduce", fab.devices) / 1e9)
    return {"peak": busbw[-1], "average": mean(busbw), "sizes": len(busbw)}


def nccl_lines(csv: pd.DataFrame) -> list[str]:
    got = nccl_multinode()
    value = {i: float(str(csv.loc[csv["id"] == i, "value"].iloc[0]).lstrip("~"))
             for i in ("NCCL-017", "NCCL-018")}
    return [
        "| row | what | measured busbw (GB/s) | predicted (GB/s) | error | set |",
        "|---|---|---|---|---|---|",
        f"| NCCL-018 | peak over 8 B-128 MiB (at 128 MiB) | {value['NCCL-018']:g} | "
        f"{got['peak']:.1f} | {got['peak'] / value['NCCL-018'] - 1:+.1%} | held out |",
        f"| NCCL-017 | average over the {got['sizes']} sizes 8 B-128 MiB | "
        f"{value['NCCL-017']:g} | {got['average']:.1f} | "
        f"{got['average'] / value['NCCL-017'] - 1:+.1%} | held out |",
        "",
        "24 A100s as 3 nodes x 8 over NVSwitch gen2 with 4 HDR ports per node (dgx-a100 with "
        "nic_count = 4), GPUDirect RDMA on; hierarchical all-reduce, cross-node ring or tree "
        "by message size. NCCL-017's 'average' is user-reported; an average over every size "
        "of the sweep, as nccl-tests prints it, is dominated by the latency-bound small "
        "messages, so the two may not be the same statistic.",
    ]


def multinode_rows(cases: dict[str, object], csv: pd.DataFrame,
                   throughput: Callable[[object], float]) -> pd.DataFrame:
    """One row per DGX-2H row with more than one node: scaling against its 1-node row."""
    rows = csv[csv["id"].map(lambda i: cases.get(i) is not None
                             and getattr(cases[i], "system", "") == "dgx-2"
                             and "DGX-2H" in str(csv.loc[csv["id"] == i, "hardware"].iloc[0]))]
    out = []
    for _, group in rows.groupby(["workload", "dataset", "precision", "batch_per_device"],
                                 sort=False):
        ones = group[group["id"].map(lambda i: cases[i].nodes == 1)]
        if len(ones) != 1:
            continue
        one = ones.iloc[0]
        c1 = cases[one["id"]]
        t1 = throughput(c1)
        for _, row in group.iterrows():
            c = cases[row["id"]]
            if c.nodes == 1:
                continue
            t = throughput(c)
            measured = float(row["value"]) / (c.nodes * float(one["value"]))
            out.append({"id": row["id"], "one_node_row": one["id"], "precision": c.precision,
                        "seq_len": c.seq_len, "nodes": c.nodes, "gpus": c.gpus,
                        "accumulate": c.accumulate, "measured": measured,
                        "predicted": t / (c.nodes * t1), "measured_tput": float(row["value"]),
                        "predicted_tput": t})
    return pd.DataFrame(out)


def copied_references(table: pd.DataFrame, csv: pd.DataFrame) -> list[str]:
    """1-node DGX-2H rows whose value is exactly that of a 16-GPU DGX-2 (non-H) row."""
    dgx2 = csv[csv["hardware"] == "16x V100-SXM3-32GB (DGX-2)"]
    out = []
    for ref in sorted(table["one_node_row"].unique()):
        value = csv.loc[csv["id"] == ref, "value"].iloc[0]
        same = dgx2.loc[dgx2["value"] == value, "id"]
        if len(same):
            out.append(f"{ref} = {same.iloc[0]} ({value})")
    return out


def _med(values: pd.Series, scale: float = 100.0) -> str:
    return f"{median(values.abs()) * scale:.1f}" if len(values) else "n/a"


def multinode_lines(table: pd.DataFrame, csv: pd.DataFrame) -> list[str]:
    err = table["predicted"] - table["measured"]
    terr = table["predicted_tput"] / table["measured_tput"] - 1
    out = ["| subset | rows | median abs scaling error (points) | median abs throughput error |",
           "|---|---|---|---|",
           f"| all multi-node rows | {len(table)} | {_med(err)} | {_med(terr)}% |"]
    copied_ids = {c.split(" = ")[0] for c in copied_references(table, csv)}
    subsets = {"measured <= 1 (no superlinear row)": table["measured"] <= 1.0,
               "1-node row not a copied DGX-2 value": ~table["one_node_row"].isin(copied_ids)}
    subsets.update({p: table["precision"] == p for p in sorted(table["precision"].unique())})
    for name, sel in subsets.items():
        out.append(f"| {name} | {int(sel.sum())} | {_med(err[sel])} | {_med(terr[sel])}% |")
    out += ["", "| id | 1-node row | precision | seq len | nodes | GPUs | accumulate | measured "
            "| predicted | error (points) | throughput measured | predicted | error |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, e, te in zip(table.itertuples(), err, terr, strict=True):
        out.append(f"| {r.id} | {r.one_node_row} | {r.precision} | {r.seq_len} | {r.nodes} | "
                   f"{r.gpus} | {r.accumulate} | {r.measured:.3f} | {r.predicted:.4f} | "
                   f"{e * 100:+.1f} | {r.measured_tput:.0f} | {r.predicted_tput:.0f} | "
                   f"{te:+.1%} |")
    copied = copied_references(table, csv)
    if copied:
        out += ["", f"NB: {len(copied)} of the {table['one_node_row'].nunique()} 1-node DGX-2H "
                "rows carry exactly the value of a 16-GPU DGX-2 (non-H, another container) row: "
                f"{'; '.join(copied)}. Against them the DGX-2H's faster GPUs read as "
                "superlinear scaling (measured > 1), which no communication model can give."]
    return out


def throughput_lines(single: pd.DataFrame, multi: pd.DataFrame) -> list[str]:
    """Absolute throughput of every multi-GPU row (the GPU cost model's error included)."""
    out = ["| subset | rows | median abs throughput error | median signed |", "|---|---|---|---|"]
    for name, t in (("single-node multi-GPU rows", single), ("multi-node rows", multi),
                    ("all", pd.concat([single, multi], ignore_index=True))):
        e = t["predicted_tput"] / t["measured_tput"] - 1
        out.append(f"| {name} | {len(t)} | {_med(e)}% | {median(e) * 100:+.1f}% |")
    return out


def prep_rows(single: pd.DataFrame, cases: dict[str, object],
              throughput: Callable[[object], float]) -> pd.DataFrame:
    """ResNet-50 scaling rows again, with preparation on the host CPU."""
    out = []
    for _, r in single[single["model"] == "resnet50"].iterrows():
        c, c1 = cases[r["id"]], cases[r["one_gpu_row"]]
        hc, hc1 = replace(c, host_prep=True), replace(c1, host_prep=True)
        out.append({**r.to_dict(),
                    "host_prep": throughput(hc) / (c.gpus * throughput(hc1))})
    return pd.DataFrame(out)


def prep_lines(table: pd.DataFrame) -> list[str]:
    free, host = table["predicted"] - table["measured"], table["host_prep"] - table["measured"]
    out = ["| subset | rows | median abs error, prep free (points) | with host prep (points) |",
           "|---|---|---|---|"]
    for name, sel in (("all ResNet-50 rows", table.index == table.index),
                      ("fp16", table["precision"] == "fp16"),
                      ("fp32 / tf32", table["precision"] != "fp16")):
        out.append(f"| {name} | {int(sel.sum())} | {_med(free[sel])} | {_med(host[sel])} |")
    out += ["", "| id | system | precision | GPUs | measured | prep free | host prep |",
            "|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        out.append(f"| {r.id} | {r.system} | {r.precision} | {r.gpus} | {r.measured:.3f} | "
                   f"{r.predicted:.4f} | {r.host_prep:.4f} |")
    return out


def overhead_lines(table: pd.DataFrame) -> list[str]:
    """What the measured rows imply, with no model: the time each micro-step of an N-GPU run
    takes beyond the 1-GPU run's (ms), and the all-reduce time per synchronisation it would
    take to explain it alone (that extra x accumulation)."""
    one_tput = table["measured_tput"] / (table["gpus"] * table["measured"])
    step1_ms = table["batch"] / one_tput * 1e3
    stepn_ms = table["batch"] * table["gpus"] / table["measured_tput"] * 1e3
    extra_ms = stepn_ms - step1_ms
    per_sync_s = extra_ms * table["accumulate"] / 1e3
    out = ["| rows | count | median extra time per micro-step (ms) | median all-reduce time per "
           "sync that would explain it (s) |", "|---|---|---|---|"]
    for name, sel in (("no accumulation", table["accumulate"] == 1),
                      ("accumulation >= 64 micro-steps", table["accumulate"] >= 64)):
        out.append(f"| {name} | {int(sel.sum())} | {median(extra_ms[sel]):.1f} | "
                   f"{median(per_sync_s[sel]):.3g} |")
    return out
