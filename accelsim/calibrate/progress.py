"""calibrate's progress bar, in estimated seconds: its share done and its time left tell the
truth however unlike the steps are (a host fact takes milliseconds, an element-pass sweep
seconds).

Every step is named up front with a kind and a prior cost (seconds on the reference host,
`STEP_PRIOR_S`); the bar's total is their sum. As steps finish, each unfinished step's cost is
re-estimated: a kernel case timed in an earlier pass costs what it took then (the passes time
the same cases), any other step its prior times the ratio of measured to prior seconds of the
finished steps of its kind (so a host twice as slow as the reference shows twice the time
left after its first steps). The bar shows "about N left" from those estimates, never tqdm's
rate over unlike steps.

    with Progress(enabled=True) as bar:
        bar.add("stream", "fixed", 1.5)
        bar.add(("numpy", "gemm_1x1024x4096", "fp32", 1), "numpy", 0.4, same_as=(...))
        bar.begin("stream", "memory stream"); ...; bar.end("stream")
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tqdm import tqdm

RESOLUTION = 1000  # bar units: thousandths of the estimated whole


@dataclass
class _Step:
    kind: str
    prior_s: float
    same_as: Any = None  # an earlier step timing the same work (an earlier pass)
    took_s: float | None = None


class Progress:
    """A bar over named steps (`add`, then `begin`/`end` each); `enabled` False draws
    nothing but still keeps the times (`took_s`). The bar is made on entering the context."""

    def __init__(self, enabled: bool, clock: Any = time.perf_counter) -> None:
        self.enabled, self.clock = enabled, clock
        self.steps: dict[Any, _Step] = {}
        self._bar: tqdm | None = None
        self._started: tuple[Any, float] | None = None

    def add(self, key: Any, kind: str, prior_s: float, same_as: Any = None) -> None:
        """Name a step to come, with its kind and prior cost in seconds."""
        self.steps[key] = _Step(kind, max(prior_s, 1e-6), same_as)

    def begin(self, key: Any, description: str) -> None:
        if key not in self.steps:
            raise KeyError(f"progress step {key!r} was not added")
        self._started = (key, self.clock())
        if self._bar is not None:
            self._bar.set_description(description, refresh=False)
            self._draw()

    def end(self, key: Any) -> None:
        started = self._started
        if started is None or started[0] != key:
            raise RuntimeError(f"progress step {key!r} ended without beginning")
        self.steps[key].took_s = self.clock() - started[1]
        self._started = None
        self._draw()

    def estimate_s(self, key: Any) -> float:
        """The step's cost: what it took, else what the work it repeats took, else its prior
        scaled by its kind's measured / prior seconds so far."""
        step = self.steps[key]
        if step.took_s is not None:
            return step.took_s
        twin = self.steps.get(step.same_as)
        if twin is not None and twin.took_s is not None:
            return twin.took_s
        done = [s for s in self.steps.values() if s.kind == step.kind and s.took_s is not None]
        if not done:
            return step.prior_s
        return step.prior_s * sum(s.took_s or 0.0 for s in done) / sum(s.prior_s for s in done)

    def left_s(self) -> float:
        """Estimated seconds of the steps not finished."""
        return sum(self.estimate_s(k) for k, s in self.steps.items() if s.took_s is None)

    def share_done(self) -> float:
        done = sum(s.took_s or 0.0 for s in self.steps.values() if s.took_s is not None)
        total = done + self.left_s()
        return done / total if total > 0 else 1.0

    def _draw(self) -> None:
        if self._bar is None:
            return
        self._bar.n = round(self.share_done() * RESOLUTION)
        self._bar.set_postfix_str(f"about {_duration(self.left_s())} left", refresh=False)
        self._bar.refresh()

    def __enter__(self) -> Progress:
        if self.enabled:
            self._bar = tqdm(total=RESOLUTION, leave=False,
                             bar_format="{desc}{percentage:3.0f}%|{bar}| {elapsed}{postfix}")
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _duration(seconds: float) -> str:
    """A time left as a person says it: 40 s, 3 min, 1 h 5 min."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


# NB: priors measured once: `accelsim calibrate` (budgets full and tiny) on the reference
# host (AMD EPYC, 2 cores, numpy on OpenBLAS), 2026-12-03; seconds per step. Another host
# rescales them by its first steps of each kind.
FIXED_PRIOR_S = {
    "full": {"facts": 0.52, "jpeg": 0.04, "rates": 0.03, "allocator": 0.22, "passes": 18.6,
             "fit": 5.0, "disk": 0.84},
    "tiny": {"facts": 0.03, "jpeg": 0.04, "rates": 0.03, "allocator": 0.37, "passes": 0.58,
             "fit": 0.24, "disk": 0.02},
}
# a kernel case's timed passes at one precision, by (kernel, precision), budget full
CASE_PRIOR_S = {
    ("gemm", "fp32"): 0.118, ("gemm", "fp16"): 0.178, ("gemm", "bf16"): 0.133,
    ("gemm", "int8"): 0.882, ("conv", "fp32"): 0.047, ("conv", "fp16"): 0.072,
    ("conv", "bf16"): 0.053, ("conv", "int8"): 0.457, ("stream", "fp32"): 0.110,
    ("stream", "fp16"): 0.240, ("stream", "bf16"): 0.121, ("stream", "int8"): 0.071,
}
OTHER_CASE_PRIOR_S = 0.09  # attention, vector ops: about 0.03-0.1 s at every precision
# NB: assumed, not measured per case: the tiny budget's cases are small (its fixed steps
# above are measured); after its first case the kind's measured / prior ratio corrects it
CASE_SCALE = {"full": 1.0, "tiny": 0.05}


def case_prior_s(budget: str, kernel: str, precision: str) -> float:
    return CASE_PRIOR_S.get((kernel, precision), OTHER_CASE_PRIOR_S) * CASE_SCALE[budget]


def plan_steps(bar: Progress, budget: str, cases: list[Any], precisions: tuple[str, ...],
               passes: int, torch_precisions: tuple[str, ...] | None) -> None:
    """Name every step of a calibration on `bar`: the host's, then numpy's cases (each pass
    after the first costing what the one before took), the disk, then PyTorch's cases where
    it runs (`torch_precisions`; each first costing what numpy's same case took)."""
    fixed = FIXED_PRIOR_S[budget]
    for key in ("facts", "jpeg", "rates", "allocator", "passes"):
        bar.add(key, "fixed", fixed[key])
    stacks = [("numpy", precisions)] + ([("torch", torch_precisions)] if torch_precisions
                                        else [])
    for stack, precs in stacks:
        for p in range(passes):
            for case in cases:
                for prec in precs:
                    twin = ((stack, case.name, prec, p - 1) if p else
                            ("numpy", case.name, prec, 0) if stack == "torch" else None)
                    bar.add((stack, case.name, prec, p), stack,
                            case_prior_s(budget, case.kernel, prec), same_as=twin)
        bar.add((stack, "fit"), "fixed", fixed["fit"])
        if stack == "numpy":
            bar.add("disk", "fixed", fixed["disk"])
