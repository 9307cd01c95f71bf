"""Two fixed probes of this host's speed, timed beside calibration and measurement so that a
change of the host's speed between them shows (a diagnostic: nothing is scaled by it).

    probe = host_speed_probe_s()    # {"cast": s, "sgemm": s}
"""

from __future__ import annotations

import time

import numpy as np

from accelsim.calibrate.cases import Clock
from accelsim.kernels.formats import round_to_format


def host_speed_probe_s(repeats: int = 5, clock: Clock = time.process_time) -> dict[str, float]:
    """Least times by `clock`, s, of two fixed probes of this host's speed: `cast` (1 M fp32
    values rounded to bf16 and back, numpy's element loop as the narrow-float kernels run it)
    and `sgemm` (a 256^3 fp32 BLAS GEMM). NB: a diagnostic, recorded beside calibration and
    measurement so that a change of the host's speed between them shows (seen on a shared VM:
    2x over minutes with no steal time); nothing is scaled by it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 20, dtype=np.float32)
    a = rng.standard_normal((256, 256), dtype=np.float32)
    runs = {"cast": lambda: round_to_format(x, "bf16"), "sgemm": lambda: a @ a}
    out = {}
    for name, run in runs.items():
        run()
        best_s = float("inf")
        for _ in range(max(1, repeats)):
            start_s = clock()
            run()
            best_s = min(best_s, clock() - start_s)
        out[name] = best_s
    return out
