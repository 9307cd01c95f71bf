"""calibrate's progress bar (accelsim.calibrate.progress): its share and time left come from
the steps' measured seconds, not their count; a calibration names every step it runs up front
and finishes every one (the bar ends at 100%, where it once stopped at 67% when PyTorch was
asked for but not importable)."""

from __future__ import annotations

import pytest

from accelsim.calibrate import progress as progress_mod
from accelsim.calibrate import run as calibrate_run
from accelsim.calibrate.progress import Progress


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _run(bar: Progress, clock: Clock, key, seconds: float) -> None:
    bar.begin(key, str(key))
    clock.t += seconds
    bar.end(key)


def test_a_repeated_case_costs_what_it_took_before() -> None:
    clock = Clock()
    bar = Progress(False, clock)
    bar.add(("numpy", "gemm", 0), "numpy", 1.0)
    bar.add(("numpy", "gemm", 1), "numpy", 1.0, same_as=("numpy", "gemm", 0))
    _run(bar, clock, ("numpy", "gemm", 0), 3.0)
    assert bar.left_s() == pytest.approx(3.0)  # not the prior of 1 s
    assert bar.share_done() == pytest.approx(0.5)


def test_unmeasured_steps_scale_with_their_kind() -> None:
    clock = Clock()
    bar = Progress(False, clock)
    for i in range(4):
        bar.add(("case", i), "numpy", 0.5)
    bar.add("disk", "fixed", 1.0)
    _run(bar, clock, ("case", 0), 1.0)  # this host: twice the prior
    # three cases left at 2 x 0.5 s, the disk at its prior (no fixed step measured yet)
    assert bar.left_s() == pytest.approx(3 * 1.0 + 1.0)
    for i in range(1, 4):
        _run(bar, clock, ("case", i), 1.0)
    _run(bar, clock, "disk", 0.2)
    assert bar.left_s() == 0.0 and bar.share_done() == 1.0


def test_a_step_must_be_named_and_begun() -> None:
    bar = Progress(False)
    with pytest.raises(KeyError):
        bar.begin("nothing", "")
    bar.add("a", "fixed", 1.0)
    with pytest.raises(RuntimeError):
        bar.end("a")


def test_a_calibration_runs_every_step_it_names(tmp_path, monkeypatch) -> None:
    seen: list[Progress] = []
    real_exit = Progress.__exit__

    def keep(self, *exc):
        seen.append(self)
        return real_exit(self, *exc)

    monkeypatch.setattr(progress_mod.Progress, "__exit__", keep)
    calibrate_run.calibrate(tmp_path / "cal", budget="tiny", progress=False)
    (bar,) = seen
    assert bar.steps and all(s.took_s is not None for s in bar.steps.values())
    assert bar.share_done() == 1.0
    torch_steps = [k for k in bar.steps if isinstance(k, tuple) and k[0] == "torch"]
    assert bool(torch_steps) == calibrate_run._torch_importable()
