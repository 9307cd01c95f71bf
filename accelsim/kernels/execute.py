"""Run a whole graph forward on seeded random data, in a numeric format, and measure the error.

    outs = run_graph(graph, batch=2, precision="bf16", seed=0)      # {output name: array}
    report = compare_to_fp32(graph, batch=2, precision="int8")      # relative errors vs fp32

Data: float inputs ~ N(0, 1); "index" inputs are uniform ids in [0, vocab), vocab being the
smallest `num_embeddings` of the embedding ops that read them, except position ids (an index
input whose name contains "pos"), which are arange(S). Parameters come from `init_params`, one
generator per op derived from (seed, op index), so the same seed gives the same inputs and
parameters whatever the precision; a model read from a file that holds its weights (an ONNX
model's initialisers: `accelsim.workload.sources.file_weights`) runs with those instead.

Numeric formats (every rounding is `accelsim.kernels.formats.round_to_format`):
- fp32: the float32 kernels as they are.
- fp16, bf16: every op's float inputs and parameters are rounded to the format, the float32
  kernel runs (NB: this models fp32 accumulation, as tensor cores do, and fp32 math inside
  non-matmul ops), and its output is rounded to the format (storage in the format).
- tf32: only matmul-like ops (`MATMUL_KINDS`) round their inputs and parameters; nothing is
  rounded elsewhere and outputs stay fp32 (TF32 applies to tensor-core GEMMs only).
- fp8_e4m3, fp8_e5m2: matmul-like ops scale each input and each weight tensor (ndim >= 2) per
  tensor so that max|x| maps to the format's max (Transformer Engine's recipe), round, unscale,
  run the fp32 kernel and store the output in bf16; biases and every other op run in bf16 as
  above. NB: the scale is the current amax, not TE's delayed amax history.
- nvfp4, mxfp4: as fp8, but each weight is rounded in blocks along its flattened input axis
  (a row of a linear weight, O x C*kh*kw of a conv's) and each input in blocks along its last
  axis (`round_block_scaled`; NB: a conv's input blocks run along W, not along the im2col K
  of the GEMM the hardware runs, and a matmul's second operand along N). Outputs in bf16.
- int8: conv2d, conv3d, conv_transpose3d, linear, matmul and bmm quantize activations per
  tensor and weights per output channel (symmetric, `quantize_int8`), multiply with int32
  accumulation (`int8_matmul`; im2col for convs) and dequantize the result to float32; the
  bias is added in float32 (NB: hardware adds an int32 bias at scale in*w; the difference is
  one rounding). attention and lstm fall back to the fp32 kernel (NB: their internal GEMMs are
  not quantized). Non-matmul ops run in fp32 on the dequantized values (NB: as TFLite/TensorRT
  do between quantized layers when fused requantization is not modelled).

Batchnorm runs in inference mode, with the file's running statistics or else statistics
calibrated on the fp32 stream's input (`calibrate_batchnorm`). Intermediate tensors are freed
after their last consumer has run. Models whose parameters exceed `PARAM_LIMIT_BYTES` in
float32 are refused: functional execution is for models that fit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.formats import NumericFormat, get_format
from accelsim.kernels.backward import col2im, conv_geometry, im2col
from accelsim.kernels.formats import relative_error, round_to_format
from accelsim.kernels.forward import run_op
from accelsim.kernels.params import init_params
from accelsim.kernels.quantize import int8_matmul, quantize_int8
from accelsim.workload.graph import Graph
from accelsim.workload.ops import MATMUL_KINDS, Op, OpKind
from accelsim.workload.sources import file_weights

PARAM_LIMIT_BYTES = 2 * 1024**3  # float32 parameters above this are refused (~0.5 G params)
INT8_KINDS = frozenset({OpKind.CONV2D, OpKind.CONV3D, OpKind.CONV_TRANSPOSE3D, OpKind.LINEAR,
                        OpKind.MATMUL, OpKind.BMM})
Arrays = dict[str, np.ndarray]


# ---- data --------------------------------------------------------------------------------


def check_fits(graph: Graph) -> None:
    """Raise AccelsimError when the graph's float32 parameters exceed PARAM_LIMIT_BYTES."""
    nbytes = 4 * graph.params
    if nbytes > PARAM_LIMIT_BYTES:
        raise AccelsimError(
            f"model '{graph.name}' has {graph.params / 1e9:.2f} G parameters "
            f"({nbytes / 1e9:.1f} GB in float32), more than the {PARAM_LIMIT_BYTES / 1e9:.1f} GB "
            "limit: functional execution is for models that fit in memory; "
            "use a smaller model or the analytical simulation")


def make_inputs(graph: Graph, batch: int, seed: int = 0) -> Arrays:
    """Seeded inputs: float (batch, *shape) float32 ~ N(0, 1); index (batch, *shape) int64."""
    rng = np.random.default_rng([seed, 0])
    out: Arrays = {}
    for name, (shape, dtype) in graph.inputs.items():
        full = (batch, *shape)
        if dtype == "float":
            out[name] = rng.standard_normal(full, dtype=np.float32)
        elif "pos" in name.lower():
            out[name] = np.broadcast_to(np.arange(shape[-1], dtype=np.int64), full).copy()
        else:
            vocabs = [op.attrs["num_embeddings"] for op in graph.ops
                      if op.kind == OpKind.EMBEDDING and name in op.inputs]
            if not vocabs:
                raise AccelsimError(f"graph '{graph.name}': index input '{name}' is read by no "
                                    "embedding op, so its id range is unknown")
            out[name] = rng.integers(0, min(vocabs), size=full, dtype=np.int64)
    return out


def op_params(op: Op, index: int, seed: int) -> Arrays:
    """Parameters of the `index`-th op of a graph: the same for a seed whatever the precision."""
    if not op.param_shapes:
        return {}
    return init_params(op, np.random.default_rng([seed, 1, index]))


def last_uses(graph: Graph) -> dict[str, int]:
    """Tensor name -> index of the last op that reads it (graph outputs: len(ops), kept)."""
    last = {name: -1 for name in graph.inputs}
    for i, op in enumerate(graph.ops):
        last[op.name] = i  # an output nobody reads is freed as soon as it is made
        for t in op.inputs:
            last[t] = i
    for t in graph.outputs:
        last[t] = len(graph.ops)
    return last


# ---- one op in a format ------------------------------------------------------------------


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind == "f"


def _round(x: np.ndarray, fmt: NumericFormat) -> np.ndarray:
    return round_to_format(x, fmt) if _is_float(x) else x


def _round_scaled(x: np.ndarray, fmt: NumericFormat) -> np.ndarray:
    """Per-tensor scaled rounding: max|x| maps to fmt.max_finite (fp8 with TE-style scaling)."""
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    if not _is_float(x) or amax == 0.0 or not math.isfinite(amax):
        return _round(x, fmt)
    scale = np.float32(amax / fmt.max_finite)
    return round_to_format(x / scale, fmt) * scale


def _run_rounded(op: Op, xs: list[np.ndarray], params: Arrays, fmt: NumericFormat,
                 out_fmt: NumericFormat | None) -> np.ndarray:
    """Round inputs and params to fmt, run the fp32 kernel, round the output to out_fmt."""
    y = run_op(op, [_round(x, fmt) for x in xs], {k: _round(v, fmt) for k, v in params.items()})
    return y if out_fmt is None else _round(y, out_fmt)


def _run_fp8(op: Op, xs: list[np.ndarray], params: Arrays, fmt: NumericFormat) -> np.ndarray:
    bf16 = get_format("bf16")
    if op.kind not in MATMUL_KINDS:
        return _run_rounded(op, xs, params, bf16, bf16)
    ps = {k: _round_scaled(v, fmt) if v.ndim >= 2 else _round(v, bf16) for k, v in params.items()}
    return _round(run_op(op, [_round_scaled(x, fmt) for x in xs], ps), bf16)


def _round_weight_blocks(w: np.ndarray, fmt: NumericFormat) -> np.ndarray:
    """A weight (ndim >= 2) rounded in blocks along its flattened input axis."""
    return round_to_format(w.reshape(w.shape[0], -1), fmt).reshape(w.shape)


def _run_fp4(op: Op, xs: list[np.ndarray], params: Arrays, fmt: NumericFormat) -> np.ndarray:
    bf16 = get_format("bf16")
    if op.kind not in MATMUL_KINDS:
        return _run_rounded(op, xs, params, bf16, bf16)
    ps = {k: _round_weight_blocks(v, fmt) if v.ndim >= 2 else _round(v, bf16)
          for k, v in params.items()}
    return _round(run_op(op, [_round(x, fmt) for x in xs], ps), bf16)


def _stride(op: Op, nd: int) -> tuple[int, ...]:
    st = op.attrs["stride"]
    return (int(st),) * nd if isinstance(st, int) else tuple(int(v) for v in st)


def _int8_conv(op: Op, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """conv2d/conv3d: x (B, C, *S), w (O, C/g, *K) -> (B, O, *out) via im2col + int8 GEMMs."""
    k, s, p, d = conv_geometry(op)
    g, (b, c), o = int(op.attrs["groups"]), x.shape[:2], w.shape[0]
    cg, og, kk = c // g, o // g, math.prod(k)
    qx, sx = quantize_int8(x)
    qw, sw = quantize_int8(w, axis=0)
    cols = im2col(qx, k, s, p, d)  # int8 (B, C, *K, *out); zero padding is exact in int8
    out = cols.shape[2 + len(k):]
    cols = cols.reshape(b, g, cg * kk, -1).transpose(1, 0, 3, 2)  # (g, B, L, Cg*K)
    y = np.empty((g, b, cols.shape[2], og), dtype=np.float32)
    for gi in range(g):
        wq = qw[gi * og:(gi + 1) * og].reshape(og, cg * kk).T  # (Cg*K, Og), scale per column
        y[gi] = int8_matmul(cols[gi], sx, wq, sw[gi * og:(gi + 1) * og])
    return y.transpose(1, 0, 3, 2).reshape(b, o, *out)


def _int8_conv_transpose(op: Op, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (B, C, *S), w (C, O, *K) -> (B, O, *((S-1)*stride + K)): int8 GEMM, then col2im."""
    nd = x.ndim - 2
    (b, c), sp, (o, *k) = x.shape[:2], x.shape[2:], w.shape[1:]
    stride = _stride(op, nd)
    qx, sx = quantize_int8(x)
    qw, sw = quantize_int8(w, axis=1)  # per output channel
    a = qx.reshape(b, c, -1).transpose(0, 2, 1)  # (B, P, C)
    cols = int8_matmul(a, sx, qw.reshape(c, -1), np.repeat(sw, math.prod(k)))  # (B, P, O*K)
    cols = cols.reshape(b, *sp, o, *k)
    cols = cols.transpose(0, nd + 1, *range(nd + 2, 2 * nd + 2), *range(1, nd + 1))
    out = tuple((sp[i] - 1) * stride[i] + k[i] for i in range(nd))
    return col2im(np.ascontiguousarray(cols), (b, o, *out), stride, (0,) * nd, (1,) * nd)


def _run_int8(op: Op, xs: list[np.ndarray], params: Arrays) -> np.ndarray:
    if op.kind not in INT8_KINDS:
        return run_op(op, xs, params)  # NB: fp32 for non-matmul ops, attention and lstm
    x = np.asarray(xs[0], dtype=np.float32)
    if op.kind == OpKind.LINEAR:
        w = params["weight"]  # (out, in): per output channel = per column of w.T
        qx, sx = quantize_int8(x.reshape(-1, x.shape[-1]))
        qw, sw = quantize_int8(w, axis=0)
        y = int8_matmul(qx, sx, qw.T, sw).reshape(*x.shape[:-1], w.shape[0])
    elif op.kind in (OpKind.CONV2D, OpKind.CONV3D):
        y = _int8_conv(op, x, params["weight"])
    elif op.kind == OpKind.CONV_TRANSPOSE3D:
        y = _int8_conv_transpose(op, x, params["weight"])
    else:  # matmul, bmm: two activations, each quantized per tensor
        yb = np.asarray(xs[1], dtype=np.float32)
        qa, sa = quantize_int8(x)
        qb, sb = quantize_int8(yb)
        y = np.empty((*x.shape[:-1], yb.shape[-1]), dtype=np.float32)
        for idx in np.ndindex(*x.shape[:-2]):
            y[idx] = int8_matmul(qa[idx], sa, qb[idx], sb)
    if "bias" in params:
        b = params["bias"].astype(np.float32)
        y = y + (b if op.kind == OpKind.LINEAR else b.reshape(-1, *(1,) * (y.ndim - 2)))
    return y.astype(np.float32, copy=False)


def run_op_in_format(op: Op, xs: list[np.ndarray], params: Arrays,
                     precision: str | NumericFormat) -> np.ndarray:
    """One op in a numeric format (see the module docstring); xs and output batch-first."""
    fmt = get_format(precision)
    if fmt.name == "fp32":
        return run_op(op, xs, params)
    if fmt.name == "tf32":
        if op.kind not in MATMUL_KINDS:
            return run_op(op, xs, params)
        return _run_rounded(op, xs, params, fmt, None)
    if fmt.name.startswith("fp8"):
        return _run_fp8(op, xs, params, fmt)
    if fmt.block_elements is not None:
        return _run_fp4(op, xs, params, fmt)
    if fmt.name == "int8":
        return _run_int8(op, xs, params)
    return _run_rounded(op, xs, params, fmt, fmt)


# ---- whole graphs ------------------------------------------------------------------------


OnOp = Callable[[Op, list[np.ndarray]], None]
OnParams = Callable[[Op, Arrays], "list[Arrays] | None"]


def _execute(graph: Graph, batch: int, fmts: list[NumericFormat], seed: int,
             on_op: OnOp | None = None, on_params: OnParams | None = None) -> list[Arrays]:
    """Run the graph once per format in lockstep (parameters made once per op); returns the
    graph outputs per format. on_params(op, its parameters) is called before each op runs
    and may return one parameter dict per format (else None: the same for all), on_op(op,
    outputs per format) after."""
    check_fits(graph)
    if batch < 1:
        raise AccelsimError(f"batch must be >= 1, got {batch}")
    inputs = make_inputs(graph, batch, seed)
    weights = file_weights(graph)
    envs: list[Arrays] = [dict(inputs) for _ in fmts]
    last = last_uses(graph)
    for name in [n for n in inputs if last[n] < 0]:  # inputs nobody reads
        for env in envs:
            del env[name]
    for i, op in enumerate(graph.ops):
        params = (dict(weights[op.name]) if weights is not None and op.name in weights
                  else op_params(op, i, seed))
        if op.kind == OpKind.BATCHNORM and "running_mean" not in params:
            params.update(calibrate_batchnorm(envs[0][op.inputs[0]]))
        streams = on_params(op, params) if on_params is not None else None
        outs = []
        for j, (env, fmt) in enumerate(zip(envs, fmts, strict=True)):
            ps = params if streams is None else streams[j]
            y = run_op_in_format(op, [env[t] for t in op.inputs], ps, fmt)
            env[op.name] = y
            outs.append(y)
        if on_op is not None:
            on_op(op, outs)
        del params, outs, streams
        for t in {*op.inputs, op.name}:
            if last[t] == i:
                for env in envs:
                    del env[t]
    return [{t: env[t] for t in graph.outputs} for env in envs]


def calibrate_batchnorm(x: np.ndarray) -> Arrays:
    """Running statistics of a batchnorm input x (N, C, *spatial): per-channel mean and
    biased variance over (N, *spatial), in float32.

    Every stream then normalises with these fixed statistics, as a deployed model does, so a
    sample's output does not depend on its batch and a reduced-precision stream is compared
    on the same normalisation as the fp32 reference. NB: calibrated on the batch being run
    (the first, reference stream), not on a held-out calibration set.
    """
    x = np.asarray(x, dtype=np.float32)
    axes = (0, *range(2, x.ndim))
    return {"running_mean": x.mean(axis=axes, dtype=np.float32),
            "running_var": x.var(axis=axes, dtype=np.float32)}


def run_graph(graph: Graph, batch: int, precision: str | NumericFormat,
              seed: int = 0) -> Arrays:
    """Run `graph` forward on seeded random inputs in `precision`; returns {output name:
    array (batch, *shape)}. Raises AccelsimError for models too large to execute."""
    fmt = get_format(precision)
    if fmt.name == "fp32" or not any(op.kind == OpKind.BATCHNORM for op in graph.ops):
        return _execute(graph, batch, [fmt], seed)[0]
    # Batchnorm statistics come from an fp32 stream run alongside, as a deployed model's
    # statistics come from fp32 training.
    return _execute(graph, batch, [get_format("fp32"), fmt], seed)[1]


def time_graph(graph: Graph, batch: int, precision: str | NumericFormat, seed: int = 0,
               repeats: int = 1, clock: Callable[[], float] = time.perf_counter
               ) -> dict[str, float]:
    """Time of each op's kernel in `precision` over a forward pass of `graph` by `clock` (wall
    time; `time.process_time` for CPU time), s: the least of `repeats` passes per op (NB: the
    least filters out other processes on a shared host). The whole forward's measured time is
    their sum: graph walking and parameter generation are not timed. NB: batchnorm statistics
    come from this stream itself (no fp32 stream beside it), which changes values, not cost."""
    best_s: dict[str, float] = {}
    start_s = [0.0]

    def start(op: Op, params: Arrays) -> None:
        start_s[0] = clock()

    def stop(op: Op, outs: list[np.ndarray]) -> None:
        took_s = clock() - start_s[0]
        best_s[op.name] = min(took_s, best_s.get(op.name, took_s))

    for _ in range(max(1, repeats)):
        _execute(graph, batch, [get_format(precision)], seed, on_op=stop, on_params=start)
    return best_s


def _joint_error(ys: Arrays, refs: Arrays) -> float:
    """Relative error of all outputs together (their concatenation)."""
    y = np.concatenate([np.asarray(ys[k], dtype=np.float64).ravel() for k in refs])
    r = np.concatenate([np.asarray(refs[k], dtype=np.float64).ravel() for k in refs])
    return relative_error(y, r)


def compare_to_fp32(graph: Graph, batch: int, precision: str | NumericFormat, seed: int = 0,
                    per_layer: bool = True) -> dict[str, Any]:
    """Run fp32 and `precision` side by side on the same inputs and parameters.

    Returns {"precision": name, "batch", "seed", "output_relative_error": float (all graph
    outputs together), "layer_relative_error": {op name: error of its output}} (the last only
    with per_layer). Errors are `relative_error` (L2 norm ratio), 0.0 for fp32.
    """
    fmt = get_format(precision)
    layer: dict[str, float] = {}

    def record(op: Op, outs: list[np.ndarray]) -> None:
        layer[op.name] = relative_error(outs[1], outs[0])

    ref, got = _execute(graph, batch, [get_format("fp32"), fmt], seed,
                        record if per_layer else None)
    report: dict[str, Any] = {"precision": fmt.name, "batch": batch, "seed": seed,
                              "output_relative_error": _joint_error(got, ref)}
    if per_layer:
        report["layer_relative_error"] = layer
    return report
