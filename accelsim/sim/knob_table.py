"""The knob table: every knob of a simulation, where its value goes, its type, the modes it
applies to and its accepted range (`accelsim.sim.knobs` converts and checks values against it).

    KNOBS["batch"].modes          # ("infer", "train", "serve", "federated")
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.physical import (
    MAX_BATCH,
    MAX_DEVICES,
    MAX_EPOCHS,
    MAX_INPUT,
    MAX_NODES,
    MAX_RATE_PER_S,
    MAX_REQUESTS,
    MAX_STEPS,
    MAX_THREADS,
    MAX_WAIT_MS,
    MIN_RATE_PER_S,
)
from accelsim.sim.spec import DEFAULT_MAX_EVENTS
from accelsim.sim.straggler import MAX_SPREAD

ALL_MODES = ("infer", "train", "serve", "federated")
TRAIN = ("train",)
SERVE = ("serve",)
SIMULATED = ("train", "serve")
LLM = ("infer", "serve")  # token-level decoder knobs (accelsim.llm)
FEDERATED = ("federated",)
ALL_LLM = ("infer", "serve", "train")





# NB: the smallest latency target: 1 us. A target of 0 ms no request can meet (goodput 0) is a
# mistake, not a measurement.
MIN_SLO_MS = 1e-3


@dataclass(frozen=True)
class Knob:
    """One user-facing knob: where its value goes, its type, the modes it applies to."""

    name: str
    target: str  # "scenario" | "config" | "train" | "serve" | "llm" | "model"
    field: str  # the attribute or dict key in the target
    kind: type
    modes: tuple[str, ...]
    help: str
    scale: float = 1.0  # user unit -> SI (max_wait_ms -> max_wait_s)
    low: float | None = None  # smallest value accepted (in the user's unit)
    high: float | None = None  # largest value accepted: a ceiling on work, or physics
    decoder_modes: tuple[str, ...] = ()  # further modes it applies to for a decoder model


# The ceilings on counts that size work (batch, devices, threads, ...) are in
# `accelsim.physical`, beside the physical ranges of data files.
# NB: about 15 s and 1 GB of records on one core; a full ImageNet epoch on 8 GPUs is ~200,000.
MAX_MAX_EVENTS = 200_000_000  # the most a user may opt into (tens of GB of records)
# NB: a bucket under ~1 kB is launch latency only; over 1 TiB, every model is one bucket.
MIN_BUCKET_MIB = 0.001
MAX_BUCKET_MIB = 2.0**20


_KNOBS = (
    Knob("mode", "config", "mode", str, ALL_MODES,
         "the mode: infer, train, serve or federated (FedAvg rounds of clients)"),
    Knob("batch", "scenario", "batch_size", int, ALL_MODES,
         "batch size per accelerator (serve: the batcher's largest batch if max_batch unset)",
         low=1, high=MAX_BATCH),
    Knob("precision", "scenario", "precision", str, ALL_MODES, "numeric format"),
    Knob("optimizer", "scenario", "optimizer", str, ("train", "federated"),
         "training optimizer: sgd, momentum or adam"),
    Knob("software", "config", "software", str, ALL_MODES,
         "software stack (hw_profiles/software/; default: the device class's)"),
    Knob("tf32", "config", "tf32", bool, ALL_MODES,
         "fp32 GEMMs as TF32 on tensor cores (on) or in fp32 on CUDA cores (off), on GPUs "
         "whose tensor cores run TF32; default: the software stack's"),
    Knob("seq_len_dist", "config", "seq_lens", str, ("infer",),
         "transformer inference: the batches' sequence lengths, a file (one per line, or a CSV "
         "with a seq_len column) or uniform:MIN:MAX[:N]; batches formed in its order"),
    Knob("padding", "config", "padding", str, ("infer",),
         "with seq_len_dist: batch-max (each batch padded to its longest) or removed (packed, "
         "as TensorRT's variable-length BERT); default: the software stack's"),
    Knob("usd_per_device_hour", "config", "usd_per_device_hour", float, ALL_MODES,
         "price of one accelerator-hour, US$ (default: hw_profiles/prices/, else no $ figures)",
         low=1e-6, high=1e6),
    Knob("usd_per_kwh", "config", "usd_per_kwh", float, ALL_MODES,
         "electricity price, US$ per kWh at the wall: the run's energy cost (default: none)",
         low=0.0, high=100.0),
    Knob("pue", "config", "pue", float, ALL_MODES,
         "power usage effectiveness: facility power over IT power, with usd_per_kwh "
         "(default 1: the devices' own draw)", low=1.0, high=10.0),
    Knob("dataflow", "config", "dataflow", str, ALL_MODES,
         "systolic arrays: weight, output or input stationary (ws, os, is)"),
    Knob("devices", "config", "devices", int, SIMULATED, "accelerators used", low=1,
         high=MAX_DEVICES),
    Knob("seed", "config", "seed", int, (*SIMULATED, "federated"), "random seed", low=0,
         high=2**63 - 1),
    Knob("max_events", "config", "max_events", int, SIMULATED,
         f"most events a run may schedule (default {DEFAULT_MAX_EVENTS:,})", low=1,
         high=MAX_MAX_EVENTS),
    Knob("trainable", "scenario", "trainable", str, TRAIN,
         "transfer learning: the layers that train, all, last:N (the last N with weights) or "
         "from:LAYER (that layer and every one after it); the others frozen"),
    Knob("freeze", "scenario", "freeze", str, TRAIN,
         "transfer learning: layer names or prefixes joined by '+' kept frozen"),
    Knob("dataset", "train", "dataset", str, TRAIN, "dataset profile"),
    Knob("storage", "train", "storage", str, TRAIN, "storage profile"),
    Knob("storage_count", "train", "storage_count", int, TRAIN, "storage devices", low=1,
         high=MAX_THREADS),
    Knob("io_threads", "train", "io_threads", int, TRAIN, "reader threads per accelerator",
         low=1, high=MAX_THREADS),
    Knob("prep_workers", "train", "prep_workers", int, TRAIN,
         "CPU preparation workers per accelerator", low=1, high=MAX_THREADS),
    Knob("prefetch", "train", "prefetch_batches", int, TRAIN, "batches buffered (0: none)",
         low=0, high=MAX_THREADS),
    Knob("gpudirect", "train", "gpudirect", bool, TRAIN, "GPUDirect Storage"),
    Knob("decode", "train", "decode", str, TRAIN,
         "where samples are decoded: cpu (host prep workers), gpu (nvJPEG on the SMs) or hw "
         "(the hardware JPEG decoder); default gpu with GPUDirect, else cpu"),
    Knob("pinned_memory", "train", "pinned_memory", bool, TRAIN, "pinned host memory"),
    Knob("allreduce", "train", "allreduce", str, TRAIN,
         "gradient all-reduce algorithm: ring, tree, nvls (reduced inside NVLink switches) or "
         "auto (chosen by message size)"),
    Knob("overlap_allreduce", "train", "overlap_allreduce", bool, TRAIN,
         "overlap the all-reduce with backward"),
    Knob("bucket_mb", "train", "bucket_mb", float, TRAIN,
         "gradient bucket of the overlapped all-reduce, MiB (DDP's bucket_cap_mb, default 25)",
         low=MIN_BUCKET_MIB, high=MAX_BUCKET_MIB),
    Knob("accumulate", "train", "accumulate", int, TRAIN,
         "micro-steps per all-reduce and optimizer step (gradient accumulation)", low=1,
         high=MAX_STEPS),
    Knob("device_spread", "train", "device_spread", float, TRAIN,
         "relative spread of step time between devices, the slowest pacing each synchronised "
         "step (default: the device class's fitted value, 0 where none)", low=0.0,
         high=MAX_SPREAD),
    Knob("nodes", "train", "nodes", int, TRAIN,
         "nodes joined by the system's NICs, devices per node (hierarchical all-reduce); "
         "decoder inference and serving: the nodes a tp x pp replica (or replicas) fills",
         low=1, high=MAX_NODES, decoder_modes=LLM),
    Knob("every_node", "train", "every_node", bool, TRAIN,
         "with nodes: simulate every node (its devices' own speed, the barrier, the fabric), "
         "not one node taken for all"),
    Knob("fabric", "train", "fabric", str, TRAIN,
         "every-node runs: the cluster fabric (hw_profiles/fabrics/ or a .toml: groups, "
         "oversubscription, tiers; default: one non-blocking switch)"),
    Knob("placement", "train", "placement", str, TRAIN,
         "every-node runs: ranks packed (ring neighbours share a group) or scattered across "
         "the fabric's groups"),
    Knob("slow_node", "train", "slow_node", float, TRAIN,
         "every-node runs: one node's devices this many times slower (default 1: none)",
         low=1.0, high=100.0),
    Knob("link_failures", "train", "link_failures", int, TRAIN,
         "every-node runs: nodes that each lost one NIC link (their traffic on the others)",
         low=0, high=MAX_NODES),
    Knob("jobs", "train", "jobs", int, TRAIN,
         "training jobs like this one on the node, sharing its storage, page cache and "
         "preparation cores (devices: each job's; one simulated, the others alike)", low=1,
         high=MAX_DEVICES),
    Knob("coordinated", "train", "coordinated", bool, TRAIN,
         "with jobs: one read and one decode of each sample feed every job (CoorDL's "
         "coordinated loading)"),
    Knob("steps", "train", "steps", int, TRAIN, "training steps", low=1, high=MAX_STEPS),
    Knob("epochs", "train", "epochs", int, TRAIN, "whole epochs", low=1, high=MAX_EPOCHS),
    Knob("rate", "serve", "rate_per_s", float, SERVE, "Poisson arrivals per second",
         low=MIN_RATE_PER_S, high=MAX_RATE_PER_S),
    Knob("concurrency", "serve", "concurrency", int, SERVE,
         "closed-loop clients (instead of --rate), each sending its next request when its "
         "last returns, --requests in all (decoders too)", low=1, high=MAX_REQUESTS),
    Knob("think_time_ms", "serve", "think_time_s", float, SERVE,
         "closed-loop think time from a request's return to its client's next, ms: "
         "exponential with this mean (default 0: at once)", scale=1e-3, low=0,
         high=MAX_WAIT_MS),
    Knob("max_batch", "serve", "max_batch", int, SERVE, "dynamic batcher: largest batch",
         low=1, high=MAX_BATCH),
    Knob("max_wait_ms", "serve", "max_wait_s", float, SERVE,
         "dynamic batcher: longest wait, ms", scale=1e-3, low=0, high=MAX_WAIT_MS),
    Knob("requests", "serve", "requests", int, SERVE, "requests to serve", low=1,
         high=MAX_REQUESTS),
    # Decoder models at the token level (accelsim.llm): any of these selects that path.
    Knob("model_config", "model", "model", str, ALL_LLM,
         "decoder models: a Hugging Face config.json to run as the workload's model (read "
         "when the run is set up; the run carries its shapes)"),
    Knob("prompt_tokens", "llm", "prompt_tokens", int, LLM,
         "decoder models: prompt tokens per request (serve: the mean)", low=1, high=MAX_INPUT),
    Knob("output_tokens", "llm", "output_tokens", int, LLM,
         "decoder models: output tokens per request (serve: the mean)", low=1, high=MAX_INPUT),
    Knob("tp", "llm", "tp", int, ALL_LLM, "decoder models: tensor-parallel GPUs", low=1,
         high=MAX_DEVICES),
    Knob("pp", "llm", "pp", int, ALL_LLM, "decoder models: pipeline-parallel stages", low=1,
         high=MAX_DEVICES),
    Knob("overlap_tp", "llm", "overlap_tp", bool, LLM,
         "decoder models: run the tensor-parallel all-reduces beside the compute"),
    Knob("expert_parallel", "llm", "expert_parallel", bool, ALL_LLM,
         "decoder models: spread whole experts of a mixture over the tp GPUs"),
    Knob("weight_precision", "llm", "weight_precision", str, LLM,
         "decoder models: weight format (fp8/int8/int4/fp4: weight-only, dequantised in the GEMM)"),
    Knob("kv_precision", "llm", "kv_precision", str, LLM,
         "decoder models: KV cache format (default: the compute precision)"),
    Knob("batching", "llm", "batching", str, SERVE,
         "decoder serving: continuous (join between decode steps) or static batching"),
    Knob("length_dist", "llm", "length_dist", str, SERVE,
         "decoder serving: prompt/output lengths fixed, uniform (1..2x mean) or exponential"),
    Knob("slo_ttft_ms", "llm", "slo_ttft_s", float, SERVE,
         "decoder serving: time-to-first-token target for goodput, ms", scale=1e-3,
         low=MIN_SLO_MS, high=MAX_WAIT_MS),
    Knob("slo_tpot_ms", "llm", "slo_tpot_s", float, SERVE,
         "decoder serving: time-per-output-token target for goodput, ms", scale=1e-3,
         low=MIN_SLO_MS, high=MAX_WAIT_MS),
    Knob("zero", "llm", "zero", int, TRAIN,
         "decoder training: ZeRO stage (0 none, 1 optimizer, 2 + gradients, 3 + weights)",
         low=0, high=3),
    Knob("recompute", "llm", "recompute", bool, TRAIN,
         "decoder training: recompute activations in the backward (full recomputation)"),
    Knob("vp", "llm", "vp", int, TRAIN,
         "decoder training: virtual pipeline stages per GPU (Megatron's interleaved 1F1B: "
         "the bubble / vp, vp x the stage transfers; must divide each stage's layers)",
         low=1, high=MAX_DEVICES),
    Knob("cp", "llm", "cp", int, TRAIN,
         "decoder training: context-parallel GPUs (each sequence split over them, K/V passed "
         "ring-wise beside the attention; Megatron-LM's context parallelism)", low=1,
         high=MAX_DEVICES),
    Knob("lora_rank", "llm", "lora_rank", int, TRAIN,
         "decoder training: LoRA fine-tuning, the base weights frozen and rank-r adapters on "
         "each layer's QKV projection trained (NeMo's default target)", low=1, high=2**16),
    Knob("checkpoint_every", "llm", "checkpoint_every", int, TRAIN,
         "decoder training: steps between checkpoints (weights and Adam state, 14 bytes a "
         "parameter, written by every rank)", low=1, high=MAX_STEPS),
    Knob("checkpoint_mode", "llm", "checkpoint_mode", str, TRAIN,
         "decoder training checkpoints: sync (training waits for the write) or async (it "
         "waits for the copy to host memory; the write overlaps the next steps)"),
    Knob("checkpoint_storage", "llm", "checkpoint_storage", str, TRAIN,
         "decoder training checkpoints: a storage system (name or .toml) the nodes write to "
         "as its clients (default: the nodes' own drives; the CLI's --storage-system sets it)"),
    Knob("chunked_prefill", "llm", "chunked_prefill", int, SERVE,
         "decoder serving: tokens per step, prompts prefilled in chunks beside the decodes (0: "
         "off; unset: the stack's default)", low=0, high=MAX_INPUT),
    Knob("prefill_tokens", "llm", "prefill_tokens", int, SERVE,
         "decoder serving without chunked prefill: the most prompt tokens one prefill-only "
         "step takes (vLLM's max_num_batched_tokens; default 8,192)", low=1, high=MAX_INPUT),
    Knob("requests_file", "llm", "requests_file", str, SERVE,
         "decoder serving: CSV trace of arrival_s,prompt_tokens,output_tokens rows (or "
         "Vidur's arrived_at,num_prefill_tokens,num_decode_tokens)"),
    # Federated learning (accelsim.sim.federated): clients train locally, a server averages.
    Knob("population", "federated", "clients", int, FEDERATED,
         "federated: clients in all (each the --hw device; default 10)", low=1, high=1 << 16),
    Knob("clients_per_round", "federated", "clients_per_round", int, FEDERATED,
         "federated: clients picked each round (default: all)", low=1, high=1 << 16),
    Knob("rounds", "federated", "rounds", int, FEDERATED, "federated: FedAvg rounds", low=1,
         high=100_000),
    Knob("local_steps", "federated", "local_steps", int, FEDERATED,
         "federated: training steps of --batch each client runs a round", low=1,
         high=MAX_STEPS),
    Knob("network", "federated", "network", str, FEDERATED,
         "federated: the clients' network (hw_profiles/networks/, default lte)"),
    Knob("uplink_mbps", "federated", "uplink_mbps", float, FEDERATED,
         "federated: client uplink, Mbit/s (default: the network's)", low=1e-3, high=1e6),
    Knob("downlink_mbps", "federated", "downlink_mbps", float, FEDERATED,
         "federated: client downlink, Mbit/s (default: the network's)", low=1e-3, high=1e6),
    Knob("rtt_ms", "federated", "rtt_s", float, FEDERATED,
         "federated: client round-trip time, ms (default: the network's)", scale=1e-3, low=0,
         high=MAX_WAIT_MS),
    Knob("deadline_s", "federated", "deadline_s", float, FEDERATED,
         "federated: a round's deadline; clients whose update has not arrived are dropped "
         "(default: wait for all)", low=1e-6, high=1e7),
    Knob("client_spread", "federated", "client_spread", float, FEDERATED,
         "federated: spread of client speed (lognormal sigma; 0: all alike)", low=0, high=5),
    Knob("server", "federated", "server", str, FEDERATED,
         "federated: the aggregating server, a system (its NICs and DRAM; default "
         "workstation)"),
    Knob("update_precision", "federated", "update_precision", str, FEDERATED,
         "federated: format of the updates clients send (default fp32)"),
)
KNOBS: dict[str, Knob] = {k.name: k for k in _KNOBS}
