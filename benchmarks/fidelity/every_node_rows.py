"""The multi-node rows of calibration_measurements.csv (BERT-Large pre-training on 4 to 32
DGX-2H, up to 512 V100s, all held out) predicted with every node simulated
(`accelsim.sim.cluster`, `every_node`) beside the one-node model (one node simulated, the
others alike, its slowest device the expected slowest of all): a check that simulating every
node with its own draws of the device spread does not lose the one-node model's fidelity.

Run: python benchmarks/fidelity/every_node_rows.py [--write]   (results/every_node_rows.md)
Both columns use `collective_fidelity.throughput` (the same cases, systems, steps and
accumulation); nothing is fitted here. The fabric is the closed forms' non-blocking one (the
rows do not describe theirs).
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from benchmarks.fidelity import multinode_rows  # noqa: E402
from benchmarks.fidelity.collective_fidelity import load_cases, throughput  # noqa: E402
from benchmarks.report_io import emit  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "every_node_rows.md"


def main() -> None:
    csv, cases = load_cases()
    one = multinode_rows.multinode_rows(cases, csv, throughput)
    every = multinode_rows.multinode_rows(cases, csv, lambda c: throughput(c, every_node=True))
    lines = ["| id | nodes | GPUs | accumulate | measured samples/s | one-node model | error | "
             "every node | error |", "|---|---|---|---|---|---|---|---|---|"]
    err_one, err_every = [], []
    for a, b in zip(one.itertuples(), every.itertuples(), strict=True):
        e1 = a.predicted_tput / a.measured_tput - 1
        e2 = b.predicted_tput / b.measured_tput - 1
        err_one.append(abs(e1))
        err_every.append(abs(e2))
        lines.append(f"| {a.id} | {a.nodes} | {a.gpus} | {a.accumulate} | "
                     f"{a.measured_tput:,.0f} | {a.predicted_tput:,.0f} | {e1:+.1%} | "
                     f"{b.predicted_tput:,.0f} | {e2:+.1%} |")
    text = "\n".join([
        "# Every node simulated, on the held-out multi-node rows", "",
        "`python benchmarks/fidelity/every_node_rows.py --write`: BERT-Large pre-training on "
        "4-32 DGX-2H (16 V100 each), the rows of `collective_fidelity.md`'s multi-node "
        "section, predicted by the one-node model and with every node simulated. Nothing "
        "fitted on them.", "",
        f"Median absolute throughput error over {len(err_one)} rows: one-node model "
        f"{median(err_one):.1%}, every node {median(err_every):.1%}.", "",
        *lines, ""])
    emit(text, RESULTS, sys.argv[1:])


if __name__ == "__main__":
    main()
