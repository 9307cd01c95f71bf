"""Training a decoder: one optimizer step of a global batch on a TP x PP x DP split, from the
same per-layer rows as inference, with their backward rows and the optimizer update costed by
the device's class model.

    out = train_step(plat, lay, TrainSplit(dp=4, micro_batch=1, seq=4096, microbatches=8,
                                           zero=1, recompute=False), capacity_bytes=80e9)
    out["tokens_per_s"], out["mfu"], out["memory"], out["energy_j_per_token"]

A step: `microbatches` micro-batches of `micro_batch` sequences of `seq` tokens per replica
(gradient accumulation, and the pipeline's microbatches), each forward then backward (with full
recomputation: the forward again before the backward) through `pp` stages (GPipe / 1F1B bubble:
(m + pp - 1) stage passes for m microbatches; with `virtual_stages` v chunks per GPU, Megatron's
interleaved 1F1B, Narayanan et al. 2021, arXiv:2104.04473: m + (pp - 1) / v passes, each with v
times the stage-boundary transfers). A stage's layers run with their TP collectives as
SimPy events on the link, as in inference (`accelsim.llm.tp_events`; `overlap_tp` means the
same in both): two all-reduces per layer forward and two backward (Megatron-LM), or with expert
parallelism one all-reduce and two all-to-alls each way. Then the data-parallel gradient
exchange as SimPy events overlapping the last micro-batch's backward (`accelsim.llm.dp_events`:
bucketed all-reduce, or reduce-scatter and a weight all-gather after the optimizer under ZeRO
1-3; across `nodes` the hierarchical collective over the NICs) and the Adam update.
Backward rows (the `accelsim.workload.work` convention): a weight GEMM does dX and dW (twice its
forward FLOPs), FlashAttention's backward 2.5x its forward (it recomputes the scores: five GEMMs
for two, Dao 2023, arXiv:2307.08691), elementwise rows once more; each reads what forward saved
and the output gradient and writes the input (and weight) gradient.
Context parallelism (`cp`, Megatron-LM's): each sequence split over cp GPUs, each holding
its tokens' activations and computing its queries against every earlier key (1/cp of the
causal pairs, load-balanced), the K/V chunks passed ring-wise beside the attention; the cp
ranks hold the same weights, so they join the data-parallel ranks in the gradient exchange.
ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054): mixed-precision Adam keeps 16 bytes per
parameter (2 weights, 2 gradients, 12 fp32 master, momentum and variance); stage 1 shards the
12 over the replicas, stage 2 the gradients too, stage 3 the weights too. Stage 0 all-reduces
the gradients; stages 1-3 reduce-scatter them (each replica updates its shard), stages 1-2 then
all-gather the updated weights (the same volume as an all-reduce in all), stage 3 gathers the
weights in each micro-batch's forward and backward instead.
Energy: the rows' energies from the device model (dynamic plus static power over each row, each
row within the TDP) for the work every GPU does, plus static power while it waits, plus the
links, NVSwitch chips and NICs (`accelsim.llm.train_comm`); average power is the whole
step's (GPUs, links, switches and NICs) over the step time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.estimate import power_limits_w
from accelsim.errors import AccelsimError
from accelsim.interconnect.buckets import DEFAULT_BUCKET_MIB, MIB
from accelsim.llm.costs import Platform, cost_frames
from accelsim.llm.memory import (
    LOGIT_BYTES,
)
from accelsim.llm.parallel import Layout
from accelsim.llm.steps import ALLREDUCES_PER_LAYER, StepModel, prefill_step
from accelsim.llm.tp_events import stage_events
from accelsim.llm.train_comm import (
    WEIGHT_BYTES,
    dp_step,
    shards_busy,
    step_energy_j,
    tp_link_energy,
)
from accelsim.llm.train_parts import (
    GRAD_BYTES,
    LORA_ROWS,
    cp_exposed_s,
    grad_bytes,
    params_per_gpu,
    qkv_out,
    trained_per_gpu,
)
from accelsim.llm.work import (
    Rows,
    Step,
    elementwise_rows,
    embed_rows,
    layer_rows,
    linear_rows,
)
from accelsim.sim.straggler import expected_max
from accelsim.workload.ops import OpKind
from accelsim.workload.work import OPTIMIZER_FLOPS_PER_PARAM

ZERO_STAGES = (0, 1, 2, 3)
ADAM_BYTES = 12.0  # per parameter, mixed precision (weights: WEIGHT_BYTES; gradients: GRAD_BYTES)
# x forward; any other row: 1.0. NB: the token rows' own convention, coarser than the graph's
# per-element backward FLOPs of `accelsim.workload.counts` (e.g. RMSNorm 6 / 4).
BACKWARD_FLOPS = {OpKind.LINEAR.value: 2.0, OpKind.ATTENTION.value: 2.5}


@dataclass(frozen=True)
class TrainSplit:
    """The data-parallel side of a training step: replicas (all nodes), micro-batch
    (sequences), sequence length (tokens), micro-batches per step, ZeRO stage, full activation
    recomputation, nodes, and the gradient exchange: overlapped with backward in buckets of
    `bucket_bytes`, or one message after it; all-reduce algorithm."""

    dp: int
    micro_batch: int
    seq: int
    microbatches: int = 1
    zero: int = 0
    recompute: bool = False
    nodes: int = 1
    overlap_dp: bool = True
    bucket_bytes: float = DEFAULT_BUCKET_MIB * MIB
    allreduce: str = "ring"
    device_spread: float = 0.0  # relative std of step time between GPUs (`sim.straggler`)
    virtual_stages: int = 1  # model chunks per GPU (interleaved 1F1B)
    # context parallelism: each sequence split over `cp` GPUs. Then `dp` counts the ranks
    # holding one weight shard (data x context parallel: the gradient exchange's and ZeRO's
    # group, as Megatron-LM's DP-CP group) and `seq` is the tokens of a sequence per rank.
    cp: int = 1
    # LoRA fine-tuning (`lora_rank` > 0): the base weights frozen, rank-r adapters on each
    # layer's QKV projection trained (NeMo's lora_tuning defaults: target attention_qkv)
    lora_rank: int = 0

    def check(self, lay: Layout | None = None) -> None:
        if self.zero not in ZERO_STAGES:
            raise AccelsimError(f"knob 'zero' = {self.zero!r}: choose one of 0, 1, 2, 3")
        v = self.virtual_stages
        if v == 1 or lay is None:
            return
        if lay.pp == 1 or lay.layers_per_stage % v or lay.n_layers % lay.pp:
            raise AccelsimError(f"knob 'vp' = {v}: interleaving needs pp > 1 and stages of "
                                f"equal layers that vp divides ({lay.n_layers} layers over "
                                f"pp {lay.pp})")
        if self.microbatches % lay.pp:
            raise AccelsimError(f"knob 'vp' = {v}: the interleaved schedule runs micro-batches "
                                f"in groups of pp = {lay.pp}; accumulate = "
                                f"{self.microbatches} is not a multiple")


def _backward(work: pd.DataFrame, frozen: bool = False) -> pd.DataFrame:
    """Backward rows of forward rows (same op_index, so the class model finds their GEMMs).
    `frozen` (LoRA): a base weight GEMM computes its input gradient only (once its forward
    FLOPs, not twice), the adapters both, and the frozen embedding table takes no gradient."""
    factor = work["op"].map(BACKWARD_FLOPS).fillna(1.0).to_numpy()
    if frozen:
        base = (work["op"] == OpKind.LINEAR.value) & ~work["name"].isin(LORA_ROWS)
        factor = np.where(base.to_numpy(), 1.0, factor)
        work, factor = (work[(work["op"] != OpKind.EMBEDDING.value).to_numpy()],
                        factor[(work["op"] != OpKind.EMBEDDING.value).to_numpy()])
    read, write = work["read_bytes"].to_numpy(), work["write_bytes"].to_numpy()
    return work.assign(phase="backward", flops=work["flops"].to_numpy() * factor,
                       read_bytes=read + write, write_bytes=read)


def _micro_rows(plat: Platform, split: TrainSplit) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Forward and backward rows of one micro-batch: shape 0 one layer, shape 1 the ends
    (embedding, LM head over every token, the loss)."""
    step = prefill_step(split.micro_batch, float(split.seq))
    if split.cp > 1:  # the rank's queries meet every earlier key of the whole sequence
        whole = float(split.seq * split.cp)
        step = Step(step.tokens, split.micro_batch,
                    split.micro_batch * whole * (whole + 1) / 2 / split.cp,
                    split.micro_batch * whole)
    rows = Rows("forward", plat.tiles)
    layer_rows(rows, plat.cfg, plat.shard, step, plat.formats, plat.fused_attention)
    if split.lora_rank:  # the adapter beside the QKV projection: x A (d -> r), then B
        cfg, r = plat.cfg, split.lora_rank
        linear_rows(rows, LORA_ROWS[0], step.tokens, r, cfg.d_model, plat.formats, False)
        linear_rows(rows, LORA_ROWS[1], step.tokens, qkv_out(plat), r, plat.formats, False)
    rows.shape_id = 1
    embed_rows(rows, plat.cfg, step, plat.formats)
    vocab = plat.shard.vocab(plat.cfg)
    linear_rows(rows, "lm_head", step.tokens, vocab, plat.cfg.d_model, plat.formats, False,
                high_precision=True)
    elementwise_rows(rows, "loss", (OpKind.SOFTMAX,), step.tokens * vocab, 1, plat.formats)
    work, gemms, ids = rows.frames()
    work = work.assign(shape=ids)
    return pd.concat([work, _backward(work, split.lora_rank > 0)], ignore_index=True), gemms


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


def train_memory(plat: Platform, lay: Layout, split: TrainSplit,
                 capacity_bytes: float) -> dict[str, Any]:
    """Per-GPU memory of a training step (the first stage, which holds the most micro-batches
    in flight under 1F1B), bytes."""
    cfg, shard = plat.cfg, plat.shard
    params, trained = params_per_gpu(plat, lay), trained_per_gpu(plat, lay, split)
    shard_by = {stage: split.dp if split.zero >= stage else 1 for stage in (1, 2, 3)}
    act = plat.formats.act_bytes
    routed = cfg.experts_per_token * shard.experts(cfg) / cfg.n_experts
    # NB: what a layer saves per token: both norms' inputs and outputs, QKV, the attention
    # output (FlashAttention keeps no scores), the FFN's hidden activations (SwiGLU: gate, up
    # and product; GELU and squared ReLU: the pre-activation and its output); sequence
    # parallelism (Korthikanti et al. 2022, arXiv:2205.05198) splits the norms' over TP.
    # Under fp8 GEMMs each GEMM's input (the norms' outputs, the attention output, the FFN's
    # last activation) is saved as its fp8 cast, as Transformer Engine's Linear saves it.
    norms = 2 * cfg.d_model / (plat.tp if plat.stack.sequence_parallel else 1)
    ffn = shard.d_ff(cfg) * routed
    hidden = 2 * ffn if cfg.mlp == "swiglu" else ffn  # saved beside the GEMM input
    gemm_in = plat.formats.gemm_in
    per_token = (act * (norms + cfg.qkv_out / plat.tp + hidden)
                 + gemm_in * (norms + shard.heads(cfg) * cfg.head_dim + ffn))
    if split.recompute:  # the layer inputs, and one layer's whole set while it recomputes
        per_token_stage = act * cfg.d_model * lay.layers_per_stage + per_token
    else:
        per_token_stage = per_token * lay.layers_per_stage
    # 1F1B's first stage holds pp micro-batches; interleaved, its warm-up holds
    # 2 (pp - 1) + (v - 1) pp + 1 chunks of 1/v of its layers (Megatron's schedule)
    v = split.virtual_stages
    in_flight = min(split.microbatches, lay.pp + (lay.pp - 1) / v if v > 1 else lay.pp)
    tokens = split.micro_batch * split.seq
    logits = tokens * shard.vocab(cfg) * LOGIT_BYTES
    mem = {
        "weights_bytes": (params * WEIGHT_BYTES / shard_by[3] if not split.lora_rank
                          else (params + trained) * WEIGHT_BYTES),  # frozen base + adapters
        "gradients_bytes": trained * GRAD_BYTES / shard_by[2],
        "optimizer_bytes": trained * ADAM_BYTES / shard_by[1],
        "activations_bytes": per_token_stage * tokens * in_flight + logits,
        "reserve_bytes": plat.stack.figure("llm.memory_reserve_fraction",
                                           plat.profile.device_class) * capacity_bytes,
    }
    need = sum(mem.values())
    return mem | {"required_bytes": need, "capacity_bytes": capacity_bytes,
                  "fits": need <= capacity_bytes, "largest_batch_that_fits": None,
                  "per_gpu": True}


def _stage_passes(plat: Platform, lay: Layout, split: TrainSplit, fwd_s: float, bwd_s: float
                  ) -> dict[str, float]:
    """One micro-batch through the largest stage's layers, forward then backward, with the TP
    collectives as events on the link (`accelsim.llm.tp_events`, as in inference: two
    all-reduces a layer each way, Megatron-LM; with expert parallelism one all-reduce and the
    dispatch and combine all-to-alls, whose backward are all-to-alls too). Full recomputation
    runs the forward again, collectives included, before each layer's backward."""
    tokens = split.micro_batch * split.seq
    coll_s, _ = StepModel(plat, lay).layer_comm_s(tokens)
    per_layer = 3 if plat.expert_parallel else ALLREDUCES_PER_LAYER
    again = 2 if split.recompute else 1
    n = lay.layers_per_stage
    f_s, f_events = stage_events([fwd_s] * n, [coll_s] * n, per_layer, lay.overlap_tp)
    b_compute_s = bwd_s + (fwd_s if split.recompute else 0.0)
    b_s, b_events = stage_events([b_compute_s] * n, [again * coll_s] * n, again * per_layer,
                                 lay.overlap_tp)
    exposed_s = f_s + b_s - n * (fwd_s + b_compute_s) if f_events + b_events else 0.0
    return {"forward_s": f_s, "backward_s": b_s, "exposed_s": exposed_s,
            "busy_s": n * (1 + again) * coll_s, "events": float(f_events + b_events)}


def _p2p_exposed_s(plat: Platform, lay: Layout, v: int, msg_bytes: float, forward_s: float,
                   backward_s: float) -> float:
    """Stage-boundary transfer time on a stage's critical path per micro-batch: one send
    forward and one backward per model chunk. Under sequence parallelism each TP GPU sends
    its sequence shard (msg / tp). Interleaved (v > 1) the sends are posted asynchronously and
    hide behind the next chunk's compute (NeMo's overlap_p2p_comm, set in its GPT-3 175B
    recipe beside interleaving); otherwise they are serial."""
    shard = msg_bytes / (lay.tp if plat.stack.sequence_parallel and lay.tp > 1 else 1)
    p2p = lay.p2p_s(shard if v > 1 else msg_bytes)
    if v == 1:
        return 2 * p2p
    return v * (max(p2p - forward_s / v, 0.0) + max(p2p - backward_s / v, 0.0))


def train_step(plat: Platform, lay: Layout, split: TrainSplit, capacity_bytes: float,
               system: Any) -> dict[str, Any]:
    """Time, throughput, MFU, memory and energy of one training step (module docstring); SI
    units. `system`: the node (its links and NICs carry the exchanges)."""
    split.check(lay)
    work, gemms = _micro_rows(plat, split)
    done = cost_frames(plat, work.drop(columns="shape"), gemms).assign(shape=work["shape"])
    # Every GPU of the step is synchronised (TP each layer, PP each micro-batch, DP each step):
    # the slowest of them paces its compute (`accelsim.sim.straggler`). NB: energies stay the
    # nominal die's (the dies' spread averages out); the others' wait is static power below.
    pace = 1.0 + split.device_spread * expected_max(lay.gpus * split.dp)
    done["time_s"] = done["time_s"] * pace
    by = done.groupby(["shape", "phase"])[["time_s", "energy_j"]].sum()

    def part(shape: int, phase: str, col: str = "time_s") -> float:
        return float(by[col].get((shape, phase), 0.0))

    fwd = {s: part(s, "forward") for s in (0, 1)}
    bwd = {s: part(s, "backward") for s in (0, 1)}
    cp_f, cp_b = cp_exposed_s(plat, lay, split, done)
    fwd[0], bwd[0] = fwd[0] + cp_f, bwd[0] + cp_b
    tokens = split.micro_batch * split.seq
    msg = tokens * plat.cfg.d_model * plat.formats.act_bytes
    tp = _stage_passes(plat, lay, split, fwd[0], bwd[0])
    v = split.virtual_stages
    stage_s = tp["forward_s"] + tp["backward_s"] + fwd[1] + bwd[1] + _p2p_exposed_s(
        plat, lay, v, msg, tp["forward_s"], tp["backward_s"])
    m, pp = split.microbatches, lay.pp
    passes = m + (pp - 1) / v  # stage passes on the critical path, the bubble's included
    compute_s = passes * stage_s
    params = trained_per_gpu(plat, lay, split)
    opt_s, opt_j = _optimizer(plat, params / (split.dp if split.zero >= 1 else 1))
    opt_s *= pace
    window_s = bwd[1] + tp["backward_s"]  # the last micro-batch's backward on the stage
    backward = done[(done["shape"] == 0) & (done["phase"] == "backward")]
    # The window in backward order: the ends (LM head, loss), then each layer with its TP
    # collectives, each making its gradients; the embedding's (and a tied or staged head's)
    # last. NB: the largest stage stands for every stage's group (it ends the step last); the
    # LM head's gradients are taken ready with the embedding's; a running DP collective slows
    # the TP collectives' time in the window as it slows compute.
    dp = dp_step(plat, lay, split, system, backward, np.array(
        [bwd[1], *[tp["backward_s"] / lay.layers_per_stage] * lay.layers_per_stage, 0.0]),
        grad_bytes(plat, lay, split), opt_s, params)
    step_s = compute_s - window_s + dp["end_s"]
    # (no collective: 0, not the float rounding of end - window - optimizer)
    dp_s = max(dp["end_s"] - window_s - opt_s, 0.0) if dp["collectives"] else 0.0
    busy = shards_busy(plat, split, part, opt_s, opt_j, lay.gpus * split.dp)
    static_w = power_limits_w(plat.profile)[1]
    gpus = lay.gpus * split.dp
    accel_j = busy["energy_j"] + static_w * max(gpus * step_s - busy["time_s"], 0.0)
    tp_link = tp_link_energy(plat, lay, split, tokens, tp["busy_s"])
    energy = step_energy_j(plat, lay, split, system, dp, tp_link, accel_j, step_s)
    forward = done[(done["phase"] == "forward") & done["matmul"]]
    fwd_flops = (plat.cfg.n_layers * forward.loc[forward["shape"] == 0, "flops"].sum()
                 + forward.loc[forward["shape"] == 1, "flops"].sum()) * plat.tp
    # NB: MFU's model FLOPs: 3 x the forward GEMMs (forward, dX, dW), no recomputation;
    # under LoRA 2 x (the frozen weights take no dW; the adapters' is left out)
    model_flops = (2.0 if split.lora_rank else 3.0) * fwd_flops * m * split.dp
    peak = plat.profile.peak_flops_per_s(plat.gemm_precision)
    step_tokens = tokens * m * split.dp
    energy_j = energy["total_j"]
    return {
        "step_time_s": step_s, "tokens_per_s": step_tokens / step_s,
        "global_batch_tokens": step_tokens,
        "mfu": None if peak is None else float(model_flops / (step_s * peak * gpus)),
        "model_flops_per_step": float(model_flops), "pipeline_bubble": (passes - m) / passes,
        "tp_comm_s": passes * tp["exposed_s"], "tp_events": int(tp["events"]),
        # every DP collective timed (ZeRO-3's weight gathers included); the algorithm of each
        # (`dp_events.algorithm_summary`: one name when they all run the same)
        "dp_comm_s": dp_s, "dp_collectives": dp["collectives"],
        "dp_algorithm": dp["algorithm"], "dp_contention_share": dp["share"],
        "optimizer_s": opt_s, "devices": gpus,
        "memory": train_memory(plat, lay, split, capacity_bytes),
        "forward_s_per_layer": fwd[0], "backward_s_per_layer": bwd[0],
        "flops_per_token": float(model_flops / step_tokens),
        "energy_j": energy_j, "energy_j_per_token": energy_j / step_tokens,
        "average_power_w": energy_j / step_s, "energy_breakdown_j": energy["parts"],
        "energy_notes": energy["notes"], "records": dp["records"].assign(
            start_s=dp["records"]["start_s"] + compute_s - window_s,
            end_s=dp["records"]["end_s"] + compute_s - window_s),
    }
