"""Sustained clocks under the power limit (DVFS): the clock, and the voltage with it, drops until
each kernel's power fits the board's limit; time and energy follow.

    f, time_s, dyn_j, stretch_s = throttle(group, compute_s, memory_s, overhead_s, die_j,
                                           offchip_j, headroom_w=tdp_w - static_w,
                                           voltage_floor=0.7)

Per kernel (a row and the rows fused into it, `group`), at a clock fraction f of the rated
(boost) clock:
- time(f)   = sum over its rows of max(compute_s / f, memory_s) + overhead_s (NB: DRAM time
  and host / launch overhead do not scale with the core clock);
- energy(f) = sum of die_j x v(f)^2 + offchip_j, with v(f) = max(f, voltage_floor) the supply
  relative to boost (NB: voltage proportional to frequency down to a floor, a linearised V-F
  curve; dynamic energy per operation goes as C V^2);
- the kernel fits when energy(f) / time(f) <= headroom_w (TDP - static power).
The clock is the highest f in [MIN_CLOCK_FRACTION, 1] that fits (bisection; power falls
monotonically as f falls). A kernel that does not fit even there (DRAM energy alone over the
headroom) is stretched at that clock until it does, as a uniform throttle would.
"""

from __future__ import annotations

import numpy as np

# NB: a bound of the search, not a device figure (profiles give no lowest clock): below any
# listed base clock, so the power limit, not this floor, sets the clock; a kernel over the
# limit even here is stretched (module docstring).
MIN_CLOCK_FRACTION = 0.05
_ITERATIONS = 40  # bisection steps: 2^-40 of the clock range


def _parts(f_row: np.ndarray, compute_s: np.ndarray, memory_s: np.ndarray,
           overhead_s: np.ndarray, die_j: np.ndarray, offchip_j: np.ndarray,
           voltage_floor: float) -> tuple[np.ndarray, np.ndarray]:
    """(time, dynamic energy) of every row at its clock fraction `f_row`."""
    v = np.maximum(f_row, voltage_floor)
    time_s = np.maximum(compute_s / f_row, memory_s) + overhead_s
    return time_s, die_j * v * v + offchip_j


def throttle(group: np.ndarray, compute_s: np.ndarray, memory_s: np.ndarray,
             overhead_s: np.ndarray, die_j: np.ndarray, offchip_j: np.ndarray,
             headroom_w: float, voltage_floor: float, capped: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(clock fraction per row, time_s per row, dynamic energy per row, stretch_s per row):
    each kernel (`group`: position of the row it ran in) at the highest clock whose power
    fits `headroom_w`; `stretch_s` (on the kernel's own row) is the time added beyond that
    when even the lowest clock does not fit. Rows not `capped` (another part's work) and
    kernels that fit at full clock keep f = 1."""
    n = len(group)
    capped = np.ones(n, dtype=bool) if capped is None else np.asarray(capped, dtype=bool)

    def excess_j(f_group: np.ndarray) -> np.ndarray:
        """Per kernel: energy - headroom x time at its clock (> 0: over the limit)."""
        t, e = _parts(f_group[group], compute_s, memory_s, overhead_s, die_j, offchip_j,
                      voltage_floor)
        return (np.bincount(group, weights=e, minlength=n)
                - headroom_w * np.bincount(group, weights=t, minlength=n))

    own = (group == np.arange(n)) & capped
    over = own & (excess_j(np.ones(n)) > 0)
    lo = np.full(n, MIN_CLOCK_FRACTION)
    hi = np.ones(n)
    if over.any():
        # only the rows of kernels over the limit take part (each kernel's sums are over the
        # same rows in the same order, so the clocks are those of a search over all rows)
        rows = over[group]
        g, terms = group[rows], (compute_s[rows], memory_s[rows], overhead_s[rows],
                                 die_j[rows], offchip_j[rows])
        for _ in range(_ITERATIONS):
            mid = (lo + hi) / 2
            t, e = _parts(mid[g], *terms, voltage_floor)
            fits = (np.bincount(g, weights=e, minlength=n)
                    - headroom_w * np.bincount(g, weights=t, minlength=n)) <= 0
            lo = np.where(fits, mid, lo)
            hi = np.where(fits, hi, mid)
    # lo fits wherever any clock in the range does; at MIN_CLOCK_FRACTION it may not
    f_group = np.where(over, lo, 1.0)
    f_row = np.where(capped, f_group[group], 1.0)
    time_s, dyn_j = _parts(f_row, compute_s, memory_s, overhead_s, die_j, offchip_j,
                           voltage_floor)
    left_j = excess_j(f_group)
    stretch_s = np.where(over & (left_j > 0), left_j / headroom_w, 0.0)
    return f_row, time_s, dyn_j, stretch_s
