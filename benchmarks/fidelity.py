"""Fidelity of the GPU model against every row of shared/reference/calibration_measurements.csv
it can express (ResNet-50 v1.5 and BERT-large on V100 and A100, train and infer).

Run: python benchmarks/fidelity.py [--write]   (--write updates results/fidelity.md)

Mapping of a measurement to a prediction (each an assumption, printed in the report):
- precision: "AMP" -> fp16 (eager = autocast), "TF32" -> tf32, "FP32" -> fp32; software eager.
- hardware: V100-SXM2-16GB and -32GB both -> the `v100` profile (same chip, memory size
  differs); A100-SXM4-80GB -> `a100`.
- optimizer: ResNet-50 SGD with momentum; BERT (LAMB pre-training, Adam fine-tuning) -> adam.
- throughput rows: batch / step time; latency rows (avg and p99): step time of one batch.
- NxGPU rows: per-GPU throughput x N x MULTI_GPU_SCALING (ideal, an upper bound: the
  all-reduce is not modelled yet).
- BERT pre-training with gradient accumulation: the listed batch / accumulation steps is the
  micro-batch; a step is forward + backward of one micro-batch + 1/steps of the optimizer.
The fit set (FIT_SET) is the rows `benchmarks/fit_gpu.py` fitted the [fitted] factors of
hw_profiles/efficiency/gpu.toml on; every other row is held out.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from accelsim.devices.estimate import estimate
from accelsim.devices.profile import load_profile
from accelsim.workload.zoo import build_model

# A copy of shared/reference/calibration_measurements.csv (see tests/reference/README.md).
CSV = Path(__file__).resolve().parents[1] / "tests" / "reference" / "calibration_measurements.csv"
RESULTS = Path(__file__).parent / "results" / "fidelity.md"
MULTI_GPU_SCALING = 1.0  # NB: ideal data-parallel scaling until the all-reduce is modelled
PRECISIONS = {"TF32": "tf32", "AMP": "fp16", "FP32": "fp32"}
DEVICES = {"A100-SXM4-80GB": "a100", "V100-SXM2-16GB": "v100", "V100-SXM2-32GB": "v100"}
FIT_SET_NAME = "V100 ResNet-50 inference rows (DLE-PT-RN50-013..066)"


def in_fit_set(row: pd.Series) -> bool:
    """The fit set: V100 ResNet-50 v1.5 inference rows."""
    return row["task"] == "infer" and "V100" in row["hardware"] and "ResNet" in row["workload"]


@dataclass(frozen=True)
class Case:
    """What one measurement asks of the model."""

    model: str
    seq_len: int | None
    device: str
    gpus: int
    batch: int
    accumulation_steps: int
    precision: str
    mode: str
    optimizer: str
    metric: str  # "throughput" or "latency"


def case_for(row: pd.Series) -> Case:
    """Map a CSV row onto a Case (raises ValueError for a row the model cannot express)."""
    gpus_text, device_text = re.match(r"(\d+)x (\S+)", row["hardware"]).groups()
    if device_text not in DEVICES:
        raise ValueError(f"no profile for {device_text}")
    precision = next(v for k, v in PRECISIONS.items() if row["precision"].startswith(k))
    batch_text = str(row["batch_per_device"])
    listed = int(re.match(r"\d+", batch_text).group())
    accum = re.search(r"with (\d+) accumulation steps", batch_text)
    steps = int(accum.group(1)) if accum else 1
    if "ResNet-50" in row["workload"]:
        model, seq_len, optimizer = "resnet50", None, "momentum"
    elif "BERT-Large" in row["workload"]:
        seq_len = int(re.search(r"seq len (\d+)", row["dataset"]).group(1))
        model, optimizer = "bert_large", "adam"  # NB: LAMB costed as Adam (same state)
    else:
        raise ValueError(f"no model for {row['workload']}")
    metric = "latency" if row["metric"].startswith("latency") else "throughput"
    return Case(model, seq_len, DEVICES[device_text], int(gpus_text), listed // steps, steps,
                precision, row["task"], optimizer, metric)


def step_time_s(case: Case, software: str = "eager") -> tuple[float, bool]:
    """Time of one (micro-)step on one GPU, and whether any op hit the power cap."""
    knobs = {} if case.seq_len is None else {"seq_len": case.seq_len}
    est = estimate(build_model(case.model, **knobs), load_profile(case.device), case.batch,
                   case.precision, case.mode, software, case.optimizer)
    opt_s = est.phase_time_s("optimizer") if case.mode == "train" else 0.0
    power_bound = bool((est.layers["bound"] == "power").any())
    return est.step_time_s - opt_s + opt_s / case.accumulation_steps, power_bound


def predict(case: Case) -> tuple[float, bool]:
    """The predicted value in the CSV's unit (samples/s, or ms for latency), power-bound flag."""
    t, power_bound = step_time_s(case)
    if case.metric == "latency":
        return t * 1e3, power_bound
    scaling = 1.0 if case.gpus == 1 else MULTI_GPU_SCALING
    return case.batch / t * case.gpus * scaling, power_bound


def fidelity_table() -> pd.DataFrame:
    """One row per CSV row: id, measured, predicted, error, fit set or held out (or why not)."""
    rows = []
    for _, row in pd.read_csv(CSV).iterrows():
        try:
            case = case_for(row)
        except ValueError as err:
            rows.append({"id": row["id"], "skipped": str(err)})
            continue
        pred, power_bound = predict(case)
        rows.append({"id": row["id"], "device": case.device, "gpus": case.gpus,
                     "precision": case.precision, "batch": case.batch, "mode": case.mode,
                     "metric": row["metric"], "measured": float(row["value"]), "predicted": pred,
                     "error": pred / float(row["value"]) - 1.0, "fit": in_fit_set(row),
                     "power_bound": power_bound, "skipped": ""})
    return pd.DataFrame(rows)


def summary_lines(table: pd.DataFrame) -> list[str]:
    done = table[table["skipped"] == ""]
    out = []
    for label, part in (("fitted", done[done["fit"]]), ("held out", done[~done["fit"]]),
                        ("held out, 1 GPU", done[~done["fit"] & (done["gpus"] == 1)]),
                        ("all", done)):
        if part.empty:
            continue
        abs_err = part["error"].abs()
        worst = part.loc[abs_err.idxmax()]
        ratio = max(worst["predicted"] / worst["measured"], worst["measured"] / worst["predicted"])
        out.append(f"| {label} | {len(part)} | {np.median(abs_err):.1%} | {worst['id']} "
                   f"({worst['error']:+.1%}, {ratio:.2f}x) |")
    return out


def report(table: pd.DataFrame) -> str:
    lines = [
        "# GPU model fidelity against calibration_measurements.csv",
        "",
        "Generated by `python benchmarks/fidelity.py --write` (deterministic). Fit set: "
        f"{FIT_SET_NAME}; factors in `hw_profiles/efficiency/gpu.toml`, fitted by "
        "`benchmarks/fit_gpu.py`. Every other row is held out (all A100 rows, all training "
        "rows). Mapping assumptions: see the docstring of `benchmarks/fidelity.py` "
        f"(AMP -> fp16, eager; NxGPU rows x {MULTI_GPU_SCALING} ideal scaling; V100 16 GB rows "
        "on the 32 GB profile; BERT gradient accumulation -> micro-batch).",
        "",
        f"Rows with an op at the power cap: {int(table['power_bound'].fillna(False).sum())}.",
        "",
        "| set | rows | median abs error | worst row |",
        "|---|---|---|---|",
        *summary_lines(table),
        "",
        "| id | device | gpus | precision | batch | mode | metric | measured | predicted | error "
        "| set |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        if r.skipped:
            lines.append(f"| {r.id} | skipped: {r.skipped} |||||||||")
            continue
        lines.append(f"| {r.id} | {r.device} | {r.gpus} | {r.precision} | {r.batch} | {r.mode} "
                     f"| {r.metric} | {r.measured:g} | {r.predicted:.4g} | {r.error:+.1%} "
                     f"| {'fit' if r.fit else 'held out'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    table = fidelity_table()
    text = report(table)
    print(text)
    if "--write" in argv:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main(sys.argv[1:])
