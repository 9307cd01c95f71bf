"""Speed of inference serving (issue: 100,000 requests in at most 10 s on a 2-core machine).

Run: python benchmarks/speed/serving_speed.py [--write]   (--write updates results/serving_speed.md)
Serves 100,000 requests of resnet50 on the a100 (fp16) when the GPU cost model imports, else
on the null device (the report says which), in three set-ups: open loop at 70 % of capacity
with one request per batch (the most batches, so the most events), open loop with dynamic
batching, and a closed loop. "cold" includes building the service-time table (one cost-model
estimate per batch size); "warm" is the median of 3 runs with the table cached. The Chrome
trace export of the warm run's records is timed too.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.devices.null import NullProfile  # noqa: E402
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.results.trace import write_chrome_trace  # noqa: E402
from accelsim.sim import service  # noqa: E402
from accelsim.sim.serve import ServeConfig, simulate_serving  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "serving_speed.md"
REQUESTS = 100_000
LOAD = 0.7


def pick_device() -> tuple[Any, str]:
    """The a100 if the GPU cost model imports and runs, else the null device."""
    try:
        from accelsim.devices.estimate import estimate
        from accelsim.profiles.devices import load_profile
        from accelsim.workload.zoo import build_model

        a100 = load_profile("a100")
        estimate(build_model("resnet50"), a100, 1, "fp16")
        return a100, "a100 (GPU cost model), fp16"
    except (ImportError, AccelsimError) as err:
        return NullProfile(), f"null device (GPU cost model unavailable: {err})"


def configs(device: Any) -> list[tuple[str, ServeConfig]]:
    base = ServeConfig("resnet50", device=device, rate_per_s=1.0, requests=REQUESTS, seed=1,
                       precision="fp16")
    one = simulate_serving(replace(base, requests=10)).capacity_samples_per_s
    batched = replace(base, max_batch=32, max_wait_s=0.002)
    cap32 = simulate_serving(replace(batched, requests=10)).capacity_samples_per_s
    return [
        ("open loop, max_batch 1, 70 % load", replace(base, rate_per_s=LOAD * one)),
        ("open loop, max_batch 32, max_wait 2 ms, 70 % load",
         replace(batched, rate_per_s=LOAD * cap32)),
        ("closed loop, 64 clients, max_batch 32, max_wait 1 ms",
         replace(base, rate_per_s=None, concurrency=64, max_batch=32, max_wait_s=0.001)),
    ]


def time_one(cfg: ServeConfig) -> tuple[float, float, float, Any]:
    service._CACHE.clear()
    t0 = time.perf_counter()
    simulate_serving(cfg)
    cold_s = time.perf_counter() - t0
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        res = simulate_serving(cfg)
        warm.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        write_chrome_trace(res.records, Path(tmp) / "trace.json")
        trace_s = time.perf_counter() - t0
    return cold_s, statistics.median(warm), trace_s, res


def main() -> None:
    device, label = pick_device()
    lines = [f"Device: {label}; {REQUESTS:,} requests of resnet50 per run.", "",
             "| set-up | cold (s) | warm (s) | trace export (s) | batches | mean batch | "
             "throughput (req/s) | p99 latency (ms) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, cfg in configs(device):
        cold_s, warm_s, trace_s, res = time_one(cfg)
        lines.append(f"| {name} | {cold_s:.2f} | {warm_s:.2f} | {trace_s:.2f} | "
                     f"{res.batches:,} | {res.batch_size_mean:.1f} | "
                     f"{res.throughput_samples_per_s:,.0f} | {res.latency_p99_s * 1e3:.2f} |")
    report = "\n".join(lines)
    print(report)
    if "--write" in sys.argv:
        RESULTS.write_text(
            "# Inference serving speed\n\n"
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, with "
            "`python benchmarks/speed/serving_speed.py --write`.\nTarget: 100,000 requests in at "
            "most 10 s on a 2-core machine. \"cold\" includes the service-time table (one "
            "cost-model estimate per batch size); \"warm\" is the median of 3 runs with it "
            "cached.\n\n" + report + "\n")


if __name__ == "__main__":
    main()
