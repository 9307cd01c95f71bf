"""Prefill and decode steps of a decoder on one GPU shard, costed by the device's class model
(`accelsim.devices.estimate.class_model` then `accelsim.devices.core.finish`: the same
per-layer roofline, tiles, launch and host overheads as every other workload), then summed
over layers, tensor-parallel all-reduces and pipeline stages.

    plat = Platform(decoder("llama2_7b"), load_profile("a100"), "compiled", "fp16", "fp16")
    shape_costs(plat, [Step(512 * 8, 8, 8 * 512 * 513 / 2, 512 * 8)], "layer")  # per-layer rows

Weight-only quantisation (fp8, int8, int4 weights under fp16/bf16 activations, as AWQ, GPTQ and
TensorRT-LLM's weight-only GEMMs run): weights are read at their width plus group scales, and
the dequantisation runs inside the GEMM kernel on the vector units (CUDA cores): its FLOPs are
added to the matmul row's compute time, where the roofline weighs them against memory.

W8A8 (`Platform.matmul` "fp8": TensorRT-LLM's, vLLM's and NeMo's FP8 recipe on Hopper, Ada and
CDNA3): the layers' weight GEMMs run on the matrix units' fp8 mode, fp8 weights, fp8 inputs
quantised by the kernel before each GEMM (`work.QUANT_FLOPS_PER_ELEMENT`), 16-bit outputs; the
LM head, a MoE router and attention stay at the compute format (`UNQUANTISED_GEMMS`). The
table is costed twice, at the compute and at the GEMM format, and each row takes its own.
W4A4 (`Platform.matmul` "fp4": NVFP4 on Blackwell's block-scaled tensor cores, as TensorRT-LLM
runs it) is the same with e2m1 weights and inputs under an e4m3 scale per 16 elements
(`accelsim.formats` nvfp4: 0.5625 bytes per element) and a dynamic per-block quantisation of
each input (`work.BLOCK_QUANT_FLOPS_PER_ELEMENT`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.core import finish
from accelsim.devices.energy import dynamic_energy_j
from accelsim.devices.estimate import class_model, power_limits_w, voltage_floor
from accelsim.devices.mapping import listed_vector_peak
from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.llm.models import DecoderConfig
from accelsim.llm.work import (
    BLOCK_QUANT_FLOPS_PER_ELEMENT,
    QUANT_FLOPS_PER_ELEMENT,
    Formats,
    Rows,
    Shard,
    Step,
    Tiles,
    attention_rows,
    embed_rows,
    head_rows,
    layer_rows,
)
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.stack_choice import resolve_software
from accelsim.workload.columns import Columns

COMPUTE_FORMATS = ("fp16", "bf16")
# Bytes per weight of each storage format (fp4: NVFP4, its block scales included).
WEIGHT_FORMATS = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5,
                  "fp4": get_format("nvfp4").bytes_per_element}
QUANTISED = ("fp8", "int8", "int4", "fp4")
KV_FORMATS = ("fp16", "bf16", "fp8", "int8")  # KV cache (vLLM's kv_cache_dtype: auto, fp8)
# W8A8 / W4A4: GEMMs on the matrix units' fp8 (e4m3, static per-tensor scales) or fp4 (NVFP4)
GEMM_FORMATS = ("fp8", "fp4")
# Per element quantised by a GEMM input's producer, by GEMM format.
QUANT_FLOPS = {"fp8": QUANT_FLOPS_PER_ELEMENT, "fp4": BLOCK_QUANT_FLOPS_PER_ELEMENT}
UNQUANTISED_GEMMS = ("lm_head", "router", "attention")
# NB: one fp16 scale per group of 128 weights (the AWQ / GPTQ default group size); zero points
# and fp8's per-tensor scale are left out.
GROUP_SIZE = 128
SCALE_BYTES = 2.0
# NB: a convention: unpack / convert, subtract the zero point, multiply by the scale.
DEQUANT_FLOPS_PER_WEIGHT = 3.0
NOMINAL_TILE = (128, 128)  # NB: classes without a CTA tile table see skinny GEMMs in 128 blocks


def weight_bytes_per_param(weights: str) -> float:
    """Stored bytes per weight, scales included."""
    extra = SCALE_BYTES / GROUP_SIZE if weights in ("int8", "int4") else 0.0
    return WEIGHT_FORMATS[weights] + extra


@dataclass(frozen=True)
class Platform:
    """What one shard's step costs depend on. `precision` is the compute format (activations),
    `weights` the stored weight format, `kv` the KV cache's (None: the compute format)."""

    cfg: DecoderConfig
    profile: Any
    software: Any  # a stack name, or a `SoftwareStack` resolved on the system's host
    precision: str
    weights: str
    tp: int = 1
    expert_parallel: bool = False
    kv: str | None = None
    matmul: str | None = None  # the layers' GEMM format (W8A8 fp8, W4A4 fp4); None: `precision`

    @property
    def shard(self) -> Shard:
        return Shard(self.tp, self.expert_parallel)

    @property
    def gemm_precision(self) -> str:
        """The format the layers' weight GEMMs run in (their MFU's peak)."""
        return self.matmul or self.precision

    @property
    def formats(self) -> Formats:
        act = WEIGHT_FORMATS[self.precision]
        # NB: a quantised cache's scales and its dequantisation in attention are not charged
        kv = act if self.kv is None else WEIGHT_FORMATS[self.kv]
        if self.matmul is not None:  # W8A8: embedding and LM head stay at the compute format
            return Formats(weight_bytes_per_param(self.weights), act, kv,
                           gemm_in_bytes=WEIGHT_FORMATS[self.matmul], head_weight_bytes=act,
                           quant_flops=QUANT_FLOPS[self.matmul])
        return Formats(weight_bytes_per_param(self.weights), act, kv)

    @property
    def tiles(self) -> Tiles:
        if self.profile.device_class == "gpu":
            m, n = load_efficiency("gpu")[f"assumed.cta_tile.{self.precision}"]
            return Tiles(int(m), int(n))
        return Tiles(*NOMINAL_TILE)

    @property
    def fused_attention(self) -> bool:
        """FlashAttention where the stack has it: FlashAttention-2 (Dao 2023, arXiv:2307.08691)
        runs fp16 / bf16 on Ampere and later, which this takes as GPUs with bf16 tensor
        cores; PyTorch's SDPA and TensorRT-LLM both call it. NB: other classes run attention
        as separate kernels with the scores in memory."""
        prof = self.profile
        return (prof.device_class == "gpu" and self.precision in ("fp16", "bf16")
                and "bf16" in prof.compute.matrix_peak_flops_per_s)

    @property
    def stack(self) -> Any:
        """The software stack the device runs (`accelsim.profiles.software`)."""
        return resolve_software(self.software, self.profile.device_class)[0]

    @property
    def phase(self) -> str:
        """Rows are "forward" (where a stack fuses) unless the stack autocasts: its forward
        rows would be charged casts of fp32 master weights, which inference weights stored at
        their format do not need. NB: a stack that both fuses and casts loses its fusion."""
        return "inference" if self.stack.weight_casts else "forward"


def check_platform(plat: Platform) -> None:
    if plat.precision not in COMPUTE_FORMATS:
        raise AccelsimError(f"LLM compute precision '{plat.precision}': choose one of "
                            f"{', '.join(COMPUTE_FORMATS)} (quantised formats are weight "
                            "formats: weight_precision, --weight-precision)")
    if plat.weights not in WEIGHT_FORMATS:
        raise AccelsimError(f"weight_precision '{plat.weights}': choose one of "
                            f"{', '.join(WEIGHT_FORMATS)}")
    if plat.kv is not None and plat.kv not in KV_FORMATS:
        raise AccelsimError(f"kv_precision '{plat.kv}': choose one of {', '.join(KV_FORMATS)}")
    if plat.matmul is not None and (plat.matmul not in GEMM_FORMATS
                                    or plat.weights not in (plat.matmul, plat.precision)):
        raise AccelsimError(f"GEMM format '{plat.matmul}' with {plat.weights} weights: W8A8 / "
                            f"W4A4 run {', '.join(GEMM_FORMATS)} GEMMs on weights stored so "
                            "(or, training, at the compute format)")


def _dequant(plat: Platform, work: pd.DataFrame, gemm_rows_m: np.ndarray) -> np.ndarray:
    """Vector FLOPs of dequantising each row's weights inside its GEMM kernel (0 unless the
    weights are quantised). NB: every tile row of the output dequantises its weight tile
    again: ceil(tokens / tile_m) passes."""
    if plat.weights not in QUANTISED or plat.matmul is not None:  # W8A8: no dequantisation
        return np.zeros(len(work))
    elems = work["weight_bytes"].to_numpy(dtype=float) / plat.formats.weight_bytes
    passes = np.maximum(np.ceil(gemm_rows_m / plat.tiles.m), 1.0)
    return np.where(work["matmul"].to_numpy(dtype=bool), elems * passes, 0.0) * (
        DEQUANT_FLOPS_PER_WEIGHT)


def quantised_gemm_rows(work: pd.DataFrame) -> np.ndarray:
    """The rows W8A8 runs at the GEMM format: the layers' weight GEMMs, forward and backward.
    NB: the LM head and a MoE router stay 16-bit (ModelOpt's FP8 recipe leaves them out);
    attention runs at the compute format with the KV cache at its own format."""
    names = work["name"].to_numpy()
    return work["matmul"].to_numpy(dtype=bool) & ~np.isin(names, UNQUANTISED_GEMMS)


def cost_rows(plat: Platform, rows: Rows) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows costed by the device's class model and `finish`: time_s, energy_j, flops, ...
    per row, and each row's shape id."""
    work, gemms, shape_ids = rows.frames()
    return cost_frames(plat, work, gemms), shape_ids


def cost_frames(plat: Platform, work: pd.DataFrame, gemms: pd.DataFrame) -> pd.DataFrame:
    """A work table (and its GEMMs) costed by the device's class model and `finish`, with the
    dequantisation of quantised weights charged in the GEMM rows."""
    precision = plat.precision  # fp16 or bf16 (`check_platform`)
    model = class_model(plat.profile.device_class)
    costs = Columns.of(model(plat.profile, work, gemms, precision, plat.stack))
    if plat.matmul is not None:
        # W8A8: the layers' weight GEMMs on the matrix units at the GEMM format, the rest (and
        # the unquantised LM head, router and attention) at the compute format
        low = Columns.of(model(plat.profile, work, gemms, plat.matmul, plat.stack))
        on_low = quantised_gemm_rows(work)
        costs = Columns({c: np.where(on_low, low[c], costs[c]) for c in costs})
    tokens_m = np.zeros(len(work))
    np.maximum.at(tokens_m, gemms["op_index"].to_numpy(dtype=int), gemms["m"].to_numpy(float))
    dq_flops = _dequant(plat, work, tokens_m)
    if dq_flops.any():
        rate = listed_vector_peak(plat.profile, precision)
        if rate is None:
            raise AccelsimError(f"{plat.profile.name} lists no vector peak to dequantise "
                                f"{plat.weights} weights on")
        if plat.profile.device_class == "gpu":
            rate *= load_efficiency("gpu")["fitted.cuda_core_efficiency"]
        zeros = np.zeros(len(work))
        costs = costs.assign(
            compute_s=costs["compute_s"] + dq_flops / rate,
            dynamic_energy_j=costs["dynamic_energy_j"] + dynamic_energy_j(
                plat.profile, precision, zeros, dq_flops, zeros, zeros))
    tdp_w, static_w = power_limits_w(plat.profile)
    return finish(work, costs, tdp_w, static_w, voltage_floor(plat.profile))


@dataclass(frozen=True)
class ShapeCost:
    """Sums over the rows of each shape (arrays, one entry per shape): seconds, joules,
    matmul FLOPs and DRAM bytes of one shard."""

    time_s: np.ndarray
    energy_j: np.ndarray
    matmul_flops: np.ndarray
    dram_bytes: np.ndarray


def shape_costs(plat: Platform, steps: Sequence[Step], part: str) -> ShapeCost:
    """Each step's `part` ("layer": one layer with attention; "linear": one layer without
    it; "attention"; "embed"; "head") on one shard."""
    rows = Rows(plat.phase, plat.tiles)
    cfg, shard, fmt = plat.cfg, plat.shard, plat.formats
    for i, step in enumerate(steps):
        rows.shape_id = i
        if part == "layer":
            layer_rows(rows, cfg, shard, step, fmt, plat.fused_attention)
        elif part == "linear":
            layer_rows(rows, cfg, shard, step, fmt, None)
        elif part == "attention":
            attention_rows(rows, cfg, shard, step, fmt, plat.fused_attention)
        elif part == "embed":
            embed_rows(rows, cfg, step, fmt)
        elif part == "head":
            head_rows(rows, cfg, shard, step, fmt)
        else:
            raise ValueError(part)
    done, ids = cost_rows(plat, rows)
    n = len(steps)
    matmul = done["matmul"].to_numpy(dtype=bool)

    def total(col: str, mask: np.ndarray | None = None) -> np.ndarray:
        values = done[col].to_numpy(dtype=float)
        return np.bincount(ids, weights=values if mask is None else values * mask, minlength=n)

    return ShapeCost(total("time_s"), total("energy_j"), total("flops", matmul),
                     total("dram_bytes"))
