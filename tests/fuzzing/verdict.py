"""What the command line did with a fuzz case, judged against the README's promise: exit 0
with finite, in-range figures, or exit 2 with one line on stderr; never a traceback.

    verdict = judge(case, code, out, err, warned)    # Verdict("answered", "")
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

ANSWERED, CLEAN, INTERNAL, NONSENSE, MESSY, HANG = (
    "answered", "clean error", "internal error", "nonsense", "messy error", "hang")
OUTCOMES = (ANSWERED, CLEAN, INTERNAL, NONSENSE, MESSY, HANG)
BAD = (INTERNAL, NONSENSE, MESSY, HANG)

# NB: a sanity ceiling on any figure, not a physical one: the largest legitimate output
# (FLOPs of llama2-70b at the largest batch and sequence) is ~1e25; beyond 1e30 is overflow.
ABSURD = 1e30
_FRACTION_WORDS = ("fraction", "utilization", "efficiency")
# Signed by definition: validate's relative error of a prediction (predicted / measured - 1).
_SIGNED_KEYS = ("error",)
_POSITIVE_KEYS = ("throughput_samples_per_s", "latency_s", "step_time_s", "run_time_s")
# NB: 65,536 devices at the 1 MW ceiling of a device's power, and some: beyond is overflow.
MAX_POWER_W = 1e11
_NONFINITE_TEXT = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # one of OUTCOMES
    detail: str  # why, for the reproducer list


def number_problems(obj: Any, path: str = "") -> list[str]:
    """Figures in a JSON document that no input should produce: NaN or infinite (json.loads
    reads NaN and Infinity as floats), negative, absurdly large, a fraction outside [0, 1], a
    zero throughput or latency; and an internal error reported in a row."""
    out: list[str] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += number_problems(value, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(obj, list):
        for i, value in enumerate(obj):
            out += number_problems(value, f"{path}[{i}]")
        return out
    if isinstance(obj, str):
        return [f"{path} = {obj!r} (an internal error in a row)"] if "internal error" in obj \
            else []
    if not isinstance(obj, int | float) or isinstance(obj, bool):
        return out
    key = path.rsplit(".", 1)[-1]
    if not math.isfinite(obj):
        out.append(f"{path} = {obj}")
    elif obj < 0 and key not in _SIGNED_KEYS:
        out.append(f"{path} = {obj} < 0")
    elif obj > ABSURD:
        out.append(f"{path} = {obj:g} is absurd")
    elif any(w in path for w in _FRACTION_WORDS) and obj > 1 + 1e-9:
        out.append(f"{path} = {obj} > 1")
    elif key in _POSITIVE_KEYS and obj == 0:
        out.append(f"{path} = 0")
    elif key.endswith("_w") and obj > MAX_POWER_W:
        out.append(f"{path} = {obj:g} W is absurd")
    return out


def record_problems(doc: Any) -> list[str]:
    """Figures of one result record that contradict each other: a fit with more memory needed
    than there is, a throughput that is not samples / run time."""
    out: list[str] = []
    if not isinstance(doc, dict):
        return out
    mem = doc.get("memory") or {}
    need, have = mem.get("required_bytes"), mem.get("capacity_bytes")
    if mem.get("fits") and isinstance(need, int | float) and isinstance(have, int | float) \
            and need > have * (1 + 1e-9):
        out.append(f"memory.fits with {need:g} B needed > {have:g} B")
    samples, run_s = doc.get("samples"), doc.get("run_time_s")
    thr = doc.get("throughput_samples_per_s")
    if doc.get("steps") and all(isinstance(x, int | float) and x > 0
                                for x in (samples, run_s, thr)) \
            and abs(thr - samples / run_s) > 1e-6 * thr:
        out.append(f"throughput {thr:g} != samples / run time = {samples / run_s:g}")
    return out


def _json_problems(out: str) -> list[str]:
    try:
        doc = json.loads(out)
    except ValueError as err:
        return [f"stdout is not JSON: {err}"]
    return number_problems(doc) + record_problems(doc)


def _one_line(err: str) -> bool:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return len(lines) == 1 and "Traceback" not in err


def judge(argv: list[str], damaged: tuple[str, ...], code: int | None, out: str, err: str,
          warned: list[str]) -> Verdict:
    """The outcome of one run. `code` None: an exception escaped `main`; `warned`: warnings
    (numpy overflow, division by zero) raised during the run."""
    if code is None or code == 70 or "Traceback" in out + err:
        return Verdict(INTERNAL, (err.strip().splitlines() or ["(no message)"])[-1][:300])
    if code == 0:
        problems = _json_problems(out) if "--json" in argv else []
        if "--json" not in argv and _NONFINITE_TEXT.search(out):
            problems.append("nan or inf in the text output")
        problems += [f"warning: {w}" for w in warned]
        if problems:
            return Verdict(NONSENSE, "; ".join(problems[:3])[:300])
        return Verdict(ANSWERED, "")
    if code == 2 and _one_line(err):
        line = err.strip()
        if damaged and not any(name in line for name in damaged) and "sources" not in line:
            return Verdict(CLEAN, "does not name the damaged file: " + line[:200])
        return Verdict(CLEAN, "")
    return Verdict(MESSY, f"exit {code}: " + " | ".join(err.strip().splitlines()[:4])[:300])
