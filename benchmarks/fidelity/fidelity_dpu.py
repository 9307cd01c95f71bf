"""Fidelity of the FPGA DPU overlay model (accelsim/devices/fpga/model.py) against the Vitis AI
rows of calibration_measurements.csv: the fit of its one factor set, and leave-one-board-out error.

Run: python benchmarks/fidelity/fidelity_dpu.py [--write] [--fit]
  --write  updates results/fidelity_dpu.md
  --fit    prints the factor of hw_profiles/efficiency/fpga.toml fitted on every board's rows

Mapping of a measurement to a prediction (each an assumption):
- rows: "E2E throughput (fps), multi-thread" of the Vitis AI 1.4 model zoo, whose workload the
  zoo has: ResNet-50 (the cf_, tf_, tf2_, torchvision and mlperf variants all -> `resnet50`,
  NB: their 6.97-8.19 GOPs differ by the variant's stem and pooling, not modelled) and
  Inception v1 (`inception_v1`). NB: E2E includes the host's pre/post-processing; with every
  DPU core busy the device is taken as the limit.
- board -> profile: the DPU geometry is the board profile's (hw_profiles/devices, sourced
  there); the row's configuration text ("3 * B4096 @ 281MHz", "2 DPUCADF8H kernels running at
  300Mhz") is only checked against it (count, ops per cycle, clock; a mismatch stops the run).
  Batch = the overlay's engines (each busy with one image).
- not expressed: the U200's DPUCADX8G rows (the xDNN engine's geometry is in no reference and
  not recalled with confidence), every row of a model the zoo lacks (ResNet-101/152, Inception
  v2-v4, SqueezeNet, DenseBox, YOLOv3), and the latency rows (E2E latency is host
  pre-processing plus one image on one DPU core; the model has no host pre-processing term).
Fit: grid over `overlay_mac_efficiency` (0.20-1.00 step 0.01) minimising the sum of squared log
errors. Leave-one-board-out: the same fit on the other board's rows only, predicting the
held-out board.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.devices.estimate import estimate  # noqa: E402
from accelsim.devices.fpga import model as fpga  # noqa: E402
from accelsim.profiles.device_types import OverlaySpec  # noqa: E402
from accelsim.profiles.devices import load_profile  # noqa: E402
from accelsim.profiles.efficiency import load_efficiency  # noqa: E402
from accelsim.profiles.software import load_stack  # noqa: E402
from accelsim.workload.zoo import build_model  # noqa: E402

CSV = ROOT / "tests" / "reference" / "calibration_measurements.csv"
RESULTS = ROOT / "benchmarks" / "results" / "fidelity_dpu.md"
METRIC = "E2E throughput (fps), multi-thread"
SINGLE = "E2E latency (ms), 1 thread"
BOARDS = {"ZCU102": "zcu102", "Alveo U200": "alveo-u200"}
MODELS = (("resnet", "resnet50"), ("inception_v1", "inception_v1"))  # substring of the workload
EFFICIENCIES = np.round(np.arange(0.20, 1.0001, 0.01), 2)


@dataclass(frozen=True)
class Case:
    """One measured row and the run that predicts it."""

    id: str
    board: str
    model: str
    overlay: OverlaySpec
    measured_fps: float
    gops: float  # the zoo's GOPs per image, from the row's model name ("..._7.7G"); nan: none

    @property
    def peak_share(self) -> float:
        """Measured ops/s (fps x GOPs) over the overlay's peak: the efficiency the row shows."""
        return self.measured_fps * self.gops * 1e9 / self.overlay.peak_int8_ops_per_s


def row_overlay(hardware: str, board: str) -> OverlaySpec | None:
    """The board profile's overlay when the row's DPU configuration is the profile's (count,
    size as 2 x PP x ICP x OCP ops per cycle, clock; the geometry is the profile's, sourced
    there); None for an engine no profile describes (the U200's DPUCADX8G)."""
    ov = load_profile(board).compute.overlay
    per_engine_ops = 2 * ov.macs_per_cycle // ov.engines
    m = re.search(r"(\d+) \* B(\d+) +@ *(\d+)MHz", hardware)
    if m:
        config = (int(m.group(1)), int(m.group(2)), float(m.group(3)) * 1e6)
        if config != (ov.cores, per_engine_ops, ov.clock_hz):
            raise SystemExit(f"{board}: row DPU {m.group(0)!r} is not the profile's {ov.name}")
        return ov
    m = re.search(r"(\d+) DPUCADF8H kernels running at (\d+)Mhz", hardware)
    if m:
        if "DPUCADF8H" not in ov.name or (int(m.group(1)), float(m.group(2)) * 1e6) != (
                ov.cores, ov.clock_hz):
            raise SystemExit(f"{board}: row DPU {m.group(0)!r} is not the profile's {ov.name}")
        return ov
    return None


def cases() -> list[Case]:
    rows = pd.read_csv(CSV)
    rows = rows[rows["id"].str.startswith("VITISAI") & (rows["metric"] == METRIC)]
    out = []
    for r in rows.itertuples():
        board = next((p for k, p in BOARDS.items() if k in r.hardware), None)
        model = next((m for k, m in MODELS if k in r.workload.lower()), None)
        overlay = row_overlay(r.hardware, board) if board else None
        if board and model and overlay and "101" not in r.workload and "152" not in r.workload:
            named = re.search(r"_([\d.]+)G\)", r.workload)  # torchvision's name has none
            gops = float(named.group(1)) if named else float("nan")
            out.append(Case(r.id, board, model, overlay, float(r.value), gops))
    return out


@contextmanager
def factor(efficiency: float) -> Iterator[None]:
    """Run the FPGA model with this factor instead of hw_profiles/efficiency/fpga.toml's."""
    saved = fpga.load_efficiency
    table = {"fitted.overlay_mac_efficiency": efficiency}
    fpga.load_efficiency = lambda _cls: table  # type: ignore[assignment]
    try:
        yield
    finally:
        fpga.load_efficiency = saved  # type: ignore[assignment]


def predicted_fps(case: Case, efficiency: float) -> float:
    """Throughput of the case's run (batch = engines) at `efficiency`."""
    with factor(efficiency):
        est = estimate(build_model(case.model), load_profile(case.board),
                       case.overlay.engines, "int8", "infer")
    return est.throughput_samples_per_s


def fit(train: list[Case]) -> float:
    """The efficiency minimising the squared log errors on `train`."""
    memo: dict[tuple[str, str, str, float], float] = {}

    def fps(c: Case, eff: float) -> float:
        key = (c.board, c.model, c.overlay.name, eff)
        if key not in memo:
            memo[key] = predicted_fps(c, eff)
        return memo[key]

    errors = [sum(np.log(fps(c, float(e)) / c.measured_fps) ** 2 for c in train)
              for e in EFFICIENCIES]
    return float(EFFICIENCIES[int(np.argmin(errors))])


def table(all_cases: list[Case]) -> tuple[pd.DataFrame, dict[str, float]]:
    used = load_efficiency("fpga")["fitted.overlay_mac_efficiency"]
    held = {b: fit([c for c in all_cases if c.board != b]) for b in BOARDS.values()}
    rows = []
    for c in all_cases:
        fit_fps = predicted_fps(c, used)
        lobo_fps = predicted_fps(c, held[c.board])
        rows.append({"id": c.id, "board": c.board, "dpu": c.overlay.name, "model": c.model,
                     "peak_share": c.peak_share,
                     "measured_fps": c.measured_fps, "fit_fps": fit_fps,
                     "fit_error": fit_fps / c.measured_fps - 1.0, "lobo_fps": lobo_fps,
                     "lobo_error": lobo_fps / c.measured_fps - 1.0})
    return pd.DataFrame(rows), held


def needed_dram_share(all_cases: list[Case], efficiency: float) -> tuple[float, float]:
    """A diagnostic, not a fit the model uses: the share of the ZCU102's datasheet DDR
    bandwidth its DPUs would have to sustain (the vitis-ai stack's `dram_bandwidth` modifier,
    grid 0.20-1.00 step 0.05) for its multi-thread rows at the U200's MAC `efficiency`; and
    the single-core DPU time (ms) of one ResNet-50 image at that share."""
    zcu = [c for c in all_cases if c.board == "zcu102"]
    base = load_stack("vitis-ai")

    def run(share: float, batch: int) -> float:
        stack = dataclasses.replace(base, efficiency={**base.efficiency,
                                                      "dram_bandwidth": share})
        with factor(efficiency):
            return estimate(build_model("resnet50"), load_profile("zcu102"), batch, "int8",
                            "infer", software=stack).step_time_s

    shares = np.round(np.arange(0.20, 1.0001, 0.05), 2)
    errors = [sum(np.log(3 / run(float(x), 3) / c.measured_fps) ** 2 for c in zcu)
              for x in shares]
    share = float(shares[int(np.argmin(errors))])
    return share, 1e3 * run(share, 1)


def unmeasured() -> list[dict[str, object]]:
    """ResNet-50 predicted for the DPU boards without a measured row (no error): fps, the share
    of the overlay's peak it reaches, and the share of its time that is DRAM-bound."""
    out = []
    for name in ("zcu104", "kv260", "vck190"):
        p = load_profile(name)
        ov = p.compute.overlay
        est = estimate(build_model("resnet50"), p, ov.engines, "int8", "infer")
        layers = est.layers
        ops_per_s = float(layers["flops"].sum()) / est.step_time_s
        memory = float(layers.loc[layers["bound"] == "memory", "time_s"].sum())
        out.append({"board": name, "dpu": ov.name, "peak_tops": ov.peak_int8_ops_per_s / 1e12,
                    "ddr_gb_s": p.offchip_memory.bandwidth_bytes_per_s / 1e9,
                    "fps": est.throughput_samples_per_s,
                    "peak_share": ops_per_s / ov.peak_int8_ops_per_s,
                    "memory_share": memory / est.step_time_s})
    return out


def single_thread() -> list[tuple[str, float, float]]:
    """The ZCU102's 1-thread E2E latency rows: (id, measured ms, predicted DPU-only ms of one
    ResNet-50 image on one core); the difference is what the model leaves to the host (pre-
    and post-processing, runner) and to the variant's graph."""
    rows = pd.read_csv(CSV)
    rows = rows[rows["id"].str.startswith("VITISAI") & (rows["metric"] == SINGLE)
                & rows["hardware"].str.contains("ZCU102")
                & rows["workload"].str.lower().str.contains("resnet")]
    dpu_ms = 1e3 * estimate(build_model("resnet50"), load_profile("zcu102"), 1, "int8",
                            "infer").step_time_s
    return [(r.id, float(r.value), dpu_ms) for r in rows.itertuples()]


def markdown(df: pd.DataFrame, held: dict[str, float], all_cases: list[Case]) -> str:
    eff = load_efficiency("fpga")
    need = needed_dram_share(all_cases, held["zcu102"])
    first = single_thread()[0]  # cf_resnet50, the model of the first multi-thread row
    lines = [
        "# FPGA DPU model fidelity against calibration_measurements.csv (Vitis AI 1.4)",
        "",
        "Generated by `python benchmarks/fidelity/fidelity_dpu.py --write` (deterministic). One "
        "factor for every DPU board (hw_profiles/efficiency/fpga.toml): "
        f"`overlay_mac_efficiency` = {eff['fitted.overlay_mac_efficiency']:.3g}, fitted on all "
        "rows below (`fit`). `lobo`: fitted on the other board's rows only "
        + ", ".join(f"(without {b}: {e:.2f})" for b, e in held.items())
        + ". Mapping assumptions: the docstring of `benchmarks/fidelity/fidelity_dpu.py`.",
        "",
        "| id | board | DPU | model | measured fps | measured / DPU peak | fit fps | fit error "
        "| lobo fps | lobo error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        share = "n/a" if np.isnan(r.peak_share) else f"{100 * r.peak_share:.0f}%"
        lines.append(f"| {r.id} | {r.board} | {r.dpu} | {r.model} | {r.measured_fps:.4g} "
                     f"| {share} | {r.fit_fps:.4g} | {100 * r.fit_error:+.1f}% "
                     f"| {r.lobo_fps:.4g} | {100 * r.lobo_error:+.1f}% |")
    fit_abs, lobo_abs = df["fit_error"].abs(), df["lobo_error"].abs()
    lines += [
        "",
        f"Fit: median |error| {100 * fit_abs.median():.1f}%, worst {100 * fit_abs.max():.1f}%. "
        f"Leave-one-board-out: median |error| {100 * lobo_abs.median():.1f}%, worst "
        f"{100 * lobo_abs.max():.1f}%; per board: "
        + ", ".join(f"{b} {100 * g['lobo_error'].abs().median():.1f}%"
                    for b, g in df.groupby("board")) + ".",
        "",
        "Why one factor cannot fit both boards, from the rows: (1) the U200's E2E latency x "
        "E2E throughput is 4.0 images on all six DPUCADF8H models (VITISAI-1.4-081..092): "
        "a kernel runs 4 images at once, sharing one weight fetch (now modelled: "
        "`images_per_core` = 4; a DPUCZDX8G core fetches the weights for every image, "
        "`fpga.weight_fetches`). (2) On the ZCU102 each of the 3 cores takes 3 / 173.6 fps = "
        "17.3 ms per image in the multi-thread rows, longer than the whole single-thread E2E "
        "latency (13.75 ms, host pre-processing included, VITISAI-1.4-001): the cores slow "
        "each other down. The host is not the limit (its time per image is below 13.75 ms, "
        "on 4 Cortex-A53s: over 290 fps); the PS DDR4 the cores and the A53s share is the "
        "likely one. The model, with each core fetching its own weights at the datasheet "
        "19.2 GB/s, has the ZCU102 DRAM-bound for about a third of ResNet-50's time (the "
        "U200 for under a tenth) and still over-predicts it: the contention is larger than "
        "compulsory traffic at the datasheet bandwidth explains. (3) `measured / DPU peak` is "
        + " and ".join(f"{100 * g.min():.0f}-{100 * g.max():.0f}% on {b}"
                       for b, g in df.groupby("board")["peak_share"])
        + ": the DPUCADF8H (geometry unverified: 4 B4096-like engines per kernel) sustains "
        "about twice the DPUCZDX8G's share of its peak; one MAC efficiency for both "
        "architectures cannot hold. (4) On the same board, tf_resnetv1_50 (6.97 GOPs) runs "
        "slower than cf_resnet50 (7.7 GOPs), 947 vs 1054 fps: a +-10% variant effect (graph "
        "and pre-processing) the model, which runs one torchvision ResNet-50 for all "
        "variants, cannot see. Data that would close it: DPU-only (vaitrace) throughput per "
        "core count on the ZCU102, the ZCU102's sustained PS DDR bandwidth under DPU load, "
        "the DPUCADF8H's per-cycle peak from its product guide, and a second board per DPU "
        "architecture (ZCU104 / KV260 rows for the DPUCZDX8G) so that a per-architecture "
        "factor could be held out.",
        "",
        "What the ZCU102 would need (a diagnostic; not used by the model): at the U200's "
        f"factor ({held['zcu102']:.2f}) its three DPU cores would have to sustain "
        f"{100 * need[0]:.0f}% of the 19.2 GB/s datasheet DDR bandwidth (under load from the "
        "cores and the A53s' pre-processing); one core alone would then take "
        f"{need[1]:.2f} ms per ResNet-50 image, leaving "
        f"{first[1] - need[1]:.2f} ms of {first[0]}'s {first[1]:.2f} ms single-thread "
        "latency to the host, a plausible pre-processing time on a Cortex-A53. Consistent, "
        "but neither figure is measured or published, and with one board per DPU "
        "architecture a second fitted factor (a sustained DDR share) could not be held out: "
        "not adopted.",
        "",
        "The ZCU102's single-thread rows (E2E latency, in no fit): measured against the "
        "model's DPU-only time of one image on one core (fitted factor); the rest is the "
        "host's pre/post-processing and runner, not modelled: "
        + "; ".join(f"{i} {ms:.2f} ms = DPU {dpu:.2f} + rest {ms - dpu:.2f} ms"
                    for i, ms, dpu in single_thread()) + ".",
        "",
        "Boards without a measured row, predicted from their DPU count, size and clock "
        "(ResNet-50, batch = engines, int8; no error can be given, the check is plausibility "
        "against the datasheet peak and DDR):",
        "",
        "| board | DPU | peak TOPS | DDR GB/s | predicted fps | share of peak | DRAM-bound time |",
        "|---|---|---|---|---|---|---|",
        *(f"| {u['board']} | {u['dpu']} | {u['peak_tops']:.2f} | {u['ddr_gb_s']:.1f} "
          f"| {u['fps']:.0f} | {100 * u['peak_share']:.0f}% | {100 * u['memory_share']:.0f}% |"
          for u in unmeasured()),
        "",
        "Not expressed: " + NOT_EXPRESSED,
        "",
    ]
    return "\n".join(lines)


NOT_EXPRESSED = (
    "the U200's DPUCADX8G rows (VITISAI-1.4-093..122: engine geometry in no reference); rows of "
    "models the zoo lacks (ResNet-101/152, Inception v2-v4, SqueezeNet, DenseBox, YOLOv3); every "
    "latency and single-thread row (host pre-processing plus one image on one core: no host "
    "pre-processing term; the model puts one image on one engine, `fpga.busy_engines`).")


def main(argv: list[str]) -> int:
    all_cases = cases()
    if "--fit" in argv:
        print(f"fitted.overlay_mac_efficiency = {fit(all_cases):.3g}")
    df, held = table(all_cases)
    text = markdown(df, held, all_cases)
    if "--write" in argv:
        RESULTS.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
