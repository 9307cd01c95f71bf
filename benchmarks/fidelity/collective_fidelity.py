"""Fidelity of the collective model (`accelsim.interconnect.nccl`) and of data-parallel
scaling through the training pipeline, against shared/reference/calibration_measurements.csv.

Run: python benchmarks/fidelity/collective_fidelity.py [--write] [--record-before]
(--write updates results/collective_fidelity.md; --record-before stores the scaling the
pipeline predicts now in results/collective_fidelity_before.json, the "before" column.)

Part 1, NCCL rows (nccl-tests all_reduce_perf bus bandwidth; the link-class achievable
fractions fitted, the other rows held out): `nccl_rows.py`. Multi-node rows (NCCL-017/018, the
DGX-2H BERT rows up to 512 V100s) and the host-preparation check: `multinode_rows.py`, all held
out.

Part 2, scaling rows: every group of DGX-1 / DGX-2 / DGX A100 training-throughput rows that
differ only in the GPU count and include a 1-GPU row. Measured scaling efficiency = N-GPU
throughput / (N x 1-GPU throughput); predicted the same way from the training pipeline (1 and
N devices of the row's system, the row's batch, precision and sequence length; software eager;
gradient accumulation as listed: "with N accumulation steps" in the batch, or "grad
accumulation N" in the global batch, whose listed batch is then the micro-batch). Mapping:
V100-SXM2 16/32 GB -> dgx-1, V100-SXM3 -> dgx-2, A100 -> dgx-a100; AMP -> fp16, TF32 -> tf32,
FP32 -> fp32 (XLA ignored). NB: the input pipeline is taken out (the DLE runs decode with DALI
on the GPU): every row reads imagenet-records with preparation free, so the scaling is the
all-reduce's and the slowest GPU's (the device speed spread, fitted and cross-validated by
`spread_fit.py`); `multinode_rows.py` runs the ResNet-50 rows again with prep on the host.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from statistics import median

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.profiles.datasets import load_dataset  # noqa: E402
from accelsim.profiles.systems import load_system  # noqa: E402
from accelsim.sim.config import TrainConfig  # noqa: E402
from accelsim.sim.run import simulate_training  # noqa: E402
from accelsim.workload.scenario import resolve_workload  # noqa: E402
from benchmarks.fidelity import multinode_rows, nccl_rows, spread_fit  # noqa: E402
from benchmarks.report_io import emit  # noqa: E402

CSV = ROOT / "tests" / "reference" / "calibration_measurements.csv"
RESULTS = ROOT / "benchmarks" / "results" / "collective_fidelity.md"
BEFORE = ROOT / "benchmarks" / "results" / "collective_fidelity_before.json"
STEPS = 40  # steady state: the prefetch window fills in 2-3 steps
# NB: with host preparation, enough workers per GPU that the host's free cores, not the worker
# count, limit it (DALI's CPU stage uses a thread pool per GPU process).
PREP_WORKERS = 8
SYSTEMS = {"V100-SXM2-16GB (DGX-1)": "dgx-1", "V100-SXM2-32GB (DGX-1)": "dgx-1",
           "V100-SXM3-32GB (DGX-2)": "dgx-2", "A100-SXM4-80GB (DGX A100)": "dgx-a100"}
PRECISIONS = {"AMP": "fp16", "TF32": "tf32", "FP32": "fp32"}
GROUP_KEYS = ("workload", "dataset", "software", "precision", "batch_per_device", "metric")
# NB: DGX-2H (V100 SXM3 at 450 W, higher clocks) runs on the dgx-2 profile; scaling is taken
# against the 1-node DGX-2H row, so the clock difference cancels.
MULTI_NODE = r"(\d+)x V100-SXM3-32GB \((\d+)x DGX-2H\)"


@dataclass(frozen=True)
class ScalingCase:
    """One training configuration of a scaling group, at `gpus` GPUs."""

    scenario: str
    seq_len: int | None
    system: str
    precision: str
    batch: int  # micro-batch per GPU
    accumulate: int
    gpus: int  # every node's
    nodes: int = 1
    host_prep: bool = False  # input prepared on the host CPU (else free: DALI on the GPU)
    spread: float | None = None  # device speed spread; None: the fitted one of the TOML


def scaling_case(row: pd.Series) -> ScalingCase | None:
    """The case a throughput row asks for; None for a row outside part 2."""
    m = re.fullmatch(r"(\d+)x (.+)", str(row["hardware"]))
    multi = re.fullmatch(MULTI_NODE, str(row["hardware"]))
    if row["task"] != "train" or m is None or (m.group(2) not in SYSTEMS and multi is None):
        return None
    precision = next((v for k, v in PRECISIONS.items() if str(row["precision"]).startswith(k)),
                     None)
    listed = re.match(r"\d+", str(row["batch_per_device"]))
    if precision is None or listed is None:
        return None
    accum = re.search(r"with (\d+) accumulation steps", str(row["batch_per_device"]))
    steps = int(accum.group(1)) if accum else 1
    micro = int(listed.group()) // steps
    in_global = re.search(r"grad accumulation (\d+)", str(row["batch_global"]))
    if in_global:  # TF BERT rows: the listed batch is the micro-batch
        steps, micro = int(in_global.group(1)), int(listed.group())
    if "ResNet-50" in row["workload"]:
        scenario, seq_len = "resnet50-train", None
    elif "BERT-Large" in row["workload"]:
        scenario = "bert-large-train"
        seq_len = int(re.search(r"seq len (\d+)", row["dataset"]).group(1))
    else:
        return None
    if multi is not None:
        return ScalingCase(scenario, seq_len, "dgx-2", precision, micro, steps,
                           int(multi.group(1)), int(multi.group(2)))
    return ScalingCase(scenario, seq_len, SYSTEMS[m.group(2)], precision, micro, steps,
                       int(m.group(1)))


def throughput(case: ScalingCase, every_node: bool = False) -> float:
    """Samples/s of the pipeline for `case` (steady state, accumulation as listed);
    `every_node`: a multi-node case with every node simulated (`accelsim.sim.cluster`)."""
    knobs = {} if case.seq_len is None else {"input": {"seq_len": case.seq_len}}
    optimizer = "momentum" if case.scenario.startswith("resnet") else "adam"
    sc = resolve_workload(case.scenario).with_overrides(
        batch_size=case.batch, precision=case.precision, optimizer=optimizer, **knobs)
    sc = replace(sc, pipeline=replace(sc.pipeline, io_threads=4,
                                      prep_workers=PREP_WORKERS if case.host_prep else 1))
    data = load_dataset("imagenet-records")
    if not case.host_prep:
        data = replace(data, prep_s_per_sample_per_core=0.0)
    extra: dict[str, float] = {"nodes": case.nodes} if case.nodes > 1 else {}
    if every_node and case.nodes > 1:
        extra["every_node"] = True
    if case.spread is not None:
        extra["device_spread"] = case.spread
    steps = STEPS
    if "accumulate" in {f.name for f in fields(TrainConfig)}:
        extra["accumulate"] = case.accumulate
        steps = max(STEPS, 3 * case.accumulate)
    res = simulate_training(TrainConfig(sc, load_system(case.system),
                                        devices=case.gpus // case.nodes, dataset=data,
                                        steps=steps, **extra))
    return res.global_batch / res.step_time_s


def load_cases() -> tuple[pd.DataFrame, dict[str, ScalingCase | None]]:
    """The calibration rows, and the case each throughput row asks for (None: not one)."""
    csv = pd.read_csv(CSV, dtype=str)
    return csv, {r["id"]: scaling_case(r) for _, r in csv.iterrows()}


_MEMO: dict[ScalingCase, float] = {}


def memo_throughput(case: ScalingCase) -> float:
    """`throughput`, each case simulated once per process."""
    if case not in _MEMO:
        _MEMO[case] = throughput(case)
    return _MEMO[case]


def scaling_rows() -> pd.DataFrame:
    """One row per N-GPU measurement with a 1-GPU partner: measured and predicted scaling."""
    csv, cases = load_cases()
    csv = csv[csv["id"].map(lambda i: cases[i] is not None)].copy()
    csv["node"] = csv["hardware"].str.replace(r"^\d+x ", "", regex=True)
    out, memo = [], _MEMO
    for _, group in csv.groupby(list(GROUP_KEYS) + ["node"], sort=False):
        ones = group[group["hardware"].str.startswith("1x ")]
        if len(ones) != 1 or len(group) < 2:
            continue
        one = ones.iloc[0]
        for _, row in group.iterrows():
            case = cases[row["id"]]
            if case.gpus == 1:
                continue
            flat = replace(case, spread=0.0)
            for c in (cases[one["id"]], case, flat):
                if c not in memo:
                    memo[c] = throughput(c)
            measured = float(row["value"]) / (case.gpus * float(one["value"]))
            predicted = memo[case] / (case.gpus * memo[cases[one["id"]]])
            no_spread = memo[flat] / (case.gpus * memo[cases[one["id"]]])
            out.append({"id": row["id"], "one_gpu_row": one["id"], "system": case.system,
                        "model": case.scenario.removesuffix("-train"),
                        "precision": case.precision, "batch": case.batch,
                        "accumulate": case.accumulate, "gpus": case.gpus,
                        "measured": measured, "predicted": predicted, "no_spread": no_spread,
                        "measured_tput": float(row["value"]), "predicted_tput": memo[case]})
            print(f"{row['id']}: measured {measured:.3f}, predicted {predicted:.4f}",
                  file=sys.stderr)
    return pd.DataFrame(out)


def record_before() -> None:
    """Store the scaling the pipeline predicts now (run before the change)."""
    table = scaling_rows()
    BEFORE.write_text(json.dumps(dict(zip(table["id"], table["predicted"], strict=True)),
                                 indent=1) + "\n", encoding="utf-8")
    print(f"wrote {BEFORE}")


# ---------------------------------------------------------------- part 2: report

def _median_points(errors: pd.Series) -> str:
    return f"{median(errors.abs()) * 100:.1f}" if len(errors) else "n/a"


def scaling_lines(table: pd.DataFrame, before: dict[str, float]) -> list[str]:
    table = table.assign(before=table["id"].map(before))
    err_b, err_a = table["before"] - table["measured"], table["predicted"] - table["measured"]
    err_f = table["no_spread"] - table["measured"]
    out = ["| subset | rows | median abs error before (points) | buckets, no spread (points) "
           "| after: buckets and spread (points) |", "|---|---|---|---|---|"]
    subsets = {"all single-node rows": table.index == table.index,
               "measured <= 1 (no superlinear row)": table["measured"] <= 1.0}
    for key in ("system", "model"):
        for value in sorted(table[key].unique()):
            subsets[f"{key} {value}"] = table[key] == value
    for name, sel in subsets.items():
        out.append(f"| {name} | {int(sel.sum())} | {_median_points(err_b[sel])} "
                   f"| {_median_points(err_f[sel])} | {_median_points(err_a[sel])} |")
    out += ["", "| id | 1-GPU row | system | model | precision | micro-batch | accumulate | GPUs "
            "| measured | before | no spread | after | error after (points) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, e in zip(table.itertuples(), err_a, strict=True):
        out.append(f"| {r.id} | {r.one_gpu_row} | {r.system} | {r.model} | {r.precision} | "
                   f"{r.batch} | {r.accumulate} | {r.gpus} | {r.measured:.3f} | "
                   f"{r.before:.4f} | {r.no_spread:.4f} | {r.predicted:.4f} | "
                   f"{e * 100:+.1f} |")
    return out


def report(table: pd.DataFrame, before: dict[str, float], multi: pd.DataFrame,
           prep: pd.DataFrame, spread: list[str]) -> str:
    csv, _ = load_cases()
    lines = [
        "# Collective model and data-parallel scaling against calibration_measurements.csv",
        "",
        "Generated by `python benchmarks/fidelity/collective_fidelity.py --write` (deterministic). "
        "Mapping and assumptions: the docstring of `benchmarks/fidelity/collective_fidelity.py`.",
        "",
        "## NCCL all-reduce bus bandwidth",
        "",
        "Ring all-reduce at the largest message of each row's sweep, nccl-tests convention "
        "(busbw = algbw x 2(n-1)/n). Achievable fractions belong to the link class (NVLink "
        "and NVSwitch one class, PCIe another), one fit row each; the rest is held out.",
        "",
        *nccl_rows.nccl_lines(),
        "",
        "## Single-node data-parallel scaling (DGX-1, DGX-2, DGX A100)",
        "",
        "Scaling efficiency = N-GPU throughput / (N x 1-GPU throughput), measured from the rows "
        "and predicted by the training pipeline (same system, 1 and N devices). Error = "
        "predicted - measured, in points of efficiency. \"before\": the pipeline before the "
        "bucketed all-reduce (one unbucketed all-reduce starting when forward ends, no "
        "contention; recorded in results/collective_fidelity_before.json, accumulation rows "
        "all-reducing every micro-step as that model had to). \"after\": gradients "
        "all-reduced in 25 MiB buckets as backward makes them, at the link class's achievable "
        "bandwidth, slowing backward while they run; accumulation as listed. \"no spread\": "
        "that alone, every GPU as fast as the 1-GPU run's. \"after\": and the slowest of the "
        "N GPUs pacing every synchronised step (`accelsim.sim.straggler`: die-to-die step-time "
        "spread, fitted below; in-sample for the DGX-2 rows, held out for the others).",
        "",
        *scaling_lines(table, before),
        "",
        "### Device speed spread: fit and cross-validation",
        "",
        "A persistent die-to-die speed difference, not jitter: gradient accumulation does not "
        "average it away, which is why rows that all-reduce once per 64-4096 micro-steps lose "
        "about as much as rows that all-reduce every step (last section). Mapping and fit "
        "rule: the docstring of `benchmarks/fidelity/spread_fit.py`.",
        "",
        *spread,
        "",
        "## Multi-node NCCL all-reduce (NCCL-017, NCCL-018)",
        "",
        *multinode_rows.nccl_lines(csv),
        "",
        "## Multi-node data-parallel scaling (1 to 32 DGX-2H, up to 512 V100s)",
        "",
        "Scaling efficiency = N-node throughput / (N x 1-node throughput), 16 GPUs per node; "
        "predicted by the pipeline with `nodes` = N on dgx-2 (8 EDR ports per node, "
        "GPUDirect RDMA), accumulation as listed. Nothing fitted on these rows: every row is "
        "held out (the device speed spread is fitted on the single-node DGX-2 rows, all V100).",
        "",
        *multinode_rows.multinode_lines(multi, csv),
        "",
        "## Throughput of every multi-GPU row",
        "",
        "Predicted global samples/s against the row's value: the GPU cost model's "
        "single-device error plus the scaling error (nothing here is fitted to these rows; the "
        "GPU efficiency factors were fitted by fit_stacks.py on the single-GPU rows it names).",
        "",
        *multinode_rows.throughput_lines(table, multi),
        "",
        "## Does host preparation explain the fp16 scaling losses?",
        "",
        "Every ResNet-50 row again with the input prepared on the host CPU: imagenet-records "
        "at its per-core figure rescaled to the system's host CPU (`accelsim.sim.hostprep`), "
        f"{PREP_WORKERS} workers per GPU sharing the cores left after the framework's one per "
        "GPU. 'prep free' is the part above (DALI decoding on the GPU, as the rows ran).",
        "",
        *multinode_rows.prep_lines(prep),
        "",
        "## What the measured rows imply, with no model",
        "",
        "From the measured values alone: the time each micro-step of an N-GPU run takes "
        "beyond the 1-GPU run's, and the all-reduce time per synchronisation that would be "
        "needed for communication alone to explain it (extra x accumulation). The all-reduce "
        "of BERT-Large's 1.34 GB of fp32 gradients takes about 20-50 ms on these systems "
        "(model above, nccl-tests rows): rows that all-reduce once per 64 to 4096 micro-steps "
        "still lose about as much per micro-step as rows that all-reduce every step, which "
        "communication would explain only with all-reduces of seconds. So most of the "
        "measured loss is a per-micro-step cost that grows with the GPU count, not "
        "communication: the pipeline now models it as the slowest of N GPUs pacing each "
        "synchronised group (a per-die speed spread, which accumulation does not average "
        "away); host CPU or PCIe sharing would also fit some rows and is not separable here.",
        "",
        *multinode_rows.overhead_lines(table),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    if "--record-before" in argv:
        record_before()
        return
    before = json.loads(BEFORE.read_text(encoding="utf-8")) if BEFORE.is_file() else {}
    table = scaling_rows()
    csv, cases = load_cases()
    multi = multinode_rows.multinode_rows(cases, csv, memo_throughput)
    prep = multinode_rows.prep_rows(table, cases, memo_throughput)
    spread = spread_fit.spread_lines(table, cases, memo_throughput)
    text = report(table, before, multi, prep, spread)
    emit(text, RESULTS, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
