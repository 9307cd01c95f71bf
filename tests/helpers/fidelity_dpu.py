"""The Vitis AI rows of tests/reference/calibration_measurements.csv the FPGA DPU overlay model
is fitted on, and the model's prediction of each: what the DPU-fit guard
(validation/test_profiles_more.py) compares.

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

A copy of what the guard needs from benchmarks/fidelity_dpu.py (the rows, the check of each
row's DPU against its board profile, the prediction at a given factor; not the fit or its
report), so that it imports nothing from benchmarks/: keep the two in step when the mapping
changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd

from accelsim.devices.estimate import estimate
from accelsim.devices.fpga import model as fpga
from accelsim.profiles.device_types import OverlaySpec
from accelsim.profiles.devices import load_profile
from accelsim.workload.zoo import build_model
from tests.helpers.paths import REFERENCE

CSV = REFERENCE / "calibration_measurements.csv"
METRIC = "E2E throughput (fps), multi-thread"
BOARDS = {"ZCU102": "zcu102", "Alveo U200": "alveo-u200"}
MODELS = (("resnet", "resnet50"), ("inception_v1", "inception_v1"))  # substring of the workload


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
