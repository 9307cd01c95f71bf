"""Fidelity of the NPU and TPU models against the published measurements of non-GPU devices in
shared/reference/hardware_specs.csv that the tool can express.

Run: python benchmarks/fidelity/fidelity_other.py [--write] [--fit]
  --write  updates results/fidelity_other.md
  --fit    prints the `fitted.layer_dispatch_s` of hw_profiles/efficiency/npu.toml that makes the
           fit row exact (the model is linear in it: time = time without dispatch + kernels x it)

Mapping of a measurement to a prediction (each an assumption):
- latency rows: one request as the serving simulation serves it (`accelsim.sim.service`): the
  input copied in over the device's host link, the device's time, the output copied back.
- Coral Edge TPU MobileNet v2 latency (Dev Board): `edge-tpu` (the chip on the Dev Board, its
  input and output over PCIe Gen2 x1), mobilenet_v2 224, batch 1, int8. The USB Accelerator's
  2.3 ms (the row's notes): `coral-usb`, the same chip behind USB 3 (the link simulated: the
  150 KB input at 0.5 GB/s plus 125 us per transfer).
- Coral FAQ "almost 400 FPS": the device's throughput without the link copies (NB: taken as
  overlapped by pipelining; same chip and model as the fit row, so not independent of it).
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.devices.estimate import estimate  # noqa: E402
from accelsim.profiles.devices import load_profile  # noqa: E402
from accelsim.profiles.efficiency import load_efficiency  # noqa: E402
from accelsim.sim.service import device_host_link, service_table  # noqa: E402
from accelsim.workload.zoo import build_model  # noqa: E402

# A copy of shared/reference/hardware_specs.csv (see tests/reference/README.md).
CSV = ROOT / "tests" / "reference" / "hardware_specs.csv"
RESULTS = ROOT / "benchmarks" / "results" / "fidelity_other.md"
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
    Case("coral-mnv2-usb", "Google Coral Edge TPU", "mobilenet_v2_latency_devboard", "coral-usb",
         "mobilenet_v2", 1, "int8", "infer", "latency_ms",
         notes_pattern=r"USB Accelerator on desktop ([\d.]+) ms",
         note="same chip and model as the fit row, behind USB 3 (link simulated)"),
    Case("coral-mnv2-fps", "Google Coral Edge TPU", "mobilenet_v2_fps", "edge-tpu",
         "mobilenet_v2", 1, "int8", "infer", "throughput",
         note="the chip alone (link copies overlapped by pipelining); same chip and model as "
              "the fit row: not independent"),
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


def served_s(model: str, profile_name: str, batch: int, precision: str) -> tuple[float, float]:
    """(seconds, of which host link) of one batch as the serving simulation costs it: the input
    copied in over the device's host link, the device's time, the output copied back (bytes /
    bandwidth + the link profile's latency each way; none on an `integrated` SoC)."""
    profile = load_profile(profile_name)
    row = service_table(build_model(model), profile, device_host_link(profile), batch,
                        precision).loc[batch]
    return float(row["service_s"]), float(row["h2d_s"] + row["d2h_s"])


def predict(case: Case) -> tuple[float, float]:
    """(predicted value in the case's metric, NPU kernels that pay the dispatch overhead)."""
    est = estimate(build_model(case.model), load_profile(case.profile), case.batch,
                   case.precision, case.mode)
    kernels = float(est.layers["kernels"].sum()) if "kernels" in est.layers else 0.0
    if case.metric == "latency_ms":
        return served_s(case.model, case.profile, case.batch, case.precision)[0] * 1e3, kernels
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
        "Generated by `python benchmarks/fidelity/fidelity_other.py --write` (deterministic). One "
        f"factor is fitted: `fitted.layer_dispatch_s` = {eff['fitted.layer_dispatch_s']:.3g} s in "
        "`hw_profiles/efficiency/npu.toml`, on the row marked fit (`--fit`); every other row is "
        "held out. `before` is the previous NPU model (ideal MAC array, no fusion, no dispatch). "
        "Mapping assumptions: the docstring of `benchmarks/fidelity/fidelity_other.py`.",
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
    "measurement in the reference). The DPU rows of calibration_measurements.csv: "
    "benchmarks/results/fidelity_dpu.md.")

# Coral rows of calibration_measurements.csv (the 2019 FAQ table): the chip on the Dev Board
# (`edge-tpu`) against the chip behind USB 3 (`coral-usb`), for the workloads the zoo has. NB:
# MobileNet v1 and Inception v4 are not in the zoo; the rows' host CPUs are unnamed.
CALIBRATION = CSV.with_name("calibration_measurements.csv")
CORAL_ROWS = {"MobileNet v2": "mobilenet_v2", "Inception v1": "inception_v1"}
CORAL_BOARDS = {"Coral Dev Board with Edge TPU": "edge-tpu",
                "Desktop CPU + Coral USB Accelerator (USB 3.0) with Edge TPU": "coral-usb"}


def coral_table() -> pd.DataFrame:
    """Each Coral row whose model and board the tool has: measured vs predicted latency, and the
    predicted split into the host link (input in, output out) and the chip."""
    rows = pd.read_csv(CALIBRATION)
    rows = rows[rows["id"].str.startswith("CORAL") & rows["hardware"].isin(CORAL_BOARDS)]
    out = []
    for r in rows.itertuples():
        model = next((m for k, m in CORAL_ROWS.items() if r.workload.startswith(k)), None)
        if model is None:
            continue
        name = CORAL_BOARDS[r.hardware]
        got_s, link_s = served_s(model, name, 1, "int8")
        got_ms = got_s * 1e3
        out.append({"id": r.id, "profile": name, "model": model,
                    "measured_ms": float(r.value), "predicted_ms": got_ms,
                    "link_ms": link_s * 1e3, "chip_ms": got_ms - link_s * 1e3,
                    "error": got_ms / float(r.value) - 1.0})
    return pd.DataFrame(out)


def coral_markdown(df: pd.DataFrame) -> list[str]:
    lines = ["", "## The Edge TPU: the chip apart from its link (calibration_measurements.csv)", "",
             "`edge-tpu` is the chip on the Dev Board (input and output over PCIe Gen2 x1), "
             "`coral-usb` the same chip behind USB 3.0; the link is simulated as serving "
             "simulates it (bytes / 0.5 GB/s + the link profile's latency per transfer). Only "
             "CORAL-EDGETPU-008's source row (hardware_specs.csv) is fitted; the rest are held "
             "out.", "",
             "| id | profile | model | measured ms | predicted ms | link ms | chip ms | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        lines.append(f"| {r.id} | {r.profile} | {r.model} | {r.measured_ms:.3g} "
                     f"| {r.predicted_ms:.3g} | {r.link_ms:.3g} | {r.chip_ms:.3g} "
                     f"| {_pct(r.error)} |")
    by = df.pivot_table(index="model", columns="profile", values=["measured_ms", "predicted_ms"])

    def gap(m: str, what: str) -> float:
        return by.loc[m, (what, "coral-usb")] - by.loc[m, (what, "edge-tpu")]

    lines += ["", "USB minus Dev Board, per model: " + "; ".join(
        f"{m}: measured {gap(m, 'measured_ms'):+.2f} ms, predicted {gap(m, 'predicted_ms'):+.2f} ms"
        for m in by.index) + ". NB: the USB rows ran on a desktop host and the Dev Board's on its "
        "Arm SoC; the measured gap is the host's, which the model does not cost (no host "
        "per-inference time in tflite-edgetpu), so USB's extra link latency comes out as the "
        "only difference.", ""]
    return lines


def main(argv: list[str]) -> int:
    specs = pd.read_csv(CSV)
    if "--fit" in argv:
        print(f"fitted.layer_dispatch_s = {fit_dispatch_s(specs):.4g}  (fit row {FIT_ID})")
    df = table(specs)
    text = markdown(df) + "\n".join(coral_markdown(coral_table()))
    print(text)
    if "--write" in argv:
        RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
