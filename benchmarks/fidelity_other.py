"""Fidelity of the NPU and TPU models against the published measurements of non-GPU devices in
shared/reference/hardware_specs.csv that the tool can express.

Run: python benchmarks/fidelity_other.py [--write] [--fit]
  --write  updates results/fidelity_other.md
  --fit    prints the `fitted.layer_dispatch_s` of hw_profiles/efficiency/npu.toml that makes the
           fit row exact (the model is linear in it: time = time without dispatch + kernels x it)

Mapping of a measurement to a prediction (each an assumption):
- Coral Edge TPU MobileNet v2 latency (Dev Board; USB Accelerator 2.3 ms from the row's notes):
  `edge-tpu`, mobilenet_v2 224, batch 1, int8, device time of one inference. NB: the USB copy of
  the 150 KB input is not in the device estimate; the Dev Board's Edge TPU is the same chip.
- Coral FAQ "almost 400 FPS": 1 / the same latency (NB: same chip and model as the fit row,
  so not independent of it).
- Orin DLA ResNet-50 2037 img/s (2x DLA, bs 2, dense, MAXN): `orin-dla` (one engine), resnet50,
  batch 2, int8, throughput x 2 engines (NB: independent engines, each given half the LPDDR5).
- TPU v3 / v4 measured power min / mean / max (Google Cloud docs, workload not named): predicted
  average power of ResNet-50 (batch 256) and BERT-large (batch 32) bf16 training per chip, checked
  against the range; the error column is against the mean. Nothing is fitted on TPUs.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from accelsim.devices.efficiency import load_efficiency
from accelsim.devices.estimate import estimate
from accelsim.devices.profile import load_profile
from accelsim.workload.zoo import build_model

# A copy of shared/reference/hardware_specs.csv (see tests/reference/README.md).
CSV = Path(__file__).resolve().parents[1] / "tests" / "reference" / "hardware_specs.csv"
RESULTS = Path(__file__).parent / "results" / "fidelity_other.md"
FIT_ID = "coral-mnv2-devboard"
DLA_ENGINES = 2  # the measured row runs both DLAs of the module ("2x DLA")
# Predictions of the previous NPU model (git HEAD npu.py: ideal MAC array, no fusion, no
# dispatch), recorded once for the before/after comparison; not recomputed.
BEFORE = {"coral-mnv2-devboard": 0.6007, "coral-mnv2-usb": 0.6007, "coral-mnv2-fps": 1664.8,
          "orin-dla-rn50": 2 * 1015.9}


@dataclass(frozen=True)
class Case:
    """One measurement and how to predict it."""

    id: str
    device: str  # `name` in hardware_specs.csv
    field: str
    profile: str
    model: str
    batch: int
    precision: str
    mode: str
    metric: str  # latency_ms, throughput, power_w
    engines: int = 1
    notes_pattern: str = ""  # regex for a value in the row's notes instead of `value`
    note: str = ""


CASES = (
    Case(FIT_ID, "Google Coral Edge TPU", "mobilenet_v2_latency_devboard", "edge-tpu",
         "mobilenet_v2", 1, "int8", "infer", "latency_ms"),
    Case("coral-mnv2-usb", "Google Coral Edge TPU", "mobilenet_v2_latency_devboard", "edge-tpu",
         "mobilenet_v2", 1, "int8", "infer", "latency_ms",
         notes_pattern=r"USB Accelerator on desktop ([\d.]+) ms",
         note="same chip and model as the fit row; USB input copy not modelled"),
    Case("coral-mnv2-fps", "Google Coral Edge TPU", "mobilenet_v2_fps", "edge-tpu",
         "mobilenet_v2", 1, "int8", "infer", "throughput",
         note="1 / the fit row's quantity: not independent"),
    Case("orin-dla-rn50", "NVIDIA Jetson AGX Orin DLA (2x NVDLA v2)",
         "resnet50_images_per_s_maxn", "orin-dla", "resnet50", 2, "int8", "infer",
         "throughput", engines=DLA_ENGINES,
         note="independent: another chip and model; before matched by accident (unfused "
              "BN/ReLU DRAM round trips the DLA does not make)"),
    *(Case(f"{tpu}-power-{model}", f"Google TPU {tpu[-2:]}", "measured_power_mean", tpu, model,
           batch, "bf16", "train", "power_w")
      for tpu in ("tpu-v3", "tpu-v4") for model, batch in (("resnet50", 256), ("bert_large", 32))),
)


def measured(specs: pd.DataFrame, case: Case) -> float:
    row = specs[(specs["name"] == case.device) & (specs["field"] == case.field)].iloc[0]
    if case.notes_pattern:
        return float(re.search(case.notes_pattern, str(row["notes"])).group(1))
    return float(row["value"])


def power_range_w(specs: pd.DataFrame, device: str) -> tuple[float, float]:
    def get(field: str) -> float:
        return float(specs[(specs["name"] == device) & (specs["field"] == field)]["value"].iloc[0])

    return get("measured_power_min"), get("measured_power_max")


def predict(case: Case) -> tuple[float, float]:
    """(predicted value in the case's metric, NPU kernels that pay the dispatch overhead)."""
    est = estimate(build_model(case.model), load_profile(case.profile), case.batch,
                   case.precision, case.mode)
    kernels = float(est.layers["kernels"].sum()) if "kernels" in est.layers else 0.0
    if case.metric == "latency_ms":
        return est.step_time_s * 1e3, kernels
    if case.metric == "throughput":
        return est.throughput_samples_per_s * case.engines, kernels
    return est.average_power_w, kernels


def fit_dispatch_s(specs: pd.DataFrame) -> float:
    """layer_dispatch_s that makes the fit row exact (time is linear in it)."""
    case = next(c for c in CASES if c.id == FIT_ID)
    got_ms, kernels = predict(case)
    now_s = load_efficiency("npu")["fitted.layer_dispatch_s"]
    without_ms = got_ms - kernels * now_s * 1e3
    return (measured(specs, case) - without_ms) / 1e3 / kernels


def table(specs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for case in CASES:
        value = measured(specs, case)
        got, _ = predict(case)
        note = case.note
        if case.metric == "power_w":
            lo, hi = power_range_w(specs, case.device)
            note = f"measured {lo:g}-{hi:g} W: {'inside' if lo <= got <= hi else 'OUTSIDE'}"
        before = BEFORE.get(case.id)
        rows.append({
            "id": case.id, "profile": case.profile, "model": case.model, "batch": case.batch,
            "precision": case.precision, "mode": case.mode, "metric": case.metric,
            "measured": value, "predicted": got, "error": got / value - 1.0,
            "before": before, "error_before": None if before is None else before / value - 1.0,
            "set": "fit" if case.id == FIT_ID else "held out", "note": note,
        })
    return pd.DataFrame(rows)


def _pct(x: float | None) -> str:
    return "" if x is None or pd.isna(x) else f"{100 * x:+.1f}%"


def markdown(df: pd.DataFrame) -> str:
    eff = load_efficiency("npu")
    lines = [
        "# NPU / TPU model fidelity against hardware_specs.csv",
        "",
        "Generated by `python benchmarks/fidelity_other.py --write` (deterministic). One factor "
        f"is fitted: `fitted.layer_dispatch_s` = {eff['fitted.layer_dispatch_s']:.3g} s in "
        "`hw_profiles/efficiency/npu.toml`, on the row marked fit (`--fit`); every other row is "
        "held out. `before` is the previous NPU model (ideal MAC array, no fusion, no dispatch). "
        "Mapping assumptions: the docstring of `benchmarks/fidelity_other.py`.",
        "",
        "| id | profile | model | batch | precision | mode | metric | measured | predicted | error "
        "| before | error before | set | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        before = "" if r.before is None or pd.isna(r.before) else f"{r.before:.4g}"
        lines.append(f"| {r.id} | {r.profile} | {r.model} | {r.batch} | {r.precision} | {r.mode} "
                     f"| {r.metric} | {r.measured:.4g} | {r.predicted:.4g} | {_pct(r.error)} "
                     f"| {before} | {_pct(r.error_before)} | {r.set} | {r.note} |")
    lines += ["", "Not expressible (no profile, op or format for them, or no number in the "
              "reference): " + NOT_EXPRESSED, ""]
    return "\n".join(lines)


NOT_EXPRESSED = (
    "TPU v1 application throughput / utilisation (Jouppi et al. 2017: not in hardware_specs.csv; "
    "busy_power 'not found'); Microsoft Brainwave sustained 39.5 TFLOPS on a GRU (no Stratix 10 "
    "profile, no GRU op, no MSFP8 format); Stratix 10 NX 1-4 TOPS/W (a rating, not a "
    "measurement); Orin DLA 3-5x perf/W vs the GPU (a claim without a workload); Orin "
    "total_int8_tops at 15/30/50 W (ratings, and no power-mode knob); Alveo U250/U280 (no "
    "measurement in the reference). calibration_measurements.csv has GPU rows only.")


def main(argv: list[str]) -> int:
    specs = pd.read_csv(CSV)
    if "--fit" in argv:
        print(f"fitted.layer_dispatch_s = {fit_dispatch_s(specs):.4g}  (fit row {FIT_ID})")
    df = table(specs)
    text = markdown(df)
    print(text)
    if "--write" in argv:
        RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
