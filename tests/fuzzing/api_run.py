"""Run one Python API fuzz case in-process and judge it against the API's promise (README,
"Python"): a result whose JSON-ready figures are finite and in range, or one
`accelsim.errors.AccelsimError` whose message is one line; never another exception.

    verdict = run_api_case(api_case(RandomPicker(random.Random(5))), Path("/tmp/c5"))
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import traceback
import warnings
from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError

from .api_cases import ApiCase
from .verdict import (
    ANSWERED,
    CLEAN,
    INTERNAL,
    MESSY,
    NONSENSE,
    Verdict,
    number_problems,
    record_problems,
)


def _entry(name: str) -> Any:
    import accelsim
    from accelsim.explore.plan import make_plan
    from accelsim.explore.plan_llm import make_serving_plan
    from accelsim.explore.plan_train import make_train_plan
    from accelsim.profiles.devices import load_profile
    from accelsim.profiles.systems import load_system

    def write_trace(path: Any) -> Path:
        return accelsim.simulate("mlp", hw="t4").write_trace(path)

    own = {"make_plan": make_plan, "make_serving_plan": make_serving_plan,
           "make_train_plan": make_train_plan,
           "load_profile": load_profile, "load_system": load_system, "write_trace": write_trace}
    return own[name] if name in own else getattr(accelsim, name)


def call(case: ApiCase, folder: Path) -> Any:
    """The case's call, made in `folder` (its working directory)."""
    args, kwargs = case.call(folder)
    return _entry(case.entry)(*args, **kwargs)


def _no_nan(obj: Any) -> Any:
    """`obj` with float NaN read as None (a frame's "does not apply"), recursively."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _no_nan(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_no_nan(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # a numpy scalar
        return _no_nan(obj.item())
    return obj


def answer_problems(value: Any, echoed: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with a returned value: figures (as `verdict.number_problems`), a record
    that is not JSON-ready, a written path (relative to the working directory) that is not a
    file. `echoed`: a frame's columns that repeat the call's knobs (a sweep's point that
    failed on a bad knob still shows the value it was given)."""
    import pandas as pd

    from accelsim.api import Result
    from accelsim.explore.plan import Plan

    if isinstance(value, Result):
        doc = value.to_dict()
        try:
            json.dumps(doc, allow_nan=False)
        except (TypeError, ValueError) as err:
            return [f"to_dict() is not JSON-ready: {err}"]
        return number_problems(doc) + record_problems(doc) + _views(value)
    if isinstance(value, pd.DataFrame):
        rows = _no_nan(value.to_dict("records"))
        return number_problems([{k: v for k, v in r.items() if k not in echoed} for r in rows])
    if isinstance(value, Plan):
        return number_problems(_no_nan(value.rows))
    if isinstance(value, Path):
        return [] if value.is_file() and value.stat().st_size > 0 else [f"{value} not written"]
    return []


def _views(result: Any) -> list[str]:
    """A Result's own views (repr, the notebook's HTML, the summary, the layers, the typed
    headline) must work on whatever it answered; an exception in one is a finding."""
    for view in ("__repr__", "_repr_html_", "summary", "layers", "headline", "fits",
                 "throughput_samples_per_s", "latency_s", "bottleneck", "notes"):
        try:
            attr = getattr(result, view)
            attr() if callable(attr) else None
        except Exception as exc:  # noqa: BLE001 - a finding
            return [f"Result.{view}: {type(exc).__name__}{_where(exc)}: {exc}"[:300]]
    return []


def _where(exc: BaseException) -> str:
    """The innermost accelsim frame of a traceback, as file:line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "accelsim" in f.filename
              and "fuzzing" not in f.filename]
    f = frames[-1] if frames else None
    return f" at {f.filename.rsplit('accelsim/', 1)[-1]}:{f.lineno}" if f else ""


def run_api_case(case: ApiCase, folder: Path) -> Verdict:
    """Make the call in `folder` (created and filled first) and judge what came back.
    Output and warnings are captured; nothing escapes but KeyboardInterrupt."""
    from .run import materialise

    materialise(case, folder)
    here = os.getcwd()
    os.chdir(folder)
    value, error = None, None
    try:
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("always")
            try:
                value = call(case, folder)
            except Exception as exc:  # noqa: BLE001 - judged below
                error = exc
            problems = [] if error is not None else answer_problems(value, tuple(case.kwargs))
    finally:
        os.chdir(here)
    if error is not None:
        text = str(error)
        if not isinstance(error, AccelsimError):
            line = (text.splitlines() or [""])[0][:200]
            return Verdict(INTERNAL, f"{type(error).__name__}{_where(error)}: {line}")
        if case.must_answer:
            return Verdict(INTERNAL, f"a good call refused: {text[:200]}")
        if not text.strip() or "\n" in text.strip() or "Traceback" in text:
            return Verdict(MESSY, f"{type(error).__name__}: {text[:300]!r}")
        return Verdict(CLEAN, "")
    warned = sorted({f"{w.category.__name__}: {w.message}" for w in caught
                     if issubclass(w.category, RuntimeWarning)})
    problems += [f"warning: {w}" for w in warned]
    if any(p.startswith("Result.") for p in problems):  # a view raised: a bug, not a figure
        return Verdict(INTERNAL, problems[0])
    if problems:
        return Verdict(NONSENSE, "; ".join(problems[:3])[:300])
    return Verdict(ANSWERED, "")
