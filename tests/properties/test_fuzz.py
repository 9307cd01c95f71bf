"""Fuzzing in CI: a few hundred generated bad inputs (damaged profiles, systems, links,
storage, datasets and scenarios; argument lists with extreme and conflicting flags; bad paths)
through the command line in-process. Each must end in exit 0 with finite, non-negative,
in-range figures, or exit 2 with one line on stderr; never an internal error or a traceback,
and in bounded time. The 10,000-case run is `benchmarks/fidelity/fuzz.py`; the new surfaces
(issue 24) and the Python API have their own kinds below and `--surfaces` there."""

import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzzing.run import run_case
from tests.fuzzing.strategies import cases
from tests.fuzzing.verdict import ANSWERED, CLEAN

pytestmark = pytest.mark.slow  # about 30 s: hundreds of simulations

CASE_LIMIT_S = 60.0  # per simulation: the "hung for over a minute"


def fuzz(examples):
    """Hypothesis settings of one fuzz test: `examples` cases, no per-example deadline (a case
    may simulate for a second), and no shrinking (re-running simulations to shrink a failure
    can take minutes; the failure prints its command line as it is). Derandomized, so CI
    runs the same cases every time (new ones come from `benchmarks/fidelity/fuzz.py --seed N`)."""
    return settings(max_examples=examples, deadline=None, derandomize=True,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "case"


def check(case, folder):
    t0 = time.perf_counter()
    verdict = run_case(case, folder)
    elapsed = time.perf_counter() - t0
    assert verdict.outcome in (ANSWERED, CLEAN), (
        f"{verdict.outcome}: {verdict.detail}\n{case.reproducer()}")
    assert elapsed < CASE_LIMIT_S * case.runs, f"{elapsed:.0f} s: {case.reproducer()}"


# Case kind -> examples in CI: damaged device profiles (run by simulate, compare, report),
# systems with one damaged file (the system, a link, storage, dataset or device), storage and
# datasets given by flag, scenarios, argument lists of every command, bad paths.
EXAMPLES = {"profile": 60, "system": 50, "part": 30, "scenario": 40, "cli": 100, "path": 30}


# The surfaces added after the first round (issue 24): ONNX models with external data,
# SCALE-Sim files, request traces, measurement CSVs, sweep stores and grids. The 5,000-case
# run is `benchmarks/fidelity/fuzz.py --surfaces`.
EXAMPLES.update({"onnx": 40, "scalesim": 30, "trace": 30, "measurements": 20, "store": 10,
                 "grid": 20})
# The Python API (issue 24 item 8): bad calls of simulate, compare, sweep, write_report,
# write_trace, the plans and the loaders must raise one AccelsimError of one line, and good
# calls with pathlib.Path must answer (`tests/fuzzing/api_cases.py`).
EXAMPLES["api"] = 80


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_bad_input_fails_cleanly_or_answers_sanely(folder, kind):
    @fuzz(EXAMPLES[kind])
    @given(case=cases(kind))
    def one(case):
        check(case, folder)

    one()
