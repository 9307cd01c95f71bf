"""Run SCALE-Sim v3 on jobs given as JSON on stdin; print JSON results (one object per job).

Runs in a Python that has the `scalesim` package, in its own virtualenv:

    python3 -m venv /tmp/ssenv
    /tmp/ssenv/bin/pip install scalesim==3.0.0 "numpy<2" "pandas<2.3"

(SCALE-Sim 3.0.0 does not pin numpy, but its read buffer calls int() on a one-element array,
which numpy 2.4 rejects; the results here are from numpy 1.26.4 and pandas 2.2.3). Called
through a subprocess by `parity.py`, `random_layers.py` and `layers.py` (see
`common.scalesim_command`) and by `tests/validation/test_scalesim.py`, which write the .cfg and
topology text:

    echo '[{"cfg": "...", "topology": "...", "gemm": false}]' \\
        | python benchmarks/scalesim/run.py jobs [--fast]

Each result holds the wall time (`wall_s`) and the text of COMPUTE_REPORT, BANDWIDTH_REPORT
and DETAILED_ACCESS_REPORT. A job with `"fast": true` runs with `fast.patched()` (the same
simulation with faster memory-model methods; `--fast` sets it for every job).

Only the standard library is imported at module level (SCALE-Sim and the patch when a job
runs), so the accelsim side can read `REPORTS` from here without SCALE-Sim installed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time

REPORTS = ("COMPUTE_REPORT", "BANDWIDTH_REPORT", "DETAILED_ACCESS_REPORT")


def run(job: dict) -> dict:
    """One SCALE-Sim run in a temporary folder."""
    from scalesim.scale_sim import scalesim

    from benchmarks.scalesim import fast as scalesim_fast

    with tempfile.TemporaryDirectory(prefix="scalesim_") as folder:
        paths = {name: os.path.join(folder, name) for name in ("a.cfg", "t.csv", "l.csv")}
        for name, text in (("a.cfg", job["cfg"]), ("t.csv", job["topology"]),
                           ("l.csv", "Layer name,\n")):
            with open(paths[name], "w") as out:
                out.write(text)
        start = time.perf_counter()
        # traces are not saved (save_disk_space), so the patch keeps only what reports read
        keep = bool(job.get("keep_traces"))
        fast = scalesim_fast.patched(keep_traces=keep) if job.get("fast") \
            else contextlib.nullcontext()
        with contextlib.redirect_stdout(io.StringIO()), fast:
            sim = scalesim(save_disk_space=True, verbose=False, config=paths["a.cfg"],
                           topology=paths["t.csv"], layout=paths["l.csv"],
                           input_type_gemm=bool(job.get("gemm")))
            sim.run_scale(top_path=folder)
        result = {"wall_s": time.perf_counter() - start, "fast": bool(job.get("fast"))}
        run_dir = os.path.join(folder, sim.config.get_run_name())
        for name in REPORTS:
            with open(os.path.join(run_dir, name + ".csv")) as report:
                result[name] = report.read()
    return result


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="run.py jobs", description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="run every job with fast.patched()")
    args = ap.parse_args(argv)
    jobs = json.load(sys.stdin)
    if args.fast:
        jobs = [dict(job, fast=True) for job in jobs]
    json.dump([run(job) for job in jobs], sys.stdout)
