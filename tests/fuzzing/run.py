"""Draw a case of any kind, and run one in-process through `accelsim.cli.main`.

    case = make_case(RandomPicker(random.Random(11)))
    verdict = run_case(case, Path("/tmp/case11"))       # the folder is created and filled
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import warnings
from pathlib import Path

from accelsim.cli import main

from .api_cases import ApiCase, api_case
from .cases import DIR, FILE_CASES, Case
from .cli_cases import cli_case, path_case
from .mutate import Picker
from .surface_cases import SURFACE_CASES
from .verdict import Verdict, judge

# Kind of case -> weight (of 20): files 12, argument lists 6, bad paths 2.
WEIGHTS = {"profile": 4, "system": 3, "link": 1, "part": 2, "scenario": 2, "cli": 6, "path": 2}
KINDS = tuple(kind for kind, weight in WEIGHTS.items() for _ in range(weight))
# The surfaces set (`fuzz.py --surfaces`): the later file surfaces and the Python API.
SURFACES = (*SURFACE_CASES, "api")


def make_case(picker: Picker, kind: str | None = None) -> Case | ApiCase:
    """A case of `kind` (see WEIGHTS, SURFACE_CASES and "api": a Python API call), or of a
    kind drawn by weight ("surfaces": one of SURFACES, drawn evenly)."""
    if kind == "surfaces":
        kind = picker.choice(SURFACES)
    if kind == "api":
        return api_case(picker)
    if kind in SURFACE_CASES:
        return SURFACE_CASES[kind](picker)
    kind = kind or picker.choice(KINDS)
    if kind == "cli":
        return cli_case(picker)
    if kind == "path":
        return path_case(picker)
    return FILE_CASES[kind](picker)


def materialise(case: Case | ApiCase, folder: Path) -> list[str]:
    """Write the case's files (with ``{dir}`` filled in) and special paths into `folder`
    (emptied first); returns argv ready to run ([] for an API call)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in case.files.items():
        (folder / name).write_bytes(data.replace(DIR.encode(), str(folder).encode()))
    for name, what in case.special.items():
        if what == "dir":
            (folder / name).mkdir()
        elif what == "fifo" and hasattr(os, "mkfifo"):
            os.mkfifo(folder / name)
        elif what.startswith("link:"):  # a symlink to the target named after the colon
            (folder / name).symlink_to(what[5:].replace(DIR, str(folder)))
    return [] if isinstance(case, ApiCase) else case.args(folder)


def run_case(case: Case | ApiCase, folder: Path) -> Verdict:
    """Run `case` in `folder` (also the working directory, for default output files) and
    judge it. Output and warnings are captured; nothing escapes but KeyboardInterrupt."""
    if isinstance(case, ApiCase):
        from .api_run import run_api_case

        return run_api_case(case, folder)
    argv = materialise(case, folder)
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(folder)
    try:
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                code: int | None = main(argv)
            except Exception as exc:  # noqa: BLE001 - an escape from main is a finding
                code = None
                err.write(f"escaped main: {type(exc).__name__}: {exc}\n")
    finally:
        os.chdir(here)
    warned = sorted({f"{w.category.__name__}: {w.message}" for w in caught
                     if issubclass(w.category, RuntimeWarning | OverflowError)})
    return judge(argv, case.damaged, code, out.getvalue(), err.getvalue(), warned)
