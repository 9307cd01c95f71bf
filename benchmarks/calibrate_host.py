"""Prediction vs measurement on this host, before and after `accelsim calibrate` (issue 10).

Run: python benchmarks/calibrate_host.py [--blas-threads N] [--torch] [--reps R]
Writes results/calibrate_host.md and the calibrated profiles to results/calibrate_host/.

1. Calibrate (`accelsim.calibrate.run.calibrate`, timed): the CPU profile, the numpy stack and
   the storage profile of this host.
2. Measure the real numpy kernels here (`describe --execute --time`'s function: each layer's
   least time over 5 forward passes, summed; that whole measurement repeated `--reps` times and
   the median kept, the spread reported as noise) for resnet50 and bert_base at batch 1 in fp32
   and bf16, and a GEMM sweep (linear layers of sizes that are not calibration cases, from a
   GEMV-like M = 1 to M = 768, in fp32, bf16 and int8).
3. Predict each with the device model: before = the built-in CPU profile nearest this host
   (`host.nearest_builtin`, by vendor and ISA) with its default stack; hardware only = the
   calibrated CPU profile with the default stack; after = the calibrated profile and stack.
The sweep's sizes are held out: the fit saw only the one-op calibration cases. The networks are
not cases as a whole, but many of their layers have a calibration case's shape (resnet50
convolutions; bert_base's FFN GEMM, attention, softmax, layernorm at sequence 128), so their
rows are only partly held out.

`--blas-threads` (default 1) sets OPENBLAS_NUM_THREADS / OMP_NUM_THREADS for the whole run,
calibration and measurement alike: on a 2-core host shared with other processes a two-thread
BLAS call waits for its descheduled second thread (seen here: 0.07 ms GEMMs taking 50 ms, and
a 1.9 ms attention taking 580 ms), which no model of the kernels predicts. Kernels are timed
by the process's CPU time (`--wall-clock` for the wall clock): with one thread that is the
time they take alone, whereas the wall time of an op longer than a scheduler slice stretches
with whatever else runs (seen here: the same 393k-element GELU 17 ms in one minute, 40 ms in
the next).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "calibrate_host.md"
PROFILES = RESULTS / "calibrate_host"
REPEATS = 5
CPU_TIME = [True]  # set from --wall-clock
NETWORKS = (("resnet50", {}, "fp32"), ("resnet50", {}, "bf16"),
            ("bert_base", {"seq_len": 128}, "fp32"), ("bert_base", {"seq_len": 128}, "bf16"))
# (M, K, N): none is a calibration case (accelsim.calibrate.cases.kernel_cases); skinny M first
SWEEP = ((1, 2048, 1024), (2, 1024, 2048), (8, 1024, 1024), (16, 3072, 768), (32, 2048, 2048),
         (96, 512, 2048), (200, 1500, 700), (384, 768, 768), (768, 3072, 768))
SWEEP_PRECISIONS = ("fp32", "bf16", "int8")
REPS = [3]  # set from --reps
NOTE = ("NB: the model is a BLAS's (accelsim/devices/cpu_blas.py: micro-tile quantisation, "
        "packing, a GEMV's DRAM stream) except for numpy's int8 GEMMs, which are not a BLAS: "
        "the int8 kernels quantise both fp32 operands on every call (abs, max, divide, round, "
        "clip, cast, in float64 temporaries) and multiply in numpy's own int32 dot-product "
        "loop (no BLAS, no micro-tile, one thread), so the numpy stack carries a "
        "`quantize_int8` figure ((M x K + K x N) x 4 fp32 bytes per call at a fitted fraction "
        "of the DRAM bandwidth) beside `gemm_int8` (a per-MAC rate; accelsim/devices/cpu.py "
        "`quantize_bytes`). Left: temporaries above glibc's mmap threshold (32 MiB at most) "
        "are fresh pages faulted in on every call and (a guess, not traced) freed heap above "
        "glibc's trim threshold is handed back and faulted in again (seen here with "
        "getrusage: 1000-1700 minor faults per bf16 call of 32x2048x2048, 1x1024x4096 and "
        "768x3072x768 in a forward pass, none for 16x3072x768; int8's float64 temporaries "
        "pass 32 MiB from 4.2 M weights, as in 1x1024x4096 and 32x2048x2048), which no term "
        "of the model prices, so those rows run slower than predicted.")


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blas-threads", type=int, default=1)
    ap.add_argument("--torch", action="store_true", help="also calibrate PyTorch (importable)")
    ap.add_argument("--wall-clock", action="store_true",
                    help="time by the wall clock instead of the process's CPU time")
    ap.add_argument("--reps", type=int, default=3,
                    help="measure each row this many times and keep the median (default 3)")
    return ap.parse_args()


def _gemm_graph(m: int, k: int, n: int):  # noqa: ANN202 - a Graph
    from accelsim.workload.graph import GraphBuilder

    g = GraphBuilder(f"linear_{m}x{k}x{n}")
    g.linear(g.input("x", (k,)), out_features=n, bias=False, name="linear")
    return g.build(), m


def _row(label: str, graph, batch: int, precision: str, setups: dict) -> dict:  # noqa: ANN001
    from accelsim.calibrate.timing import measure_beside_prediction, predicted_layers_s

    runs = [measure_beside_prediction(graph, batch, precision, repeats=REPEATS,
                                      cpu_time=CPU_TIME[0]) for _ in range(REPS[0])]
    totals = [r[0]["measured_time_s"] for r in runs]
    median = sorted(totals)[len(totals) // 2]
    per_layer = runs[totals.index(median)][1]  # the layers of the median run
    row = {"workload": label, "precision": precision, "batch": batch, "measured_s": median,
           "spread": (max(totals) - min(totals)) / median}
    for name, (hw, software) in setups.items():
        predicted = predicted_layers_s(graph, batch, precision, hw, software)
        row[name] = float(predicted.sum())
        if name == "after":
            layer = per_layer.assign(pred=per_layer["name"].map(predicted))
            err = (layer["pred"] / layer["measured_time_s"] - 1).abs()
            share = layer["measured_time_s"] / layer["measured_time_s"].sum()
            row["layer_median_err"] = float(err.median())
            row["layer_weighted_err"] = float((err * share).sum())
    return row


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _err(predicted: float, measured: float) -> str:
    return f"{predicted * 1e3:.2f} ({predicted / measured - 1:+.0%})"


def main() -> None:
    args = _parse()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.blas_threads)
    from accelsim.calibrate.cases import kernel_cases
    from accelsim.calibrate.host import host_facts, nearest_builtin
    from accelsim.calibrate.run import calibrate
    from accelsim.workload.zoo import build_model

    load_start = os.getloadavg()[0]
    start_s = time.perf_counter()
    CPU_TIME[0] = not args.wall_clock
    REPS[0] = max(1, args.reps)
    cal = calibrate(PROFILES, progress=sys.stderr.isatty(), torch=args.torch,
                    cpu_time=CPU_TIME[0])
    calibrate_s = time.perf_counter() - start_s
    facts = host_facts()
    builtin = nearest_builtin(facts)
    hw, sw = str(cal.files["cpu"]), str(cal.files["software"])
    setups = {"before": (builtin, "default"), "hardware_only": (hw, "default"),
              "after": (hw, sw)}
    rows = [_row(name, build_model(name, **knobs), 1, precision, setups)
            for name, knobs, precision in NETWORKS]
    for precision in SWEEP_PRECISIONS:
        for m, k, n in SWEEP:
            graph, batch = _gemm_graph(m, k, n)
            rows.append(_row(f"GEMM {m}x{k}x{n}", graph, batch, precision, setups))
    load_end = os.getloadavg()[0]
    s = cal.summary
    cal_gemms = ", ".join(c.name.removeprefix("gemm_") for c in kernel_cases("full")
                          if c.kernel == "gemm")
    lines = [
        "# Prediction vs measurement on this host, before and after `accelsim calibrate`",
        "",
        f"Host `{s['host']}`: {s['cpu']}, {s['cores']} CPUs, numpy {s['numpy_version']} "
        f"({s['blas']}), {args.blas_threads} BLAS thread(s), {s['clock']}; {s['date']}. "
        "Rerun: `python benchmarks/calibrate_host.py` (`--torch` with a Python that has "
        "PyTorch, for the second stack).",
        "",
        f"NB: this host was shared with other engineers' work during the measurement (1-minute "
        f"load average {load_start:.1f} at the start and {load_end:.1f} at the end, on "
        f"{s['cores']} CPUs): {s['note']}. BLAS ran on {args.blas_threads} thread(s) and "
        f"kernels were {s['clock']} for calibration and measurement alike (see the script's "
        "docstring for why).",
        "",
        f"Calibration took {calibrate_s:.0f} s (`accelsim calibrate`, profiles in "
        f"`{PROFILES.relative_to(RESULTS.parent)}/`): fp32 vector peak "
        f"{s['fp32_vector_peak_flops_per_s'] / 1e9:.0f} GFLOP/s (derived from the clock), "
        f"memory stream {s['stream_bytes_per_s'] / 1e9:.1f} GB/s, numpy dispatch "
        f"{s['numpy']['per_kernel_s'] * 1e6:.1f} us per op, median |fit error| on the "
        f"calibration cases (in-sample) {s['numpy']['median_abs_fit_error']:.0%}; disk "
        f"{s['disk']['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s, "
        f"{s['disk']['random_read_4k_iops']:.0f} IOPS at queue depth 1"
        + (" (page cache probably answered)" if s["disk"]["cached"] else "")
        + "; JPEG decode "
        + (f"{s['jpeg_decode_s_per_image'] * 1e3:.2f} ms per image."
           if s["jpeg_decode_s_per_image"] else f"not measured ({s['jpeg_note']})."),
        "",
        f"Before: built-in `{builtin}` (nearest by vendor and ISA), default stack "
        "(`pytorch-eager`). Hardware only: the calibrated CPU profile, default stack. After: "
        "the calibrated profile and the `numpy-host` stack. Times in ms for one forward pass "
        f"(measured: each layer's least of {REPEATS} passes, summed; the median of "
        f"{REPS[0]} such measurements, their spread (max - min) / median in the noise "
        "column); the error is predicted / measured - 1. Layer error: median over layers of "
        "|error|, and weighted by each layer's share of the measured time (after "
        "calibration).",
        "",
        f"In the calibration set (in-sample): GEMMs (M x K x N) {cal_gemms}, at fp32, fp16, "
        "bf16 and int8, beside convolutions, attention, vector and stream ops "
        "(accelsim/calibrate/cases.py). Held out: every GEMM sweep size (none is a "
        "calibration case). The networks are not calibration cases as a whole, but many of "
        "their layers have a calibration case's shape (resnet50 convolutions; bert_base's FFN "
        "GEMM, attention, softmax and layernorm at sequence 128), so their rows are only "
        "partly held out.",
        "",
        "| workload | precision | batch | measured ms | noise | before ms | hardware only ms | "
        "after ms | layer error median / weighted |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['precision']} | {r['batch']} | "
            f"{r['measured_s'] * 1e3:.2f} | {r['spread']:.0%} | "
            f"{_err(r['before'], r['measured_s'])} | "
            f"{_err(r['hardware_only'], r['measured_s'])} | {_err(r['after'], r['measured_s'])}"
            f" | {r['layer_median_err']:.0%} / {r['layer_weighted_err']:.0%} |")
    lines.append("")
    for group, picked in (("Networks (partly held out)", rows[:len(NETWORKS)]),
                          ("GEMM sweep (held out)", rows[len(NETWORKS):]),
                          ("All rows", rows)):
        after = [abs(r["after"] / r["measured_s"] - 1) for r in picked]
        before = [abs(r["before"] / r["measured_s"] - 1) for r in picked]
        lines.append(
            f"- {group}: after calibration {sum(e <= 0.15 for e in after)} of {len(picked)} "
            f"within 15% (target), median |error| {_median(after):.0%}, worst {max(after):.0%};"
            f" before: median {_median(before):.0%}, worst {max(before):.0%}.")
    spread = [r["spread"] for r in rows]
    lines.append(f"- Noise: the spread of the {REPS[0]} repeated measurements per row was "
                 f"median {_median(spread):.0%}, worst {max(spread):.0%}.")
    lines += ["", NOTE]
    torch_s = s["pytorch"]
    if "skipped" not in torch_s:
        lines += ["", f"PyTorch {torch_s['version']} calibrated as a second stack "
                  f"(`pytorch-host.toml`): dispatch {torch_s['per_kernel_s'] * 1e6:.1f} us per "
                  f"op, median |fit error| (in-sample) {torch_s['median_abs_fit_error']:.0%}."]
    else:
        lines += ["", f"PyTorch: {torch_s['skipped']}."]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
