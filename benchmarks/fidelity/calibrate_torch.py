"""Issue 27's check: after `accelsim calibrate`, the written PyTorch and numpy stacks against
what PyTorch and the numpy kernels take on this host.

Run: python benchmarks/fidelity/calibrate_torch.py [--profiles DIR] [--reps R] [--out FILE]
(needs PyTorch: `pip install torch`; DIR: a calibration folder, else one is made under /tmp).

Workloads: ResNet-50 at batch 1 and 8, BERT-base (sequence 128) at batch 1 and 8, and the
GEMMs 512x768x768, 512x768x3072 and 2048^3 (the `gemm` workload), fp32.
- PyTorch measured: each op of accelsim's graph run by its `torch.nn.functional` call
  (`calibrate.torch_cases`, the calls calibration times), each op's least of a few runs, the
  network's time their sum; that whole measurement `--reps` times, the median kept. NB: op by
  op on fresh tensors, not torchvision's module: no cross-op cache reuse, no fused paths; views
  (reshape, flatten) cost nothing, and an op without a torch call is listed, not timed.
- numpy measured: `describe --execute --time`'s function (`calibrate.timing`), `--reps` times,
  the median kept.
- predicted: `simulate`'s estimate under DIR's host-cpu.toml with pytorch-host.toml and with
  numpy-host.toml.
Every row carries the 1-minute load average when it started, and the file the host's load as
calibrate judged it (`calibration.json`: host_load_before, host_load). Timed as calibration
timed: by CPU time on one thread where calibration switched to it, with glibc's mmap
threshold raised as calibration raises it (`--default-allocator`: not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

WORKLOADS = (("resnet50", {}, 1), ("resnet50", {}, 8), ("bert_base", {"seq_len": 128}, 1),
             ("bert_base", {"seq_len": 128}, 8), ("gemm", {"m": 512, "n": 768, "k": 768}, 1),
             ("gemm", {"m": 512, "n": 3072, "k": 768}, 1),
             ("gemm", {"m": 2048, "n": 2048, "k": 2048}, 1))
OP_REPEATS = 3  # least of, per op and measurement


def _torch_time_s(graph, batch: int, clock) -> tuple[float, list[str]]:  # noqa: ANN001
    """The sum over the graph's ops of each one's least time in PyTorch by `clock`, s, and
    the op kinds without a torch call (not timed)."""
    import torch

    from accelsim.calibrate.cases import least_time_s
    from accelsim.calibrate.torch_cases import _call
    from accelsim.workload.tables import counts_table

    counts = counts_table(graph)
    work = dict(zip(counts["op_index"], counts["fwd_flops"] + counts["read_elems"], strict=True))
    total_s, missing = 0.0, []
    with torch.inference_mode():
        for i, op in enumerate(graph.ops):
            if not work.get(i):
                continue  # a view: no work
            try:
                run = _call(op, batch, torch.float32)
            except (NotImplementedError, KeyError, TypeError, RuntimeError):
                missing.append(op.kind.value)
                continue
            total_s += least_time_s(run, OP_REPEATS, clock, max_s=0.5, min_s=0.0)
    return total_s, sorted(set(missing))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    ap.add_argument("--default-allocator", action="store_true",
                    help="leave glibc's mmap threshold at its start (as the first run did)")
    args = ap.parse_args()
    import numpy as np

    from accelsim.calibrate.alloc_bench import mmap_threshold_max_bytes
    from accelsim.calibrate.pass_bench import THRESHOLD_MARGIN_BYTES
    from accelsim.calibrate.run import calibrate
    from accelsim.profiles.devices import load_profile

    folder = args.profiles
    if folder is None:
        folder = Path("/tmp/accelsim-calibrate-torch")
        start_s = time.perf_counter()
        calibrate(folder, progress=sys.stderr.isatty())
        print(f"calibrated in {time.perf_counter() - start_s:.0f} s", file=sys.stderr)
    cal = json.loads((folder / "calibration.json").read_text())
    hw = load_profile(folder / "host-cpu.toml")
    # NB: measured as calibration timed: by CPU time on one thread where it switched to that
    cpu_time = cal["clock"].endswith("CPU time")
    clock = time.process_time if cpu_time else time.perf_counter
    if cpu_time:
        import torch

        from accelsim.calibrate.peak import numpy_blas_threads

        torch.set_num_threads(1)
    # NB: the C allocator as calibration leaves it (`pass_bench.measure_passes`) and as a
    # process that has run a forward pass: glibc's dynamic mmap threshold raised, so that an
    # op's outputs below it come from the heap, not fresh pages (measured here: PyTorch's 7x7
    # stem convolution 5.2 ms with the default threshold, 1.2 ms raised)
    threshold = mmap_threshold_max_bytes()
    if threshold is not None and not args.default_allocator:
        block = np.ones(threshold - THRESHOLD_MARGIN_BYTES, dtype=np.uint8)
        del block
    with ExitStack() as stack:
        if cpu_time:
            stack.enter_context(numpy_blas_threads(1))  # for the whole run
        rows = _rows(folder, hw, cal, clock, cpu_time, args.reps)
    out = {"profiles": str(folder), "clock": cal["clock"], "threads": 1 if cpu_time else None,
           "mmap_threshold_raised": threshold is not None and not args.default_allocator,
           "host_load_before": cal["host_load_before"], "host_load": cal["host_load"],
           "rows": rows}
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


def _rows(folder: Path, hw, cal: dict, clock, cpu_time: bool,  # noqa: ANN001
          reps: int) -> list[dict]:
    from accelsim.calibrate.timing import measure_beside_prediction
    from accelsim.devices.estimate import estimate
    from accelsim.workload.zoo import build_model

    rows = []
    for name, knobs, batch in WORKLOADS:
        graph = build_model(name, **knobs)
        load = os.getloadavg()[0]
        torch_runs = [_torch_time_s(graph, batch, clock) for _ in range(reps)]
        numpy_runs = [measure_beside_prediction(graph, batch, "fp32", repeats=1,
                                                cpu_time=cpu_time)[0]["measured_time_s"]
                      for _ in range(reps)]
        row = {"workload": name, "knobs": knobs, "batch": batch, "load_1m": load,
               "torch_s": statistics.median(t for t, _ in torch_runs),
               "torch_spread": (max(t for t, _ in torch_runs) - min(t for t, _ in torch_runs))
               / min(t for t, _ in torch_runs), "torch_untimed_ops": torch_runs[0][1],
               "numpy_s": statistics.median(numpy_runs),
               "numpy_spread": (max(numpy_runs) - min(numpy_runs)) / min(numpy_runs)}
        for stack in ("pytorch", "numpy"):
            est = estimate(graph, hw, batch, "fp32", software=str(folder / f"{stack}-host.toml"))
            row[f"{stack}_predicted_s"] = est.step_time_s
            row[f"{stack}_power_share"] = float(
                est.layers.loc[est.layers["bound"] == "power", "time_s"].sum() / est.step_time_s)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
