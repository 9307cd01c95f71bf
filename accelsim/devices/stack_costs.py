"""How a software stack changes a device class model's cost rows: the ops it fuses, the weight
casts (autocast) and layout transposes it adds, the efficiency modifiers it applies (capped at
peak), the host's kernel-issue wait, and the fields a class running an ahead-of-time compiled
graph refuses.

The stack itself (schema, loading, resolving a name) is `software`.
"""

from __future__ import annotations

import numpy as np

from accelsim.devices.mapping import FUSION_GROUP_OPS, fused_rows
from accelsim.errors import ConfigError
from accelsim.formats import get_format
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Table
from accelsim.workload.ops import OpKind
from accelsim.workload.work import MASTER_WEIGHT_BYTES


def stack_fused_rows(work: Table, stack: SoftwareStack,
                     on_engine: np.ndarray | None = None) -> np.ndarray:
    """Rows of the work table `stack` fuses into their producer (`mapping.fused_rows` over the
    op groups of its `graph.fuses`; none when it fuses nothing)."""
    if not stack.fuses:
        return np.zeros(len(work), dtype=bool)
    ops = frozenset().union(*(FUSION_GROUP_OPS[g] for g in stack.fuses))
    return fused_rows(work, on_engine, ops)


def layout_conversions(work: Table, stack: SoftwareStack,
                       on_matrix_engine: bool) -> np.ndarray:
    """Layout conversions (NCHW <-> NHWC transposes) per work row: the stack's count per
    convolution, on conv rows whose GEMMs run on the matrix engine (tensor cores want NHWC)."""
    if not on_matrix_engine or stack.layout_conversions_per_conv == 0:
        return np.zeros(len(work))
    conv = np.asarray(work["op"]) == OpKind.CONV2D.value
    return np.where(conv, stack.layout_conversions_per_conv, 0.0)


# ---- TPU, FPGA and NPU: classes that run a graph compiled ahead of time ----------------------


def compiled_stack(stack: SoftwareStack, device_class: str) -> SoftwareStack:
    """`stack`, checked for a TPU / FPGA / NPU class model, refusing the fields such a class
    cannot use: its compiler quantises or casts the weights once, ahead of time (no autocast
    `graph.weight_casts`), and lays tensors out in the engine's own format (no
    `graph.layout_conversions_per_conv`). ConfigError naming the stack file, field and value."""
    src = stack.source or f"software stack '{stack.name}'"
    why = (f"a {device_class} runs a graph compiled ahead of time; set it to 0 / false or drop "
           f"'{device_class}' from the stack's classes")
    if stack.weight_casts:
        raise ConfigError(src, "graph.weight_casts", True, f"no autocast casts on a "
                          f"{device_class} (weights are converted once, at compile time): {why}")
    if stack.layout_conversions_per_conv > 0:
        raise ConfigError(src, "graph.layout_conversions_per_conv",
                          stack.layout_conversions_per_conv,
                          f"no NCHW/NHWC transposes on a {device_class} (the compiler lays "
                          f"tensors out for the engine): {why}")
    return stack


def capped_factor(stack: SoftwareStack, device_class: str, modifier: str,
                  class_factor: float = 1.0) -> float:
    """A class model's efficiency `class_factor` times the stack's `modifier` ("tensor_core",
    "cuda_core", "dram_bandwidth") on `device_class`, capped at 1: a stack cannot lift a unit
    above its peak."""
    return min(class_factor * stack.modifier(modifier, device_class), 1.0)


def host_issue_wait_s(stack: SoftwareStack, device_class: str, kernels: np.ndarray,
                      busy_s: np.ndarray) -> np.ndarray:
    """Per row, the time a TPU / FPGA / NPU waits on its host to issue `kernels` kernels: the
    stack's `host.per_kernel_us.<class>` on this host (absent: none) beyond the row's own
    `busy_s`, as on a GPU (issue overlaps the device's work), s."""
    per_kernel_s = stack.per_kernel_s.get(device_class, 0.0) * stack.host_scale
    return np.maximum(np.asarray(kernels, float) * per_kernel_s - busy_s, 0.0)


def amp_weight_casts(work: Table, precision: str, weight_casts: bool) -> np.ndarray:
    """Cast kernels per row: a stack with `weight_casts` (autocast) below 32 bits casts each
    fp32 master weight to the compute precision once per forward (one kernel per weighted
    matmul row). NB: a compiled engine folds the casts into its prepared weights."""
    if not weight_casts or get_format(precision).bytes_per_element >= MASTER_WEIGHT_BYTES:
        return np.zeros(len(work))
    forward = np.asarray(work["phase"]) == "forward"
    weighted = np.asarray(work["matmul"], dtype=bool) & (np.asarray(work["weight_bytes"]) > 0)
    return (forward & weighted).astype(float)
