"""`simulate --execute`: run the workload's kernels at the device's numeric format beside the
timing model, and feed what they compute into the estimate.

    measured, summary, note = execute_for(graph, profile, "int8")

The kernels run one sample (EXECUTE_BATCH) with seed 0, in fp32 and in the format the device's
matrix units compute in (`precision.compute_precision`), measured per op by
`accelsim.kernels.measure`; `accelsim.devices.sparsity` turns the measured zeros into energy
(devices that gate zero operands) and time (2:4 sparse weights on sparse tensor cores). NB: one
sample: every op but batchnorm is per sample, and batchnorm's statistics are calibrated on that
sample (`execute.calibrate_batchnorm`), so the statistics hold per sample at any batch.
A model the executor refuses (too large: `execute.PARAM_LIMIT_BYTES`; an op it cannot run)
gives a note and no measurement, never an error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.precision import compute_precision
from accelsim.errors import AccelsimError
from accelsim.workload.graph import Graph

EXECUTE_BATCH = 1
EXECUTE_SEED = 0


def execute_for(graph: Graph, profile: Any, precision: str, prune: bool = False
                ) -> tuple[pd.DataFrame | None, dict[str, Any] | None, str | None]:
    """(per-op measurements or None, the run's summary or None, a note or None). `prune`:
    the device's stream runs with its conv / linear weights magnitude-pruned to 2:4 (the fp32
    reference dense), so the error includes pruning's."""
    from accelsim.kernels.measure import measure_graph

    used = compute_precision(profile, precision)[0] if profile.device_class != "null" \
        else precision
    try:
        m = measure_graph(graph, EXECUTE_BATCH, used, EXECUTE_SEED, prune)
    except AccelsimError as err:
        return None, None, f"--execute: the kernels were not run ({err})"
    summary = {"precision": m.precision, "batch": m.batch, "seed": m.seed,
               "pruned_2_4": prune, "output_error": m.output_error}
    return m.layers, summary, None


def execution_totals(layers: pd.DataFrame, ops: pd.DataFrame, dense: Any,
                     measured: Any) -> dict[str, Any]:
    """Whole-network figures of an executed run (`layers`: the estimate's layer table, `ops`:
    the measurements): input and weight sparsity weighted by the FLOPs of the forward matmul
    rows, the largest layer error, the ops whose weights are 2:4 sparse, and
    the step time and energy with and without the measured sparsity (`dense`, `measured`:
    the two `DeviceEstimate`s)."""
    fwd = layers[(layers["phase"] == "forward") & layers["matmul"].astype(bool)]
    flops = fwd["flops"].to_numpy(dtype=float)

    def weighted(col: str) -> float | None:
        v = fwd[col].to_numpy(dtype=float)
        ok = ~np.isnan(v)
        return float(np.average(v[ok], weights=flops[ok])) if ok.any() and flops[ok].sum() \
            else None

    errors = layers["output_error"].to_numpy(dtype=float)
    return {
        "input_sparsity": weighted("input_sparsity"),
        "weight_sparsity": weighted("weight_sparsity"),
        "max_layer_output_error": float(np.nanmax(errors)) if (~np.isnan(errors)).any()
        else None,
        "layers_with_2_4_weights": int(ops["weights_2_4"].sum()),
        "latency_s_dense": dense.step_time_s,
        "energy_j_per_sample_dense": dense.energy_j_per_sample,
        "time_saved_share": 1.0 - measured.step_time_s / dense.step_time_s,
        "energy_saved_share": 1.0 - measured.energy_j / dense.energy_j,
    }
