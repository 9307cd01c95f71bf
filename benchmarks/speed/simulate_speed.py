"""Speed of `accelsim simulate` on one device (issue: under a second for a zoo model).

Run: python benchmarks/speed/simulate_speed.py [--write]
(--write updates results/simulate_speed.md).
For one device of every class, times (a) the whole command in a fresh process (`accelsim
simulate MODEL --hw DEVICE --json`, interpreter start-up and imports included) and (b) the
device estimate alone in-process, warm (graph cached), median of 5. Training cases add
`--steps 20`: a bare device in train mode runs the whole pipeline inside the default host,
and a full epoch is the pipeline benchmark's business (results/pipeline_speed.md).
"""

from __future__ import annotations

import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.devices.estimate import estimate  # noqa: E402
from accelsim.profiles.devices import load_profile  # noqa: E402
from accelsim.workload.zoo import build_model  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "simulate_speed.md"
CASES = [  # (model, device, precision, batch, mode)
    ("resnet50", "a100", "bf16", 256, "train"),
    ("bert_large", "v100", "fp16", 32, "train"),
    ("llama2_7b", "h100", "bf16", 1, "infer"),
    ("resnet50", "xeon-8480", "bf16", 32, "infer"),
    ("resnet50", "tpu-v1", "int8", 32, "infer"),
    ("resnet50", "alveo-u250", "int8", 32, "infer"),
    ("mobilenet_v2", "edge-tpu", "int8", 1, "infer"),
]


def cli_s(model: str, device: str, precision: str, batch: int, mode: str) -> float:
    t0 = time.perf_counter()
    steps = ["--steps", "20"] if mode == "train" else []
    subprocess.run([sys.executable, "-m", "accelsim.cli", "simulate", model, "--hw", device,
                    "--precision", precision, "--batch", str(batch), "--mode", mode, "--json",
                    *steps], check=True, capture_output=True)
    return time.perf_counter() - t0


def estimate_s(model: str, device: str, precision: str, batch: int, mode: str) -> float:
    graph, profile = build_model(model), load_profile(device)
    estimate(graph, profile, batch, precision, mode)  # warm caches
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        estimate(graph, profile, batch, precision, mode)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    lines = ["| model | device | precision | batch | mode | `accelsim simulate --json` (s) "
             "| estimate in-process (s) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for case in CASES:
        lines.append("| " + " | ".join(map(str, case)) +
                     f" | {cli_s(*case):.3f} | {estimate_s(*case):.4f} |")
    report = "\n".join(lines)
    print(report)
    if "--write" in sys.argv:
        RESULTS.write_text(
            "# `accelsim simulate` speed, one device\n\n"
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python "
            f"{platform.python_version()}, with `python benchmarks/speed/simulate_speed.py "
            f"--write`."
            "\nThe command column includes interpreter start-up and imports.\n\n"
            + report + "\n")


if __name__ == "__main__":
    main()
