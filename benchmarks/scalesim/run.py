"""The SCALE-Sim parity harness: accelsim's systolic SRAM model vs SCALE-Sim v3, one entry.

    python benchmarks/scalesim/run.py parity [--run] [--write] [--check-stateless]
        [--check-whole NET_SIZE_FLOW] [--layers CAP_S [--budget S] [--fast] [--mem-cap-gb GB]]
        the comparison report, results/scalesim_parity.md (parity.py; --run, --layers and the
        checks run SCALE-Sim where its results are not cached in results/scalesim_cache/)
    python benchmarks/scalesim/run.py equivalence [--cached] [--random] [--small N]
        [--whole KEY]
        evidence that the patched SCALE-Sim (fast.py) writes the original's reports,
        results/scalesim_cache/equivalence.csv (equivalence.py)
    python benchmarks/scalesim/run.py jobs [--fast] < jobs.json
        SCALE-Sim on JSON jobs, in SCALE-Sim's own Python (jobs.py; what the others call)

`run.py SUBCOMMAND --help` lists each one's options. A subcommand's module is imported only
when it runs: `jobs` needs neither accelsim nor pandas, the others not SCALE-Sim.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim

SUBCOMMANDS = {"parity": "benchmarks.scalesim.parity",
               "equivalence": "benchmarks.scalesim.equivalence",
               "jobs": "benchmarks.scalesim.jobs"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in SUBCOMMANDS:
        print(__doc__, file=sys.stdout if argv[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
