"""The points of a sweep: the cartesian product of every knob given as a list.

    grid = make_grid("resnet50", ["a100", "h100"], {"batch": [1, 2, 4], "precision": "bf16"})
    len(grid), grid.swept          # 6, ["hardware", "batch"]
    grid.points()[0].knobs         # {"batch": 1, "precision": "bf16"}
    expand_axis("batch", "1,2,4,...,32")   # [1, 2, 4, 8, 16, 32]

A knob given as a list, tuple, range or array is an axis; any other value is fixed. Points come
in a fixed order (hardware outermost, then the knobs in the order given, the last one varying
fastest), and each has a key naming everything it depends on, stable from run to run and
machine to machine, so a resume store can tell finished points from new ones.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelsim.arguments import plain_scalar
from accelsim.errors import AccelsimError, quoted
from accelsim.numbers import shown
from accelsim.profiles.hardware import resolve_hardware
from accelsim.sim.knobs import KNOBS, check_range, knob_names, parse_knob_values
from accelsim.workload.scenario import Scenario, resolve_workload

MAX_POINTS = 1_000_000  # NB: a ceiling on one sweep (about 3 h of inference points on 1 core)
_MAX_RUN_TERMS = 4 * MAX_POINTS
ELLIPSIS = "..."


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: its place in the grid, its hardware and every knob set."""

    index: int
    hardware: str
    knobs: dict[str, Any]
    key: str


@dataclass(frozen=True)
class Grid:
    """The axes (hardware first) and the fixed knobs of a sweep over `workload`."""

    workload: str | Scenario
    scenario: Scenario
    axes: dict[str, list[Any]]
    fixed: dict[str, Any]

    def __len__(self) -> int:
        return math.prod(len(values) for values in self.axes.values())

    @property
    def knob_columns(self) -> list[str]:
        """The columns naming a point: "hardware", then every knob given, in order."""
        return list(self.axes) + list(self.fixed)

    @property
    def swept(self) -> list[str]:
        """The axes with more than one value."""
        return [name for name, values in self.axes.items() if len(values) > 1]

    def points(self) -> list[Point]:
        """Every point, in grid order (the last axis varies fastest)."""
        names = list(self.axes)
        workload = workload_key(self.workload)
        out = []
        for index, values in enumerate(itertools.product(*self.axes.values())):
            knobs = dict(zip(names, values, strict=True))
            hardware = knobs.pop("hardware")
            knobs.update(self.fixed)
            out.append(Point(index, hardware, knobs, point_key(workload, hardware, knobs)))
        return out


def workload_key(workload: str | Scenario) -> str:
    """A stable text naming a workload: its name or path, or the whole scenario's repr."""
    return workload if isinstance(workload, str) else f"scenario:{workload!r}"


def point_key(workload: str, hardware: str, knobs: dict[str, Any]) -> str:
    """The key of one point: canonical JSON of what it depends on (knobs sorted by name)."""
    return json.dumps({"workload": workload, "hardware": hardware,
                       "knobs": dict(sorted(knobs.items()))}, sort_keys=True,
                      separators=(",", ":"), default=repr)


def make_grid(workload: str | Scenario, hw: str | Sequence[str],
              knobs: dict[str, Any]) -> Grid:
    """The grid of `hw` (a list, or names separated by commas) and `knobs`. An unknown
    workload, hardware or knob name, an empty axis and a grid over `MAX_POINTS` raise
    `AccelsimError`; knob values are checked point by point (a point that fails records its
    error)."""
    scenario = workload if isinstance(workload, Scenario) else resolve_workload(workload)
    names = knob_names(scenario.model)
    unknown = [name for name in knobs if name not in names]
    if unknown:
        raise AccelsimError(f"unknown knob {quoted(unknown[0])}; choose one of: {', '.join(names)}")
    hardware = [h.strip() for h in hw.split(",") if h.strip()] if isinstance(hw, str) \
        else [str(h) for h in _values("hw", hw)]
    for name in dict.fromkeys(hardware):
        resolve_hardware(name)  # an unknown name is a typo: say so before running anything
    axes: dict[str, list[Any]] = {"hardware": _nonempty("hw", hardware)}
    fixed: dict[str, Any] = {}
    for name, value in knobs.items():
        if _is_axis(value):
            axes[name] = _nonempty(name, _values(name, value))
            _check_range(name, axes[name])
        else:
            fixed[name] = plain_scalar(value)
    size = math.prod(len(values) for values in axes.values())
    if size > MAX_POINTS:
        shape = " x ".join(f"{len(v)} {k}" for k, v in axes.items())
        raise AccelsimError(f"a sweep of {size:,} points ({shape}) is over the limit of "
                            f"{MAX_POINTS:,}: sweep fewer values")
    return Grid(workload, scenario, axes, fixed)


def _check_range(name: str, values: list[Any]) -> None:
    """Every number of a knob's axis inside the knob's range, before anything runs (a value no
    point could take, such as batch -1, would fail every point it is in)."""
    knob = KNOBS.get(name)
    if knob is None or knob.kind not in (int, float):
        return
    for v in values:
        if isinstance(v, int | float) and not isinstance(v, bool):
            check_range(name, v, knob.low, knob.high)


def _is_axis(value: Any) -> bool:
    return isinstance(value, list | tuple | range) or getattr(value, "ndim", 0) > 0  # arrays


def _values(name: str, value: Any) -> list[Any]:
    if hasattr(value, "tolist"):  # a numpy array
        value = value.tolist()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise AccelsimError(f"{name}: give a list of values, not {value!r}")
    return [plain_scalar(v) for v in value]


def _nonempty(name: str, values: list[Any]) -> list[Any]:
    """`values`, which must be some and each once (a repeat would run the same points twice)."""
    if not values:
        raise AccelsimError(f"{name}: an empty list of values gives no points")
    seen: set[str] = set()
    for v in values:
        key = repr(v)
        if key in seen:
            raise AccelsimError(f"{name}: {shown(v)} is listed twice; give each value once")
        seen.add(key)
    return values


def expand_axis(name: str, text: str, model: str | None = None) -> list[Any]:
    """The values of knob `name` in `text`: "a,b,c", parsed to the knob's type. A number
    knob may elide a regular run: "8,16,...,64" steps by 8, "1,2,4,...,1024" doubles (the
    values before "..." set the step or, if their differences vary, the ratio), up to and
    including the last value when the run lands on it."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if ELLIPSIS not in parts:
        return parse_knob_values(name, text, model)
    kind = KNOBS[name].kind if name in KNOBS else int
    at = parts.index(ELLIPSIS)
    if kind not in (int, float) or parts.count(ELLIPSIS) > 1 or at < 2 or at != len(parts) - 2:
        raise AccelsimError(f"{name} {text!r}: '...' goes between two or more numbers that "
                            "set the step and the last number, e.g. 1,2,4,...,1024")
    head = parse_knob_values(name, ",".join(parts[:at]), model)
    end = parse_knob_values(name, parts[-1], model)[0]
    return head[:-1] + _run(name, text, head, end)


def _run(name: str, text: str, head: list[Any], end: Any) -> list[Any]:
    """The run from head[-1] to `end`, by the step (or ratio) `head` shows."""
    steps = {_sig(b - a) for a, b in itertools.pairwise(head)}
    ratios = {_sig(b / a) for a, b in itertools.pairwise(head) if a != 0}
    geometric = len(steps) > 1
    if geometric and (len(ratios) != 1 or min(head) * max(head) <= 0 or head[0] * end <= 0):
        raise AccelsimError(f"{name} {text!r}: the values before '...' must differ by one step "
                            "or grow by one ratio, and a ratio keeps one sign")
    if not geometric and steps == {0}:
        raise AccelsimError(f"{name} {text!r}: the values before '...' must differ")
    ascending = head[-1] > head[0]
    if (end < head[-1]) if ascending else (end > head[-1]):
        raise AccelsimError(f"{name} {text!r}: {end} is not ahead of {head[-1]} in this run")
    ratio, step = (ratios.pop(), 0) if geometric else (1.0, steps.pop())
    if geometric and ratio == 1.0:  # 1e9,1e9+1,1e9+3: steps differ, the ratio rounds to 1
        raise AccelsimError(f"{name} {text!r}: the values before '...' grow by a ratio too "
                            "close to 1 to reach the last value")
    run: list[Any] = []
    for k in itertools.count():
        if k > _MAX_RUN_TERMS:  # NB: a guard; rounding can repeat values, never this often
            raise AccelsimError(f"{name} {text!r}: the run does not reach {end}")
        # NB: each value from the first of the run, so float error does not accumulate.
        value = head[-1] * ratio ** k if geometric else head[-1] + k * step
        value = round(value) if isinstance(head[0], int) else round(value, 12)
        if (value > end) if ascending else (value < end):
            return run
        if len(run) == MAX_POINTS:
            raise AccelsimError(f"{name} {text!r}: more than {MAX_POINTS:,} values")
        if not run or value != run[-1]:
            run.append(value)
    raise AssertionError("unreachable")


def _sig(x: float) -> float:
    """`x` to 9 significant digits: steps read off decimal text compare equal."""
    return float(f"{x:.9g}")
