"""Fuzzing helpers (not collected as tests): bad-input cases for the command line, built from
mutated built-in data files and argument lists, and the check that classifies what the CLI did
with each. `tests/properties/test_fuzz.py` draws a few hundred through hypothesis;
`benchmarks/fidelity/fuzz.py` runs 10,000+ from seeds (with tests/ on its sys.path, as the package
`fuzzing`: hence the relative imports inside; the tests import it as `tests.fuzzing`).

    case = make_case(RandomPicker(random.Random(7)))        # deterministic under a seed
    outcome = run_case(case, tmp_dir)                        # Outcome(kind, detail, ...)
"""
