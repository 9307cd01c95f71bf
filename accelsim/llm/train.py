"""Training a decoder: one optimizer step of a global batch on a TP x PP x DP split, from the
same per-layer rows as inference, with their backward rows and the optimizer update costed by
the device's class model.

    out = train_step(plat, lay, TrainSplit(dp=4, micro_batch=1, seq=4096, microbatches=8,
                                           zero=1, recompute=False), capacity_bytes=80e9)
    out["tokens_per_s"], out["mfu"], out["memory"], out["energy_j_per_token"]

A step: `microbatches` micro-batches of `micro_batch` sequences of `seq` tokens per replica
(gradient accumulation, and the pipeline's microbatches), each forward then backward (with full
recomputation: the forward again before the backward) through `pp` stages (GPipe / 1F1B bubble:
(m + pp - 1) stage passes for m microbatches), two TP all-reduces per layer each way; then the
data-parallel gradient exchange over the replicas and the Adam update.
Backward rows (the `accelsim.workload.work` convention): a weight GEMM does dX and dW (twice its
forward FLOPs), FlashAttention's backward 2.5x its forward (it recomputes the scores: five GEMMs
for two, Dao 2023, arXiv:2307.08691), elementwise rows once more; each reads what forward saved
and the output gradient and writes the input (and weight) gradient.
ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054): mixed-precision Adam keeps 16 bytes per
parameter (2 weights, 2 gradients, 12 fp32 master, momentum and variance); stage 1 shards the
12 over the replicas, stage 2 the gradients too, stage 3 the weights too. Stages 0-2 exchange
2 x the gradient bytes (all-reduce, or reduce-scatter + all-gather: the same volume); stage 3
adds an all-gather of the weights in each forward and backward.
Energy: the rows' energies from the device model (dynamic plus static power over each row, each
row within the TDP) for the work every GPU does, plus static power while it waits
(`_step_energy_j`); average power is every GPU's together, as for inference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelsim.devices.estimate import power_limits_w
from accelsim.devices.software import DEFAULT
from accelsim.errors import AccelsimError
from accelsim.interconnect.nccl import AUTO, collective_time_s
from accelsim.llm.costs import Platform, cost_frames
from accelsim.llm.memory import (
    LOGIT_BYTES,
    RESERVE_FRACTION,
    shard_embedding_params,
    shard_layer_params,
)
from accelsim.llm.parallel import Layout, replicas
from accelsim.llm.steps import ALLREDUCES_PER_LAYER, prefill_step
from accelsim.llm.work import (
    SOFTMAX_FLOPS,
    Rows,
    elementwise_rows,
    embed_rows,
    layer_rows,
    linear_rows,
)
from accelsim.workload.work import OPTIMIZER_FLOPS_PER_PARAM

ZERO_STAGES = (0, 1, 2, 3)
WEIGHT_BYTES, GRAD_BYTES, ADAM_BYTES = 2.0, 2.0, 12.0  # per parameter, mixed precision
BACKWARD_FLOPS = {"linear": 2.0, "attention": 2.5}  # x forward; any other row: 1.0


@dataclass(frozen=True)
class TrainSplit:
    """The data-parallel side of a training step: replicas, micro-batch (sequences), sequence
    length (tokens), micro-batches per step, ZeRO stage and full activation recomputation."""

    dp: int
    micro_batch: int
    seq: int
    microbatches: int = 1
    zero: int = 0
    recompute: bool = False

    def check(self) -> None:
        if self.zero not in ZERO_STAGES:
            raise AccelsimError(f"knob 'zero' = {self.zero!r}: choose one of 0, 1, 2, 3")


def _backward(work: pd.DataFrame) -> pd.DataFrame:
    """Backward rows of forward rows (same op_index, so the class model finds their GEMMs)."""
    factor = work["op"].map(BACKWARD_FLOPS).fillna(1.0).to_numpy()
    read, write = work["read_bytes"].to_numpy(), work["write_bytes"].to_numpy()
    return work.assign(phase="backward", flops=work["flops"].to_numpy() * factor,
                       read_bytes=read + write, write_bytes=read)


def _micro_rows(plat: Platform, split: TrainSplit) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Forward and backward rows of one micro-batch: shape 0 one layer, shape 1 the ends
    (embedding, LM head over every token, the loss)."""
    step = prefill_step(split.micro_batch, float(split.seq))
    rows = Rows("forward", plat.tiles)
    layer_rows(rows, plat.cfg, plat.shard, step, plat.formats, plat.fused_attention)
    rows.shape_id = 1
    embed_rows(rows, plat.cfg, step, plat.formats)
    vocab = plat.shard.vocab(plat.cfg)
    linear_rows(rows, "lm_head", step.tokens, vocab, plat.cfg.d_model, plat.formats, False)
    elementwise_rows(rows, "loss", "softmax", step.tokens * vocab, SOFTMAX_FLOPS, 1, plat.formats)
    work, gemms, ids = rows.frames()
    work = work.assign(shape=ids)
    return pd.concat([work, _backward(work)], ignore_index=True), gemms


def _params_per_gpu(plat: Platform, lay: Layout) -> float:
    return lay.layers_per_stage * shard_layer_params(plat) + shard_embedding_params(plat, lay)


def _optimizer(plat: Platform, params: float) -> tuple[float, float]:
    """(seconds, joules of one GPU) of the Adam update of `params` (read and write fp32 master,
    moments and the 16-bit copy), costed as one memory-bound row."""
    bytes_ = params * (ADAM_BYTES + WEIGHT_BYTES + GRAD_BYTES)
    flops = params * OPTIMIZER_FLOPS_PER_PARAM["adam"]
    work = pd.DataFrame([("optimizer", "adam_update", "optimizer", False,
                          flops, bytes_, bytes_ - params * GRAD_BYTES,
                          0.0, -1)], columns=["name", "op", "phase", "matmul", "flops",
                                              "read_bytes", "write_bytes", "weight_bytes",
                                              "op_index"])
    gemms = pd.DataFrame(columns=["op_index", "m", "n", "k", "count"])
    done = cost_frames(plat, work, gemms)
    return float(done["time_s"].sum()), float(done["energy_j"].sum())


def _dp_comm_s(lay: Layout, split: TrainSplit, params: float) -> float:
    """The replicas' gradient exchange (and ZeRO-3's weight gathers) per step, s. NB: after
    the last backward, not overlapped with it."""
    if split.dp == 1:
        return 0.0
    if lay.link is None:
        raise AccelsimError("data parallelism needs a GPU-to-GPU link")
    grads = params * GRAD_BYTES
    exchange = collective_time_s("allreduce", AUTO, split.dp, grads, lay.link)[0]
    if split.zero < 3:
        return exchange
    gather = collective_time_s("allgather", AUTO, split.dp, params * WEIGHT_BYTES, lay.link)[0]
    return exchange + 2 * split.microbatches * gather


def train_memory(plat: Platform, lay: Layout, split: TrainSplit,
                 capacity_bytes: float) -> dict[str, Any]:
    """Per-GPU memory of a training step (the first stage, which holds the most micro-batches
    in flight under 1F1B), bytes."""
    cfg, shard = plat.cfg, plat.shard
    params = _params_per_gpu(plat, lay)
    shard_by = {stage: split.dp if split.zero >= stage else 1 for stage in (1, 2, 3)}
    act = plat.formats.act_bytes
    routed = cfg.experts_per_token * shard.experts(cfg) / cfg.n_experts
    # NB: what a layer saves per token: both norms' inputs and outputs, QKV, the attention
    # output (FlashAttention keeps no scores), the FFN's gate, up and product.
    per_token = act * (4 * cfg.d_model + cfg.qkv_out / plat.tp
                       + shard.heads(cfg) * cfg.head_dim + 3 * shard.d_ff(cfg) * routed)
    if split.recompute:  # the layer inputs, and one layer's whole set while it recomputes
        per_token_stage = act * cfg.d_model * lay.layers_per_stage + per_token
    else:
        per_token_stage = per_token * lay.layers_per_stage
    in_flight = min(split.microbatches, lay.pp)
    tokens = split.micro_batch * split.seq
    logits = tokens * shard.vocab(cfg) * LOGIT_BYTES
    mem = {
        "weights_bytes": params * WEIGHT_BYTES / shard_by[3],
        "gradients_bytes": params * GRAD_BYTES / shard_by[2],
        "optimizer_bytes": params * ADAM_BYTES / shard_by[1],
        "activations_bytes": per_token_stage * tokens * in_flight + logits,
        "reserve_bytes": RESERVE_FRACTION * capacity_bytes,
    }
    need = sum(mem.values())
    return mem | {"required_bytes": need, "capacity_bytes": capacity_bytes,
                  "fits": need <= capacity_bytes, "largest_batch_that_fits": None,
                  "per_gpu": True}


def train_step(plat: Platform, lay: Layout, split: TrainSplit,
               capacity_bytes: float) -> dict[str, Any]:
    """Time, throughput, MFU and memory of one training step (module docstring); SI units."""
    split.check()
    work, gemms = _micro_rows(plat, split)
    done = cost_frames(plat, work.drop(columns="shape"), gemms).assign(shape=work["shape"])
    by = done.groupby(["shape", "phase"])[["time_s", "energy_j"]].sum()

    def part(shape: int, phase: str, col: str = "time_s") -> float:
        return float(by[col].get((shape, phase), 0.0))

    fwd = {s: part(s, "forward") for s in (0, 1)}
    bwd = {s: part(s, "backward") for s in (0, 1)}
    tokens = split.micro_batch * split.seq
    msg = tokens * plat.cfg.d_model * plat.formats.act_bytes
    passes = 3 if split.recompute else 2  # forward, backward (and forward again)
    ar_s = ALLREDUCES_PER_LAYER * lay.allreduce_s(msg) * passes
    layer_s = fwd[0] * (2 if split.recompute else 1) + bwd[0] + ar_s
    stage_s = lay.layers_per_stage * layer_s + fwd[1] + bwd[1] + 2 * lay.p2p_s(msg)
    m, pp = split.microbatches, lay.pp
    params = _params_per_gpu(plat, lay)
    dp_s = _dp_comm_s(lay, split, params)
    opt_s, opt_j = _optimizer(plat, params / (split.dp if split.zero >= 1 else 1))
    step_s = (m + pp - 1) * stage_s + dp_s + opt_s
    energy_j = _step_energy_j(plat, lay, split, part, step_s, opt_s, opt_j)
    forward = done[(done["phase"] == "forward") & done["matmul"]]
    fwd_flops = (plat.cfg.n_layers * forward.loc[forward["shape"] == 0, "flops"].sum()
                 + forward.loc[forward["shape"] == 1, "flops"].sum()) * plat.tp
    # NB: MFU's model FLOPs: 3 x the forward GEMMs (forward, dX, dW), no recomputation
    model_flops = 3.0 * fwd_flops * m * split.dp
    peak = plat.profile.peak_flops_per_s(plat.precision)
    gpus = lay.gpus * split.dp
    step_tokens = tokens * m * split.dp
    return {
        "step_time_s": step_s, "tokens_per_s": step_tokens / step_s,
        "global_batch_tokens": step_tokens,
        "mfu": None if peak is None else model_flops / (step_s * peak * gpus),
        "model_flops_per_step": model_flops, "pipeline_bubble": (pp - 1) / (m + pp - 1),
        "tp_comm_s": (m + pp - 1) * lay.layers_per_stage * ar_s, "dp_comm_s": dp_s,
        "optimizer_s": opt_s, "devices": gpus,
        "memory": train_memory(plat, lay, split, capacity_bytes),
        "forward_s_per_layer": fwd[0], "backward_s_per_layer": bwd[0],
        "flops_per_token": float(model_flops / step_tokens),
        "energy_j": energy_j, "energy_j_per_token": energy_j / step_tokens,
        "average_power_w": energy_j / step_s,
    }


def _step_energy_j(plat: Platform, lay: Layout, split: TrainSplit, part: Any, step_s: float,
                   opt_s: float, opt_j: float) -> float:
    """Joules of one step, every GPU of every replica: the rows' energies (dynamic plus static
    power over each row's time, within the TDP by the cost model) for each layer's shard on its
    TP ranks and each micro-batch, the optimizer on every GPU, and static power over the rest
    of the step (pipeline bubble, TP and DP communication, the other stages' ends). NB: the
    links' own energy is not charged; a GPU idling in the bubble draws static power."""
    passes = 2 if split.recompute else 1  # forward again before the backward
    layer = {col: passes * part(0, "forward", col) + part(0, "backward", col)
             for col in ("time_s", "energy_j")}
    ends = {col: part(1, "forward", col) + part(1, "backward", col)
            for col in ("time_s", "energy_j")}
    shards = plat.tp * split.dp * split.microbatches  # shard-runs of the model per step
    gpus = lay.gpus * split.dp
    busy_j = shards * (plat.cfg.n_layers * layer["energy_j"] + ends["energy_j"]) + gpus * opt_j
    busy_s = shards * (plat.cfg.n_layers * layer["time_s"] + ends["time_s"]) + gpus * opt_s
    static_w = power_limits_w(plat.profile)[1]
    return busy_j + static_w * max(gpus * step_s - busy_s, 0.0)


def train_record(cfg: Any, plat: Platform, lay: Layout, system: Any, capacity_bytes: float,
                 notes: list[str]) -> dict[str, Any]:
    """The record of a decoder training run (`accelsim.llm.run`): the step's figures, or why
    the split does not fit."""
    model = plat.cfg
    unused = sorted(set(cfg.train) - {"accumulate"})
    if unused:
        raise AccelsimError(f"{', '.join(unused)} apply to the storage-to-accelerator training "
                            "pipeline, not to a decoder's training step: drop them")
    if plat.weights != plat.precision:
        raise AccelsimError("decoder training keeps 16-bit weights: drop weight_precision")
    seq = cfg.scenario.input.get("seq_len", model.context)
    if seq > model.context:
        raise AccelsimError(f"seq_len {seq:,} exceeds {model.name}'s context of "
                            f"{model.context:,} tokens")
    # default: as many replicas as the system holds
    dp = replicas(cfg.devices, lay, system, system.device_count // lay.gpus)
    split = TrainSplit(dp, cfg.scenario.batch_size, seq, cfg.train.get("accumulate", 1),
                       cfg.llm.get("zero", 0), bool(cfg.llm.get("recompute", False)))
    out = train_step(plat, lay, split, capacity_bytes)
    mem = out.pop("memory")
    record: dict[str, Any] = {
        "workload": {"name": cfg.scenario.name, "mode": "train",
                     "batch_size": split.micro_batch, "precision": plat.precision,
                     "params": model.params, "active_params": model.active_params,
                     "flops_per_sample": out["flops_per_token"] * seq, "seq_len": seq,
                     "model_source": model.source},
        "hardware": {"name": plat.profile.name, "class": plat.profile.device_class,
                     "software": plat.stack.name, "compute_precision": plat.precision,
                     "software_default": cfg.software == DEFAULT, "system": system.name,
                     "fused_attention": plat.fused_attention},
        "tp": lay.tp, "pp": lay.pp, "dp": dp, "zero": split.zero,
        "recompute": split.recompute, "accumulate": split.microbatches, "layers": [],
        "unsupported_ops": [], "notes": notes, "memory": mem,
    }
    if not mem["fits"]:
        notes.insert(0, f"does not fit: training {model.name} with tp {lay.tp}, pp {lay.pp}, "
                        f"ZeRO {split.zero} over {dp} replica(s) needs "
                        f"{mem['required_bytes'] / 1e9:,.1f} GB per GPU on "
                        f"{plat.profile.name}, which has {capacity_bytes / 1e9:,.1f} GB")
        return record | dict.fromkeys(("throughput_samples_per_s", "latency_s",
                                       "energy_j_per_sample", "average_power_w",
                                       "tokens_per_s", "mfu", "step_time_s")) | {
            "bottleneck": "memory capacity", "devices": out["devices"],
            "bottleneck_detail": "raise tp, pp or the ZeRO stage, recompute, or shrink batch"}
    comm = out["tp_comm_s"] + out["dp_comm_s"]
    kind = "communication" if comm > 0.3 * out["step_time_s"] else "compute"
    return record | out | {
        "throughput_samples_per_s": out["tokens_per_s"] / seq, "latency_s": out["step_time_s"],
        "energy_j_per_sample": out["energy_j_per_token"] * seq, "bottleneck": kind,
        "bottleneck_detail": (f"TP all-reduces {out['tp_comm_s']:.3g} s, DP exchange "
                              f"{out['dp_comm_s']:.3g} s, pipeline bubble "
                              f"{out['pipeline_bubble']:.0%} of a {out['step_time_s']:.3g} s "
                              "step")}
