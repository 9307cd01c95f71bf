"""Measured element passes priced by the CPU class model (`accelsim.devices.cpu.model`): a
stack's `[cpu_passes]` tables (`accelsim.profiles.pass_tables.PassTable`, where the passes,
the table format and its loader are described) applied to the passes numpy's kernels make per
call: the weight casts, the int8 quantisation of GEMM operands and an fp32 GEMV's stream.

    times = pass_times_s(work, gemms, "bf16", stack.cpu_passes, quantized, casts, 4.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from accelsim.devices.mapping import per_row, row_gemms
from accelsim.formats import get_format
from accelsim.profiles.pass_tables import PassTable

FP32_BYTES = 4.0


def quantized_a_elements(g: Any) -> np.ndarray:
    """Per GEMM of `g` (`mapping.row_gemms`), the elements numpy's int8 kernel quantises for
    its left operand: a convolution's input (images x H x W x C of its im2col shape,
    `counts.Gemm.im2col`: the kernel quantises the input, then im2cols it in int8), else the
    m x k matrix itself."""
    m, k = np.asarray(g["m"], dtype=float), np.asarray(g["k"], dtype=float)
    if "im2col" not in g:
        return m * k
    out = m * k
    for i, shape in enumerate(g["im2col"]):
        if len(shape) == 9:
            h, w, c, _, _, _, _, oh, ow = (float(v) for v in shape)
            out[i] = m[i] / (oh * ow) * h * w * c
    return out


def _gemm_pass_s(g: Any, table: PassTable, operand: str) -> np.ndarray:
    """Per GEMM of `g` (`mapping.row_gemms`), the table's time over its `operand` ("a": m x k,
    a convolution's input when quantised: `quantized_a_elements`; "b": k x n, "ab": both as
    one working set) x its count."""
    m, n, k, count = (np.asarray(g[c], dtype=float) for c in ("m", "n", "k", "count"))
    a = quantized_a_elements(g) if operand == "a" else m * k
    elements = {"a": a, "b": k * n, "ab": m * k + k * n}[operand]
    return count * table.time_s(elements, FP32_BYTES * elements)


def rounded_params(work: Any, precision: str, weight_casts: bool) -> np.ndarray:
    """Per work row, the parameters numpy rounds outside a matmul's weight cast, elements:
    those of a forward non-matmul op (`param_elems`: an embedding's whole table) under a stack
    that casts (`weight_casts`) to a narrow float `precision`; 0 elsewhere."""
    fmt = get_format(precision)
    if ("param_elems" not in work or not weight_casts or fmt.is_integer
            or fmt.bytes_per_element >= FP32_BYTES):
        return np.zeros(len(work))
    other = (np.asarray(work["phase"]) == "forward") & ~np.asarray(work["matmul"], dtype=bool)
    return np.where(other, np.asarray(work["param_elems"], dtype=float), 0.0)


def pass_times_s(work: Any, gemms: Any, precision: str, tables: Mapping[str, PassTable],
                 quantized: np.ndarray, casts: np.ndarray, width_bytes: float,
                 weight_casts: bool = False) -> dict[str, np.ndarray]:
    """Per work row, the time of the element passes a table prices, s, and where it does:
    `cast_s` / `cast` (per weight cast, `casts` per row, the roundings of the weight, the
    input and the output, `weight_bytes`, `read_bytes` less it and `write_bytes` over
    `width_bytes` elements: table `cast_<precision>`), `quantize_s` / `quantize` (both operands of
    each GEMM of the `quantized` rows, each on its own: `quantize_<precision>`), `gemv_s` /
    `gemv` (rows of a float precision whose GEMMs are all GEMV-shaped, m or n of 1: both
    operands as one working set, `gemv_fp32`), `params` / `params_s` (a non-matmul op's
    parameters the cast table rounds, elements, `rounded_params` under `weight_casts`, and
    that part of `cast_s`). Rows no table prices get 0 and False. NB: a row's weight is
    taken as one array (its weight and bias together)."""
    n_rows = len(work)
    out = {k: np.zeros(n_rows) for k in ("cast_s", "quantize_s", "gemv_s", "params",
                                         "params_s")}
    out.update({k: np.zeros(n_rows, dtype=bool) for k in ("cast", "quantize", "gemv")})
    if not tables:
        return out
    g = row_gemms(work, gemms)
    cast = tables.get(f"cast_{precision}")
    if cast is not None:
        # NB: numpy's narrow-float kernels round the weight, the input and the output of the
        # op (`execute._run_rounded`), each an array of its own working set; a row's inputs
        # are taken as one array
        weight, read, written = (np.asarray(work[c], dtype=float) / width_bytes
                                 for c in ("weight_bytes", "read_bytes", "write_bytes"))
        casts = np.asarray(casts, dtype=float)
        out["cast"] = casts > 0
        out["cast_s"] = casts * sum(cast.time_s(e, FP32_BYTES * e)
                                    for e in (weight, read - weight, written))
        # NB: they round every op's parameters too: an embedding's whole table on every call,
        # though a lookup reads only its rows (a non-matmul op's inputs and output roundings
        # stay in its fitted figure)
        params = rounded_params(work, precision, weight_casts)
        out["cast"] |= params > 0
        out["params"] = params
        out["params_s"] = cast.time_s(params, FP32_BYTES * params)
        out["cast_s"] = out["cast_s"] + out["params_s"]
    quantize = tables.get(f"quantize_{precision}")
    if quantize is not None and np.any(quantized):
        both = _gemm_pass_s(g, quantize, "a") + _gemm_pass_s(g, quantize, "b")
        out["quantize"] = np.asarray(quantized, dtype=bool)
        out["quantize_s"] = np.where(out["quantize"], per_row(both, g["row"], n_rows), 0.0)
    gemv = tables.get("gemv_fp32")
    if gemv is not None and not get_format(precision).is_integer and len(g):
        m, n = np.asarray(g["m"], dtype=float), np.asarray(g["n"], dtype=float)
        shaped = ((m <= 1) | (n <= 1)).astype(float)
        n_shaped = per_row(shaped, g["row"], n_rows)
        n_gemms = per_row(np.ones(len(g)), g["row"], n_rows)
        out["gemv"] = (n_gemms > 0) & (n_shaped == n_gemms)
        out["gemv_s"] = np.where(out["gemv"], per_row(_gemm_pass_s(g, gemv, "ab"), g["row"],
                                                      n_rows), 0.0)
    return out
