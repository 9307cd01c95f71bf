"""Start-up and per-point cost (issue 22, items 1 and 2): CPU seconds of whole commands and of
in-process work, each beside a fixed reference measured in the same run, as a ratio to it.

Run: python benchmarks/speed/startup.py [--repeat N] [--write LABEL]
(--write replaces the section LABEL, e.g. "before" or "after", of results/startup_speed.md).

- Whole commands, in fresh processes (`accelsim --help`, `accelsim list`, `accelsim simulate
  resnet50 --hw a100`), against `python -c "import numpy"`: CPU time (user + system) of the
  child, the median of N runs, and the heavy top-level modules each one loaded. Twice: with
  accelsim's bytecode cached (as an installed package runs; the children write it under a
  temporary PYTHONPYCACHEPREFIX, warmed by one run first), and with PYTHONDONTWRITEBYTECODE=1
  (every accelsim module compiled from source at each start, as an editable checkout runs
  where that variable is set).
- In process, against 100,000 bare SimPy timeouts: the ResNet-50 estimate on one a100 (warm,
  the graph built), and a sweep point (`accelsim.explore.run.point_row` over the points of the
  1,000-point inference sweep of `sweep_speed.py`, first 200, after one warm pass over them);
  and the whole 1,000-point sweep point by point, once, first in the process, so that every
  work table is built as its points come (the issue's "1,000 points in at most 2 s").
Each round runs the reference right before the thing measured, and a ratio is the median of
the rounds' ratios, so that a change of load between rounds moves the seconds more than the
ratios. The load average is recorded before and after; on a shared machine read the ratios,
not the seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: this checkout's accelsim

RESULTS = ROOT / "benchmarks" / "results" / "startup_speed.md"
HEAVY = ("ml_dtypes", "pandas", "matplotlib", "simpy", "onnx", "dask", "distributed", "scipy",
         "tqdm")
# The console script's body, so that the checkout's accelsim runs whether installed or not.
ENTRY = "import sys; from accelsim.cli import main; sys.exit(main(sys.argv[1:]))"
COMMANDS = {
    "accelsim --help": ["--help"],
    "accelsim list": ["list"],
    "accelsim simulate resnet50 --hw a100": ["simulate", "resnet50", "--hw", "a100"],
}
TARGET_S = {"accelsim --help": 0.15, "accelsim simulate resnet50 --hw a100": 0.3,
            "sweep point": 0.002, "resnet50 estimate, a100": 0.001,
            "1,000-point sweep, tables built as they come (one run)": 2.0}
SWEEP = {"hw": ["a100", "h100", "v100", "t4", "l4"], "precision": ["fp16", "fp32"],
         "batch": list(range(1, 101))}  # sweep_speed.py's inference sweep
SWEEP_POINTS = 200


def child_env(pycache: str | None) -> dict[str, str]:
    """The children's environment: bytecode cached under `pycache`, or (None) never written."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def child_cpu_s(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one child process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def paired(measure: Callable[[], float], reference: Callable[[], float], repeat: int
           ) -> tuple[float, float]:
    """(median seconds of `measure`, median of its ratio to `reference` run just before it)
    over `repeat` rounds, after one warm round."""
    reference(), measure()
    rounds = [(reference(), measure()) for _ in range(repeat)]
    return (statistics.median(m for _, m in rounds),
            statistics.median(m / r for r, m in rounds))


def heavy_modules(args: list[str]) -> list[str]:
    """The heavy top-level modules a command leaves loaded when it ends."""
    probe = ("import atexit, sys\n"
             f"heavy = {HEAVY!r}\n"
             "def said():\n"
             "    got = sorted({m.split('.')[0] for m in sys.modules} & set(heavy))\n"
             "    sys.__stderr__.write('HEAVY:' + ','.join(got) + '\\n')\n"
             "atexit.register(said)\n" + ENTRY.replace("; ", "\n"))
    out = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    found = re.search(r"^HEAVY:(.*)$", out.stderr, re.M)
    return found.group(1).split(",") if found and found.group(1) else []


def cpu_per_call_s(fn: Callable[[], object], calls: int) -> float:
    """Process CPU seconds per call of `fn`, over `calls` calls."""
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls


def simpy_reference() -> None:
    """The in-process reference: 100,000 bare timeouts of one SimPy process, the garbage
    collector off (its full passes scale with whatever else the process holds)."""
    import gc

    import simpy

    env = simpy.Environment()

    def ticks(env: simpy.Environment):  # type: ignore[no-untyped-def]
        for _ in range(100_000):
            yield env.timeout(1.0)

    env.process(ticks(env))
    gc.disable()
    try:
        env.run()
    finally:
        gc.enable()


def in_process(repeat: int) -> list[tuple[str, float, float]]:
    """(what, CPU s per call, ratio to the reference) for the reference, the estimate and a
    sweep point."""
    from accelsim.devices.estimate import estimate
    from accelsim.explore.grid import make_grid
    from accelsim.explore.run import point_row
    from accelsim.profiles.devices import load_profile
    from accelsim.workload.zoo import build_model

    def reference() -> float:
        return cpu_per_call_s(simpy_reference, 1)

    ref_s = statistics.median(reference() for _ in range(repeat + 1))
    out = [("100,000 SimPy timeouts (reference)", ref_s, 1.0)]
    graph, profile = build_model("resnet50"), load_profile("a100")
    out.append(("resnet50 estimate, a100", *paired(
        lambda: cpu_per_call_s(lambda: estimate(graph, profile, 64, "bf16", "infer"), 20),
        reference, repeat)))
    grid = make_grid("resnet50", SWEEP["hw"], {k: v for k, v in SWEEP.items() if k != "hw"})
    model = grid.scenario.model
    everything = grid.points()
    point_row(grid.workload, model, everything[0])  # imports and profiles, not the tables
    whole_s = cpu_per_call_s(lambda: [point_row(grid.workload, model, p) for p in everything], 1)
    out.append(("1,000-point sweep, tables built as they come (one run)", whole_s,
                whole_s / ref_s))
    points = everything[:SWEEP_POINTS]
    it = iter(points * (repeat + 2))  # the first pass warms: graphs built, profiles read
    out.append(("sweep point", *paired(
        lambda: cpu_per_call_s(lambda: point_row(grid.workload, model, next(it)), len(points)),
        reference, repeat)))
    return out


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    cpu = platform.machine()
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
    return (f"{names[0] if names else cpu}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}")


def _verdict(what: str, seconds: float) -> str:
    target = TARGET_S.get(what)
    if target is None:
        return "-"
    return f"{target * 1e3:g} ms: {'ok' if seconds <= target else 'OVER'}"


def report(repeat: int) -> str:
    load_before = load()
    with tempfile.TemporaryDirectory() as pycache:
        cached, compiled = child_env(pycache), child_env(None)
        ref_argv = [sys.executable, "-c", "import numpy"]
        ref_s = paired(lambda: child_cpu_s(ref_argv, cached), lambda: 1.0, repeat)[0]
        lines = [f"Process reference `python -c \"import numpy\"`: {ref_s:.3f} s CPU.", "",
                 "| command | CPU (s), .pyc cached | x reference | target "
                 "| CPU (s), no .pyc | heavy modules loaded |",
                 "| --- | --- | --- | --- | --- | --- |"]
        for name, args in COMMANDS.items():
            argv = [sys.executable, "-c", ENTRY, *args]
            cpu_s, ratio = paired(lambda a=argv: child_cpu_s(a, cached),
                                  lambda: child_cpu_s(ref_argv, cached), repeat)
            cold_s = paired(lambda a=argv: child_cpu_s(a, compiled), lambda: 1.0, repeat)[0]
            heavy = ", ".join(heavy_modules(args)) or "none"
            lines.append(f"| `{name}` | {cpu_s:.3f} | {ratio:.1f} "
                         f"| {_verdict(name, cpu_s)} | {cold_s:.3f} | {heavy} |")
    lines += ["", "| in process | CPU per call (ms) | x reference | target |",
              "| --- | --- | --- | --- |"]
    for what, cpu_s, ratio in in_process(repeat):
        lines.append(f"| {what} | {cpu_s * 1e3:.3f} | {ratio:.3f} "
                     f"| {_verdict(what, cpu_s)} |")
    lines += ["", f"Load average before {load_before}; after {load()}. Median of {repeat} runs."]
    return "\n".join(lines)


def write(label: str, body: str) -> None:
    """Replace (or add) the section `label` of the results file."""
    head = ("# Start-up and sweep-point speed (issue 22, items 1 and 2)\n\n"
            "Written by `python benchmarks/speed/startup.py --write LABEL`; each section is one "
            "run, its ratios against references measured in that run.\n")
    text = RESULTS.read_text() if RESULTS.exists() else head
    section = f"## {label}\n\nMeasured {time.strftime('%Y-%m-%d %H:%M')} on {machine()}.\n\n" \
              f"{body}\n"
    pattern = re.compile(rf"^## {re.escape(label)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) \
        else text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text.rstrip("\n") + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure (the median)")
    ap.add_argument("--write", metavar="LABEL", default="",
                    help="replace section LABEL of results/startup_speed.md")
    a = ap.parse_args()
    body = report(a.repeat)
    print(body)
    if a.write:
        write(a.write, body)


if __name__ == "__main__":
    main()
