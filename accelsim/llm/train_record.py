"""The record of a decoder training run (`accelsim.llm.run`): the knobs it takes (the
pipeline's data-parallel ones: accumulate, bucket_mb, overlap_allreduce, allreduce, nodes), the
split, and the step's figures from `accelsim.llm.train`, or why the split does not fit.

    record = train_record(cfg, plat, lay, system, capacity_bytes, notes)
    record["records"]   # the data-parallel exchange's event records (None if it does not fit)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.interconnect.buckets import DEFAULT_BUCKET_MIB, MIB
from accelsim.interconnect.collectives import ALGORITHMS
from accelsim.interconnect.nccl import AUTO
from accelsim.llm.checkpoint import checkpoint_figures, checkpoint_plan
from accelsim.llm.costs import Platform
from accelsim.llm.parallel import Layout, replicas
from accelsim.llm.train import TrainSplit, train_step
from accelsim.profiles.software import DEFAULT
from accelsim.results.headline import Figures, reserve
from accelsim.sim.straggler import SPREAD_RANGE, class_spread, expected_max, is_spread

# the pipeline's training knobs a decoder's step takes (`accelsim.sim.knobs`)
PIPELINE_KNOBS = ("accumulate", "bucket_mb", "overlap_allreduce", "allreduce", "nodes",
                  "device_spread")


def _split(cfg: Any, lay: Layout, system: Any, seq: int) -> TrainSplit:
    """The data-parallel split from the knobs: replicas per node (default: as many as the
    system holds) times nodes."""
    t = cfg.train
    algo = t.get("allreduce", "ring")
    if algo not in (*ALGORITHMS, AUTO):
        raise AccelsimError(f"knob 'allreduce' = {algo!r}: choose one of "
                            f"{', '.join((*ALGORITHMS, AUTO))}")
    nodes = t.get("nodes", 1)
    if nodes > 1 and (system.network is None or not system.nic_count):
        raise AccelsimError(f"nodes = {nodes}: system '{system.name}' has no NICs (links.network "
                            "and links.nic_count) to join several nodes")
    if nodes > 1 and algo == "nvls":
        raise AccelsimError("knob 'allreduce' = 'nvls' reduces inside one NVLink switch domain "
                            "only; across nodes choose ring, tree or auto")
    if cfg.llm.get("zero", 0) >= 1 and algo not in ("ring", AUTO):
        raise AccelsimError(f"knob 'allreduce' = {algo!r} names the all-reduce's algorithm; "
                            "ZeRO >= 1 exchanges gradients by reduce-scatter and all-gather "
                            "(NCCL's choice): drop --allreduce or use ZeRO 0")
    if lay.replica_nodes > 1:  # a replica fills whole nodes (`parallel.layout`)
        if cfg.devices is not None:
            raise AccelsimError(f"devices = {cfg.devices}: a tp x pp = {lay.gpus}-GPU replica "
                                "spans nodes; --nodes sets the replicas")
        dp = nodes // lay.replica_nodes
    else:
        dp = replicas(cfg.devices, lay, system, system.device_count // lay.gpus) * nodes
    cp = cfg.llm.get("cp", 1)
    if cp > 1 and (dp % cp or seq % (2 * cp)):
        raise AccelsimError(f"cp = {cp}: the {dp} GPU(s) of each tp x pp position must be a "
                            f"multiple of cp, and the sequence ({seq:,} tokens) a multiple of "
                            f"2 x cp (Megatron-LM splits it in 2 x cp chunks)")
    # (dp: the ranks of one weight shard, data x context parallel; seq: tokens per rank)
    return TrainSplit(dp, cfg.scenario.batch_size, seq // cp, t.get("accumulate", 1),
                      cfg.llm.get("zero", 0), bool(cfg.llm.get("recompute", False)), nodes,
                      bool(t.get("overlap_allreduce", True)),
                      float(t.get("bucket_mb", DEFAULT_BUCKET_MIB)) * MIB, algo,
                      virtual_stages=cfg.llm.get("vp", 1), cp=cp,
                      lora_rank=cfg.llm.get("lora_rank", 0))


def _spread(cfg: Any, plat: Platform) -> float:
    """The device speed spread: the knob's, else the GPU class's fitted value."""
    given = cfg.train.get("device_spread")
    if given is None:
        return class_spread(plat.profile)[0]
    if not is_spread(given):
        raise AccelsimError(f"knob 'device_spread' = {given!r}: {SPREAD_RANGE}")
    return float(given)


def train_record(cfg: Any, plat: Platform, lay: Layout, system: Any, capacity_bytes: float,
                 notes: list[str]) -> dict[str, Any]:
    """The record of a decoder training run (`accelsim.llm.run`): the step's figures, or why
    the split does not fit."""
    model = plat.cfg
    unused = sorted(set(cfg.train) - set(PIPELINE_KNOBS))
    if unused:
        raise AccelsimError(f"{', '.join(unused)} apply to the storage-to-accelerator training "
                            "pipeline, not to a decoder's training step: drop them")
    if plat.weights != plat.precision:
        raise AccelsimError("decoder training keeps 16-bit weights: drop weight_precision")
    seq = cfg.scenario.input.get("seq_len", model.context)
    if seq > model.context:
        raise AccelsimError(f"seq_len {seq:,} exceeds {model.name}'s context of "
                            f"{model.context:,} tokens")
    split = replace(_split(cfg, lay, system, seq), device_spread=_spread(cfg, plat))
    gpus = split.dp * lay.gpus
    ckpt_plan = checkpoint_plan(cfg.llm, model.params, gpus, split.nodes, system)
    out = train_step(plat, lay, split, capacity_bytes, system)
    mem = out.pop("memory")
    records = out.pop("records")
    notes += out.pop("energy_notes")
    if out["devices"] > 1:
        fitted, line = class_spread(plat.profile)
        if split.device_spread != fitted:
            line = f"step-time spread between devices {split.device_spread:.2%} (as given)"
        notes.append(f"{line}; the slowest of {out['devices']} devices takes "
                     f"x{1 + split.device_spread * expected_max(out['devices']):.4g} the "
                     "nominal compute time")
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
        "tp": lay.tp, "pp": lay.pp, "vp": split.virtual_stages, "cp": split.cp,
        "dp": split.dp // split.cp,
        "zero": split.zero, "lora_rank": split.lora_rank, "nodes": split.nodes,
        "overlap_allreduce": split.overlap_dp, "bucket_bytes": split.bucket_bytes,
        "recompute": split.recompute, "accumulate": split.microbatches, "layers": [],
        "unsupported_ops": [], "notes": notes, "memory": mem,
    }
    if not mem["fits"]:
        notes.insert(0, f"does not fit: training {model.name} with tp {lay.tp}, pp {lay.pp}, "
                        f"ZeRO {split.zero} over {split.dp // split.cp} replica(s) needs "
                        f"{mem['required_bytes'] / 1e9:,.1f} GB per GPU on "
                        f"{plat.profile.name}, which has {capacity_bytes / 1e9:,.1f} GB")
        return Figures(None, None, None, None, "memory capacity",
                       "raise tp, pp or the ZeRO stage, recompute, or shrink batch").place(
            record | reserve() | dict.fromkeys(("tokens_per_s", "mfu", "step_time_s"))
            | {"bottleneck": None, "devices": out["devices"], "records": None})
    parts = step_parts(out)
    comm_s = parts["TP collectives (exposed)"] + parts["DP exchange (exposed)"]
    shares = {"compute": parts["compute"], "communication": comm_s,
              "pipeline bubble": parts["pipeline bubble"], "optimizer": parts["optimizer"]}
    kind = max(shares, key=lambda k: shares[k])
    step_s = out["step_time_s"]
    detail = (f"of a {step_s:.3g} s step: compute {parts['compute'] / step_s:.0%}, TP "
              f"collectives {parts['TP collectives (exposed)']:.3g} s and DP exchange "
              f"{out['dp_comm_s']:.3g} s exposed ({comm_s / step_s:.0%}), pipeline bubble "
              f"{parts['pipeline bubble'] / step_s:.0%}, optimizer "
              f"{parts['optimizer'] / step_s:.0%}")
    if ckpt_plan is not None:
        ckpt = checkpoint_figures(model.params, out["devices"], step_s, ckpt_plan, system)
        record["checkpoint"] = ckpt
        notes.append(f"checkpoints: {ckpt['bytes'] / 1e9:,.0f} GB every {ckpt['every_steps']} "
                     f"steps ({ckpt['mode']}) to {ckpt['destination']}; "
                     + "; ".join(ckpt["notes"]))
    # (train_step's average_power_w keeps its place in the layout; placed again, the same)
    return Figures(out["tokens_per_s"] / seq, step_s, out["energy_j_per_token"] * seq,
                   out["average_power_w"], kind, detail).place(record | out
                                                               | {"records": records})


def step_parts(out: dict[str, Any]) -> dict[str, float]:
    """A training step's time (`train_step`'s figures) split into parts that sum to it, s: the
    pipeline's stage passes (compute, exposed TP collectives, bubble), the exposed DP exchange
    and the optimizer."""
    pipeline_s = out["step_time_s"] - out["dp_comm_s"] - out["optimizer_s"]
    bubble_s = out["pipeline_bubble"] * pipeline_s
    tp_s = out["tp_comm_s"] * (1 - out["pipeline_bubble"])  # the bubble's passes hold theirs
    return {"compute": pipeline_s - bubble_s - tp_s, "pipeline bubble": bubble_s,
            "TP collectives (exposed)": tp_s, "DP exchange (exposed)": out["dp_comm_s"],
            "optimizer": out["optimizer_s"]}
