"""Fit the GPU class factors (hw_profiles/efficiency/gpu.toml [fitted]) and the fitted fields of
the software stacks (hw_profiles/software/*.toml) on the single-GPU rows of
calibration_measurements.csv (`calibration_rows`): factors per device class and per stack,
never per SKU or per model.

Run: python benchmarks/fidelity/fit_stacks.py [--write]   (--write puts the values into the TOMLs)

Parameters: the class's tensor-core, CUDA-core and DRAM efficiencies; per fitted stack its host
time per kernel and per step, and (all but the reference stack pytorch-eager, whose modifiers
are 1 by definition) its tensor-core modifier, and its CUDA-core modifier where it has FP32
rows; triton's per-request time (its per-step time is onnxruntime-tensorrt's, assumed).
NB: triton's tensor-core modifier is fitted on client-measured rows whose inputs cross the
network, so it absorbs that transfer; it is not written to tensorrt / onnxruntime-tensorrt,
which have no rows and keep modifiers of 1.
The fit itself lives in `accelsim.calibrate.stack_fit` (shared with `accelsim validate --fit`).
Method (numpy only, deterministic): each case's cost columns are computed once by gpu.py under
its stack with every factor at 1 and no host time; a step time for any parameter set is then
recombined exactly as gpu.py and estimate.py do (compute / efficiency x modifier capped at 1,
memory / bandwidth efficiency, launch gaps, host time per kernel not hidden by the kernel,
scaled by the system's host CPU, plus the per-step time), and coordinate descent on a
shrinking multiplicative grid minimises the sum of absolute log errors (the protocol scores
median errors, and L1 is robust to inconsistent rows such as DLE-TF-BERT-310, whose average
latency exceeds its own p99 six-fold; squared log error gave 12.5% in-sample and 15.5%
leave-one-SKU-out medians, L1 10.6% and 14.5%). The power limit (DVFS) is part of the fit's
recombination (`accelsim.calibrate.stack_fit`): the T4 rows throttle as the estimate does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.calibrate.calibration_rows import calibration_rows  # noqa: E402
from accelsim.calibrate.stack_fit import (  # noqa: E402, F401  (cross_validation imports them
    CLASS_PARAMS,
    REFERENCE_STACK,
    abs_errors,
    build_parts,
    fit,
    free_params,
    predictions,
)
from accelsim.validation.run import _us, set_toml_value  # noqa: E402

GPU_TOML = ROOT / "hw_profiles" / "efficiency" / "gpu.toml"
# A stack with no rows of its own that runs the kernels of a fitted one, whose tensor-core
# modifier is carried over: none. NB: TensorRT's engines are the same whether Paddle Inference
# or an application drives them, but carrying paddle-tensorrt's 1.53 to tensorrt throttles
# the V100, the energy model's reference device, under TensorRT at batch 128 (tests/unit/
# test_dvfs.py), against the reference's assumption; tensorrt keeps modifiers of 1.
CARRIED: dict[str, str] = {}
STACK_DIR = ROOT / "hw_profiles" / "software"


def _sub(text: str, key: str, value: float) -> str:
    value = _us(value)  # a host time under 1 ns (the descent toward 0) is written as 0
    try:
        return set_toml_value(text, key, f"{value:.4g}")
    except KeyError:
        raise SystemExit(f"no '{key} = ' line to update") from None


def write_tomls(p: dict[str, float], fitted: list[str]) -> None:
    """Put the fitted values into gpu.toml and the stack TOMLs."""
    text = GPU_TOML.read_text(encoding="utf-8")
    for name in CLASS_PARAMS:
        text = _sub(text, name, p[name])
    GPU_TOML.write_text(text, encoding="utf-8")
    keys = {"kernel_us": "gpu", "step_us": "per_step_us", "request_us": "per_request_us",
            "tensor_core": "tensor_core", "cuda_core": "cuda_core",
            "payload_ns_per_byte": "payload_gb_s"}
    for stack, source in CARRIED.items():  # the same engines, driven by another front end
        fitted = [*fitted, f"{stack}.tensor_core"]
        p = {**p, f"{stack}.tensor_core": p[f"{source}.tensor_core"]}
    touched = {n.split(".")[0] for n in fitted if "." in n}
    for stack in sorted(touched):
        path = STACK_DIR / f"{stack}.toml"
        text = path.read_text(encoding="utf-8")
        for kind, key in keys.items():
            name = f"{stack}.{kind}"
            if name in fitted:  # (the payload rate is fitted as its inverse, ns per byte)
                value = 1.0 / max(p[name], 1e-6) if kind == "payload_ns_per_byte" else p[name]
                text = _sub(text, key, value)
        path.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> None:
    rows = calibration_rows(ROOT / "tests" / "reference" / "calibration_measurements.csv")
    parts, row_case = build_parts(rows)
    p = fit(rows, parts, row_case)
    names = free_params(rows)
    print(f"fit set: {len(rows)} single-GPU rows ({parts.n_cases} distinct cases)")
    for name in names:
        print(f"  {name} = {p[name]:.4g}")
    err = abs_errors(rows, parts, row_case, p)
    print(f"median |error| on the fit set: {np.median(err):.1%}; within 25%: "
          f"{np.mean(err <= 0.25):.0%}; worst {err.max():.1%}")
    if "--write" in argv:
        write_tomls(p, names)
        print(f"wrote {GPU_TOML} and the stack TOMLs in {STACK_DIR}")


if __name__ == "__main__":
    main(sys.argv[1:])
