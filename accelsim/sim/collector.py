"""The cyclic garbage collector held off while one simulation runs.

A run allocates hundreds of thousands of small objects that live to its end (SimPy events,
one record tuple per interval), so the collector's generational passes find nothing to free
and rescan the growing record list each time: about a tenth of an epoch's CPU
(benchmarks/results/pipeline_speed.md). Reference counting still frees everything acyclic;
what cycles a run leaves are collected when it returns.

    @gc_paused
    def simulate_training(config): ...
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def gc_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` run with the cyclic collector disabled, restored to its prior state after."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_on:
                gc.enable()

    return run
