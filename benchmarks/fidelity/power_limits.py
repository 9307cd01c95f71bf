"""Power-limited clocks (issue 19 item 3): the sustained clock and board power the DVFS model
(`accelsim.devices.dvfs`, `hw_profiles/energy/dvfs.toml`) predicts for each GPU profile under
sustained tensor-core load, from its datasheet TDP, peaks and process node alone, and what the
power model does to the T4 rows of the calibration file.

Run: python benchmarks/fidelity/power_limits.py [--write]   (--write: results/power_limits.md)

Loads: BERT-Large inference (seq 384) at fp16 under TensorRT at batch 8 and 64, ResNet-50 at
int8 under TensorRT at batch 128: the kernels of a long offline run, one batch after another.
"Without the power model": the same estimate with the board limit lifted (TDP infinite), the
clock at boost throughout. NB: no measured sustained clock or board power of these loads is in
tests/reference/ (nvidia-smi logs of such runs would close that), so the table is a prediction
beside the datasheet's boost clock and TDP, not a validation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.calibrate.calibration_rows import calibration_rows  # noqa: E402
from accelsim.devices import registry  # noqa: E402
from accelsim.devices.estimate import estimate  # noqa: E402
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.profiles.devices import load_profile  # noqa: E402
from accelsim.profiles.hardware import host_clock_hz  # noqa: E402
from accelsim.profiles.systems import load_system  # noqa: E402
from accelsim.workload.zoo import build_model  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "power_limits.md"
GPUS = ("t4", "l4", "a10", "a30", "a40", "rtx-a6000", "l40s", "v100", "a100", "h100")
LOADS = (("bert_large", {"seq_len": 384}, "fp16", 8),
         ("bert_large", {"seq_len": 384}, "fp16", 64), ("resnet50", {}, "int8", 128))


@contextlib.contextmanager
def no_power_limit() -> Iterator[None]:
    """The GPU class with its board limit lifted (the clock stays at boost)."""
    saved = registry.CLASSES["gpu"]
    registry.CLASSES["gpu"] = dataclasses.replace(
        saved, power_limits=lambda p: (1e9, saved.power_limits(p)[1]))  # NB: 1 GW, no limit
    try:
        yield
    finally:
        registry.CLASSES["gpu"] = saved


def clock_table() -> list[str]:
    lines = ["| GPU | TDP (W) | boost (MHz) | load | sustained (MHz) | power-limited share of "
             "time | board power (W) | samples/s | samples/s without the limit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in GPUS:
        prof = load_profile(name)
        for model, knobs, precision, batch in LOADS:
            graph = build_model(model, **knobs)
            try:
                est = estimate(graph, prof, batch, precision, "infer", "tensorrt")
            except AccelsimError:  # a format the GPU cannot run (int8 on a V100)
                continue
            with no_power_limit():
                free = estimate(graph, prof, batch, precision, "infer", "tensorrt")
            rated = prof.compute.clock_hz / 1e6
            limited = est.layers["time_s"][est.layers["clock_fraction"] < 1].sum() / \
                est.layers["time_s"].sum()
            lines.append(
                f"| {name} | {prof.power.tdp_w:.0f} | {rated:,.0f} | {model} {precision} b{batch}"
                f" | {est.sustained_clock_fraction * rated:,.0f} | {limited:.0%} | "
                f"{est.average_power_w:.0f} | {est.throughput_samples_per_s:,.0f} | "
                f"{free.throughput_samples_per_s:,.0f} |")
    return lines


def t4_rows_effect() -> list[str]:
    rows = [r for r in calibration_rows(ROOT / "tests" / "reference" /
                                        "calibration_measurements.csv") if r.device == "t4"]

    def errors() -> np.ndarray:
        out = []
        for r in rows:
            knobs = {} if r.seq_len is None else {"seq_len": r.seq_len}
            est = estimate(build_model(r.model, **knobs), load_profile(r.device), r.batch,
                           r.precision, r.mode, r.stack, r.optimizer,
                           host_clock_hz(load_system(r.system)))
            t = est.step_time_s
            pred = t * 1e3 if r.metric == "latency" else r.batch / t
            out.append(pred / r.measured - 1.0)
        return np.array(out)

    with_limit = errors()
    with no_power_limit():
        without = errors()
    big = np.array([r.batch >= 64 for r in rows])
    lines = ["| T4 rows | rows | median error (signed) | median abs error |", "|---|---|---|---|"]
    for label, err in (("with the power model", with_limit), ("without", without)):
        lines.append(f"| {label} | {len(err)} | {np.median(err):+.1%} | "
                     f"{np.median(np.abs(err)):.1%} |")
        lines.append(f"| {label}, batch >= 64 | {big.sum()} | {np.median(err[big]):+.1%} | "
                     f"{np.median(np.abs(err[big])):.1%} |")
    return lines


def main(argv: list[str]) -> None:
    text = "\n".join([
        "# Power-limited clocks", "",
        "Generated by `python benchmarks/fidelity/power_limits.py --write`. " + __doc__.split(
            "\n\n")[1].replace("\n", " "), "",
        "## Sustained clock and board power under load (TensorRT)", "", *clock_table(), "",
        "## The T4 rows of the calibration file with and without the power model", "",
        *t4_rows_effect(), "",
        "The T4 rows are ResNet-50 only (MXNet, PyTorch, Triton; fp16 and fp32): the BERT "
        "rows the issue names (T4 BERT at fp16 / int8) are not in the file, so the throttled "
        "regime of the table above (BERT-Large on a 70 W T4 at about 1,350-1,400 MHz) is a "
        "prediction; a T4 BERT row, or an nvidia-smi clock log of such a run, would test it.",
        ""])
    print(text)
    if "--write" in argv:
        RESULTS.write_text(text, encoding="utf-8")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main(sys.argv[1:])
