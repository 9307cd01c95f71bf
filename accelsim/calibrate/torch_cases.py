"""The calibration cases run by PyTorch instead of the numpy kernels: a second software stack.

    timer = torch_timer()                        # ImportError where torch is not installed
    seconds = timer(case, "bf16", repeats=5)

Each case's op (`cases.kernel_cases`) maps onto the `torch.nn.functional` call of the same
shapes and attributes; the tensors are random, in the precision's dtype (fp32 or bf16, the two
formats PyTorch's CPU kernels compute in natively). Timed like the numpy cases: one warm-up,
then the least of several runs, under `torch.inference_mode`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual name

from accelsim.calibrate.cases import Case, Clock, least_time_s
from accelsim.workload.ops import Op, OpKind

TORCH_PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _call(op: Op, batch: int, dtype: torch.dtype) -> Callable[[], Any]:
    """A closure running `op` once in torch on fresh random tensors of its shapes."""
    if op.kind == OpKind.EMBEDDING:
        vocab = op.attrs["num_embeddings"]
        ids = torch.randint(0, vocab, (batch, *op.input_shapes[0]))
        table = torch.randn(op.param_shapes["weight"], dtype=dtype)
        return lambda: F.embedding(ids, table)
    xs = [torch.randn((batch, *s), dtype=dtype) for s in op.input_shapes]
    params = {k: torch.randn(s, dtype=dtype) for k, s in op.param_shapes.items()}
    a = op.attrs
    if op.kind == OpKind.LINEAR:
        return lambda: F.linear(xs[0], params["weight"])
    if op.kind == OpKind.CONV2D:
        return lambda: F.conv2d(xs[0], params["weight"], stride=a["stride"],
                                padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
    if op.kind == OpKind.ATTENTION:
        return lambda: F.scaled_dot_product_attention(*xs, is_causal=bool(a["causal"]))
    if op.kind == OpKind.GELU:
        return lambda: F.gelu(xs[0])
    if op.kind == OpKind.LAYERNORM:
        return lambda: F.layer_norm(xs[0], xs[0].shape[-1:], params["gamma"], params["beta"],
                                    a["eps"])
    if op.kind == OpKind.SOFTMAX:
        return lambda: torch.softmax(xs[0], dim=-1)
    if op.kind == OpKind.BATCHNORM:
        stats = torch.zeros(xs[0].shape[1], dtype=dtype), torch.ones(xs[0].shape[1], dtype=dtype)
        return lambda: F.batch_norm(xs[0], *stats, params["gamma"], params["beta"], False,
                                    0.0, a["eps"])
    if op.kind == OpKind.TANH:
        return lambda: torch.tanh(xs[0])
    if op.kind == OpKind.RELU:
        return lambda: F.relu(xs[0])
    if op.kind == OpKind.ADD:
        return lambda: xs[0] + xs[1]
    if op.kind == OpKind.MAXPOOL2D:
        return lambda: F.max_pool2d(xs[0], a["kernel"], a["stride"], a["padding"])
    if op.kind == OpKind.TRANSPOSE:
        perm = (0, *(p + 1 for p in a["perm"]))
        return lambda: xs[0].permute(perm).contiguous()
    if op.kind == OpKind.GLOBAL_AVGPOOL:
        return lambda: F.adaptive_avg_pool2d(xs[0], 1)
    raise NotImplementedError(f"no torch call for op kind '{op.kind.value}'")


def torch_timer() -> Callable[..., float]:
    """A timer of calibration cases in PyTorch: (case, precision, repeats, clock) -> least
    time by `clock`, s (as `cases.time_case`)."""

    def timer(case: Case, precision: str, repeats: int,
              clock: Clock = time.perf_counter) -> float:
        with torch.inference_mode():
            run = _call(case.graph.ops[-1], case.batch, TORCH_PRECISIONS[precision])
            return least_time_s(run, repeats, clock)

    return timer
