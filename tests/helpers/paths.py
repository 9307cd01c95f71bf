"""Where the tests find the repository's files, independent of the tier a test file sits in."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
REFERENCE = TESTS / "reference"
HW_PROFILES = ROOT / "hw_profiles"
WORKLOADS = ROOT / "workloads"
# The benchmarks' recorded results the two fit guards compare against
# (validation/test_stack_fit.py, validation/test_profiles_more.py), and the SCALE-Sim runner
# and runtime patch the parity tests run in SCALE-Sim's own Python (validation/test_scalesim.py,
# skipped where SCALE-Sim is not installed). Data and subprocess scripts only: no test imports
# a module from here.
BENCHMARKS = ROOT / "benchmarks"
