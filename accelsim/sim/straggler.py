"""The slowest of N accelerators sets the pace of data-parallel training.

Accelerators of one SKU do not run equally fast: under the same power cap their sustained
clocks differ from die to die (leakage, cooling position), so the same kernels take a few
percent longer on some than on others [SINHA22]. A synchronous data-parallel step (and with
gradient accumulation, a group of micro-steps) ends when the slowest device has made its
gradients, so N devices run at the pace of the slowest of N draws, while a 1-device run
measures a typical one. The spread is persistent (a property of each die), so accumulation
does not average it away.

Model: device i of N runs each step `1 + spread x z_i` times as long as the nominal device,
z_i = E[Z_(i:N)], the expected i-th order statistic of N standard normal draws (closed form
for N = 2: -/+ 1/sqrt(pi)); the slowest runs 1 + spread x E[max of N]. `spread` (relative
standard deviation of a device's step time) is per device class, fitted
(`hw_profiles/efficiency/collectives.toml`, `fitted.device_speed_spread.<class>`; fit and
held-out error: benchmarks/results/collective_fidelity.md). A class without a fitted value
gets none (0) and the run says so. NB: the scaling rows cannot tell this apart from other
losses that grow with N as E[max] does (host sharing, per-step jitter: that one accumulation
would average away, and the rows show it does not); its held-out error is the evidence.

    factors = device_slowdowns(8, 8, 0.03)   # ascending; factors[-1] = 1 + 0.03 x 1.4236

[SINHA22] P. Sinha et al., "Not All GPUs Are Created Equal: Characterizing Variability in
  Large-Scale, Accelerator-Rich Systems", SC22 (recalled, not in shared/reference: per-GPU
  performance variation within one SKU under power management; the mechanism only, none of
  its figures is used here).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from accelsim.errors import ConfigError
from accelsim.profiles.efficiency import load_efficiency
from accelsim.sim.costs import PhaseCost

MAX_SPREAD = 0.2  # NB: beyond this a normal draw below -1/spread (a negative time) is not rare
_Z = np.linspace(-12.0, 12.0, 24_001)  # NB: quadrature grid; tails beyond 12 sigma dropped
_PDF = np.exp(-0.5 * _Z**2) / math.sqrt(2.0 * math.pi)
_CDF = 0.5 * (1.0 + np.array([math.erf(x / math.sqrt(2.0)) for x in _Z]))


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


@lru_cache(maxsize=64)
def expected_order_stats(n: int) -> tuple[float, ...]:
    """E[Z_(i:n)] for i = 1..n, ascending: expected sorted values of n standard normal draws,
    by quadrature of n!/((i-1)!(n-i)!) z Phi^(i-1) (1 - Phi)^(n-i) phi."""
    if n < 1:
        raise ValueError(f"need at least one draw, not {n}")
    lo, hi = _log(_CDF), _log(1.0 - _CDF)
    out = []
    for i in range(1, n + 1):
        log_c = math.lgamma(n + 1) - math.lgamma(i) - math.lgamma(n - i + 1)
        with np.errstate(invalid="ignore"):  # 0 x log 0 at the grid ends
            dens = np.nan_to_num(np.exp(log_c + (i - 1) * lo + (n - i) * hi)) * _PDF
        out.append(float(np.trapezoid(_Z * dens, _Z)))
    return tuple(out)


@lru_cache(maxsize=64)
def expected_max(n: int) -> float:
    """E[max of n standard normal draws] (0 for n = 1), by quadrature of z n Phi^(n-1) phi."""
    if n < 1:
        raise ValueError(f"need at least one draw, not {n}")
    with np.errstate(invalid="ignore"):
        cdf_pow = np.nan_to_num(np.exp((n - 1) * _log(_CDF)))
    return float(np.trapezoid(_Z * n * cdf_pow * _PDF, _Z))

SPREAD_RANGE = f"expected a relative spread in [0, {MAX_SPREAD})"


def is_spread(value: object) -> bool:
    """Whether `value` is a device speed spread the model takes: a number in [0, MAX_SPREAD)."""
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and 0.0 <= value < MAX_SPREAD)


def device_slowdowns(n_local: int, n_total: int, spread: float) -> tuple[float, ...]:
    """Step-time factor of each of the `n_local` simulated devices, ascending.

    One node of a multi-node run is simulated; it stands for the node holding the slowest of
    all `n_total` devices. NB: its other devices take one node's order statistics."""
    if not is_spread(spread):
        raise ValueError(f"device speed spread {spread!r}: {SPREAD_RANGE}")
    if n_local < 1 or n_total < n_local:
        raise ValueError(f"devices: {n_local} simulated of {n_total} in all")
    if spread == 0.0:
        return (1.0,) * n_local
    z = list(expected_order_stats(n_local))
    if n_total > n_local:
        z[-1] = expected_max(n_total)
    return tuple(1.0 + spread * x for x in z)


def class_spread(profile: Any) -> tuple[float, str]:
    """The fitted spread of `profile`'s device class, and one line saying what it rests on
    (0 and the line saying so for a class without a fitted value)."""
    device_class = getattr(profile, "device_class", "unknown")
    value = load_efficiency("collectives").get(f"fitted.device_speed_spread.{device_class}")
    if value is None:
        return 0.0, (f"device speed spread of class '{device_class}' not known: every device "
                     "taken as fast as the nominal one (no slowest-device loss)")
    if not is_spread(value):
        raise ConfigError("hw_profiles/efficiency/collectives.toml",
                          f"fitted.device_speed_spread.{device_class}", value, SPREAD_RANGE)
    return float(value), (f"slowest of the devices sets each synchronised step: step-time "
                          f"spread {value:.2%} between devices of class '{device_class}' "
                          "(fitted, hw_profiles/efficiency/collectives.toml)")


def slowed(cost: PhaseCost, factor: float) -> PhaseCost:
    """`cost` on a device `factor` times slower (or faster, below 1): times and energies scaled
    alike (NB: constant power, as for dies held at the same power cap; over one node's devices
    the factors average 1, so the node's energy is unchanged)."""
    if factor == 1.0:
        return cost
    return replace(cost, forward_s=cost.forward_s * factor,
                   backward_s=cost.backward_s * factor,
                   optimizer_s=cost.optimizer_s * factor,
                   forward_j=cost.forward_j * factor, backward_j=cost.backward_j * factor,
                   optimizer_j=cost.optimizer_j * factor,
                   bucket_ready_s=tuple(t * factor for t in cost.bucket_ready_s))
