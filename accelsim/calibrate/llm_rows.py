"""The rows of llm_calibration_measurements.csv as accelsim runs (`llm_cases(path)`): each row
either becomes an `LlmCase` (a model, a hardware name, flat knobs for `make_config`, the
metric to read from the record and the measured value in SI units) or an `Unexpressible`
saying why it cannot be run yet. The repo keeps a copy of the CSV in tests/reference/.

Mapping (each an assumption, stated in the results):
- source: the id's prefix: TRTLLM (TensorRT-LLM 0.17 perf-overview), MLPERF (MLPerf Inference
  v4.1), NEMO (NeMo 24.07 performance summary), FT (FasterTransformer's GPT guide). The
  leave-one-source-out folds are these four.
- hardware: "Nx <GPU>" -> the GPU's profile alone when N = 1, else the 8-GPU system of that
  GPU (dgx-h100, hgx-h200, dgx-a100, l40s-server) with `devices` N; more than 8 GPUs ->
  `nodes`. An MLPerf system of N TP-1 engines with no system profile (8x MI300X) -> one engine
  at 1/N of the load, its throughput times N (`LlmCase.engines`).
- software: TensorRT-LLM and NVIDIA's MLPerf TensorRT submissions -> `tensorrt-llm`;
  FasterTransformer -> `fastertransformer` (kernels issued one by one, a host sync each step);
  vLLM -> `vllm`; NeMo and Megatron-LM -> `megatron` (their stack files).
- the benchmark tool's settings: a TensorRT-LLM row runs with the max batch and tokens per step
  that `trtllm-bench` tunes (`trtllm_bench_settings`), chunked context on; an MLPerf row with
  its submission's TP, batch and tokens per step (`MLPERF_SETTINGS`).
- precision: "fp8" -> W8A8 (`--precision fp8`), with an fp8 KV cache where the row says so;
  fp16 -> fp16. "not stated" on an NVIDIA Hopper MLPerf row -> fp8 (NB: an assumption; NVIDIA's
  v4.1 Hopper submissions quantise to FP8); on the B200 preview -> fp4 W4A4 with an fp8 KV
  cache (NVIDIA's v4.1 post and Tom's Hardware say the B200 ran FP4; `FP4_SOURCES`), else
  unexpressible.
- an MLPerf Offline row whose submission settings are not published (the B200 preview's code
  is private) takes trtllm-bench's tuning rule at the row's memory capacity (NB: a stand-in).
- metric: max-load and Offline throughput -> output tokens/s of a server given every request
  at once (`rate` far above capacity); Server TTFT / TPOT -> the mean at the row's target QPS
  (Poisson arrivals); batch latency (FT) -> `e2e_latency_s` of one batch; training tokens/s per
  GPU -> tokens per step / step time / GPUs, with the row's TP, PP, CP and VP.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from accelsim.devices.estimate import capacity_bytes
from accelsim.errors import AccelsimError
from accelsim.llm.models import decoder, is_decoder
from accelsim.profiles.devices import load_profile
from accelsim.tomlfiles import MAX_TABLE_BYTES, read_text_file

SOURCES = {"TRTLLM": "trtllm-0.17", "MLPERF": "mlperf-inference-4.1", "NEMO2407": "nemo-24.07",
           "FT": "fastertransformer"}
# The decoder of each workload text (first match wins).
MODELS = (
    ("Llama-3.1-8B", "llama-3.1-8b"), ("Llama-3.1-70B", "llama-3.1-70b"),
    ("Mixtral-8x7B", "mixtral-8x7b"), ("Llama-2-70B", "llama-2-70b"),
    ("Llama-2-13B", "llama-2-13b"), ("Llama-2-7B", "llama-2-7b"),
    ("Llama-3-8B", "llama-3-8b"), ("Llama-3-70B", "llama-3-70b"), ("GPT-J-6B", "gpt-j-6b"),
    ("GPT3-5B", "nemo-gpt3-5b"), ("GPT3-20B", "nemo-gpt3-20b"), ("GPT3-175B", "gpt3-175b"),
    ("GPT-175B", "ft-gpt-175b"), ("GPT-89B", "ft-gpt-89b"), ("GPT-20B", "ft-gpt-20b"),
    ("GPT-6.7B", "ft-gpt-6.7b"), ("GPT-1.3B", "ft-gpt-1.3b"),
    ("Megatron-530B", "ft-megatron-530b"),
    ("Nemotron-340B", "nemotron-4-340b"),
)
# GPU text -> (profile, its 8-GPU system or None)
GPUS = (
    ("GH200", None, None), ("H200", "h200", "hgx-h200"), ("H100 NVL", None, None),
    ("H100", "h100", "dgx-h100"), ("A100", "a100", "dgx-a100"), ("L40S", "l40s", "l40s-server"),
    ("B200", "b200", None), ("MI300X", "mi300x", None),
)
GPUS_PER_NODE = 8
# NeMo's LoRA defaults, taken for its LoRA rows (NB: the performance summary states none)
LORA_RANK = 32
LORA_SOURCE = ("NVIDIA/NeMo examples/nlp/language_modeling/tuning/conf/"
               "megatron_gpt_finetuning_config.yaml @00780235: lora_tuning target_modules "
               "['attention_qkv'], adapter_dim 32")
# MLPerf Inference v4.1 dataset means (prompt, output tokens per sample), by the dataset
# text's head. Outputs: the reference TOKENS_PER_SAMPLE (mlcommons/inference
# language/llama2-70b/README.md 294.45; language/mixtral-8x7b/README.md 144.84). Prompts:
# computed from openshift-psap/performance-dashboard mlperf-data/summaries/*.csv, a third-party
# extract of the official tokenized pickles (benchmarks/fidelity/llm_sources.md, section 1).
# NB: every request takes the mean lengths (the datasets' spread is not drawn).
DATASETS: dict[str, tuple[float, float]] = {
    "OpenOrca": (222.33, 294.45),
    "MLPerf mixtral-8x7b set": (427.39, 144.84),
}
# NVIDIA's and AMD's v4.1 submission settings per (model, profile): TP per engine, running
# batch (Offline, Server), tokens per step, chunked prompts, Server target QPS where the row
# has none. Sources: mlcommons/inference_results_v4.1 @198fc467 closed/NVIDIA/configs/<model>/
# {__init__,Offline/__init__,Server/__init__}.py and closed/AMD/code/llama2-70b-99/
# (benchmarks/fidelity/llm_sources.md, section 2).
MLPERF_SETTINGS: dict[tuple[str, str], dict[str, Any]] = {
    ("llama-2-70b", "h100"): {"tp": 2, "batch": (896, 1024), "tokens": 4096, "qps": 75.0},
    ("llama-2-70b", "h200"): {"tp": 1, "batch": (806, 896), "tokens": 4096},
    ("mixtral-8x7b", "h200"): {"tp": 1, "batch": (3072, 1200), "tokens": (16384, 8192)},
    ("llama-2-70b", "mi300x"): {"tp": 1, "batch": (2048, 1024), "tokens": (65536, 49152),
                                "chunked": False},
}
FP4_SOURCES = ("https://developer.nvidia.com/blog/nvidia-blackwell-platform-sets-new-llm-"
               "inference-records-in-mlperf-inference-v4-1/ (Blackwell's FP4 inference); "
               "Tom's Hardware, 'Nvidia publishes first Blackwell B200 MLPerf results' (the "
               "B200 used FP4 precision)")
HUGE_RATE_PER_S = 1e6  # "requests issued at infinite rate": all arrive in the first second
MAX_REQUESTS = 3000  # NB: requests simulated per max-load row (the steady state is reached)
# NB: a Server row's requests: enough that the ramp up and the drain at the end (about one
# request latency each) are a few percent of the run, as in MLPerf's 10-minute runs
SERVER_REQUESTS = 20000


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def trtllm_bench_settings(model: str, profile: str, prompt: int, output: int, tp: int, pp: int,
                          fp8: bool, fp8_kv: bool, fp4: bool = False,
                          memory_bytes: float | None = None) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) as `trtllm-bench build` tunes them from the dataset's
    mean lengths (TensorRT-LLM tensorrt_llm/bench/build/tuning.py calc_engine_setting and
    finetune_setting; benchmarks/fidelity/llm_sources.md, section 3): the requests whose whole
    KV cache fits in 0.95 of the memory left after the engine, at most 4096 per PP stage, and
    that batch's tokens at the ISL/OSL ratio, at most 32768, rounded as the tool rounds.
    `memory_bytes` per GPU replaces the profile's capacity (a SKU with less memory)."""
    cfg = decoder(model)
    per_gpu = capacity_bytes(load_profile(profile)) if memory_bytes is None else memory_bytes
    mem_bytes = per_gpu * tp * pp
    # NB: an fp4 engine at NVFP4's 0.5625 bytes per weight, the head's 16 bits left out
    engine_bytes = cfg.params * (0.5625 if fp4 else 1 if fp8 else 2)
    per_token = 2 * cfg.n_layers * max(tp, cfg.n_kv_heads) * cfg.head_dim * (1 if fp8_kv else 2)
    requests = (mem_bytes - engine_bytes) * 0.95 / per_token / (prompt + output)
    bs = min(requests, 4096) / pp
    tokens = min(bs * (1 + prompt / output), 32768)
    if bs < 256:
        bs = max(_round_up(bs, 32), 64)
    else:
        bs = _round_up(bs, 128 if bs < 1024 else 256)
    if tokens < 4096:
        tokens = max(_round_up(tokens, 256), 2048)
    else:
        tokens = _round_up(tokens, 512 if tokens < 8192 else 1024)
    return int(bs), int(tokens)


@dataclass(frozen=True)
class LlmCase:
    """One runnable row: `make_config(model, hardware, **knobs)`, then `metric` of the record
    against `measured` (SI: tokens/s, seconds)."""

    id: str
    source: str
    model: str
    hardware: str
    knobs: dict[str, Any]
    metric: str
    measured: float
    gpus: int
    notes: tuple[str, ...] = field(default=())
    engines: int = 1  # identical independent engines the row's system runs (one simulated)


@dataclass(frozen=True)
class Unexpressible:
    id: str
    source: str
    why: str


def _int(notes: str, key: str, default: int = 1) -> int:
    m = re.search(rf"\b{key}=(\d+)", notes)
    return int(m.group(1)) if m else default


def _model(text: str) -> str | None:
    for needle, name in MODELS:
        if needle.lower() in text.lower():
            return name
    return None


def _hardware(text: str) -> tuple[str | None, str | None, int]:
    """(profile, 8-GPU system, GPU count) of a hardware text; profile None: no profile."""
    m = re.match(r"\s*(\d+)x\s", text)
    n = int(m.group(1)) if m else 1
    if "CPU only" in text:
        return None, None, n
    for needle, profile, system in GPUS:
        if needle in text:
            return profile, system, n
    return None, None, n


def _stack(software: str) -> str:
    if software.startswith("vLLM"):
        return "vllm"
    if "NeMo" in software or "Megatron" in software:
        return "megatron"
    if software.startswith("FasterTransformer"):
        return "fastertransformer"
    return "tensorrt-llm"


def _lengths(dataset: str) -> tuple[int, int] | None:
    m = re.search(r"in=(\d+) out=(\d+)", dataset)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _case(row: pd.Series) -> LlmCase | Unexpressible:
    rid = str(row["id"])
    source = SOURCES[rid.split("-")[1]]
    notes_text = str(row["notes"])
    model = _model(str(row["workload"]))

    def no(why: str) -> Unexpressible:
        return Unexpressible(rid, source, why)

    if model is None or not is_decoder(model):
        return no(f"model '{row['workload']}' has no decoder config")
    profile, system, gpus = _hardware(str(row["hardware"]))
    if profile is None:
        return no(f"no device profile for '{row['hardware']}'")
    tp, pp, cp = _int(notes_text, "TP"), _int(notes_text, "PP"), _int(notes_text, "CP")
    if model == "gpt-j-6b":
        return no("beam search (width 4, MLPerf's GPT-J rule) is not modelled, and the mean "
                  "prompt length of its CNN/DailyMail set was not found")
    notes: list[str] = []
    engines = 1
    setting = MLPERF_SETTINGS.get((model, profile)) if source.startswith("mlperf") else None
    if gpus == 1:
        hardware = profile
    elif system is None and setting is not None and setting["tp"] == 1:
        # NB: TP 1 engines share nothing but the host: one engine at 1/N of the load
        hardware, engines = profile, gpus
        notes.append(f"{gpus} independent TP-1 engines: one simulated at 1/{gpus} of the "
                     f"load, its throughput times {gpus}")
    elif system is None:
        return no(f"no system profile holds {gpus} x {profile}")
    else:
        hardware = system
    precision_text = str(row["precision"]).lower()
    knobs: dict[str, Any] = {"software": _stack(str(row["software"]))}
    if precision_text.startswith("fp8"):
        knobs["precision"] = "fp8"
        if "kv" in precision_text:
            knobs["kv_precision"] = "fp8"
    elif precision_text.startswith("fp16"):
        knobs["precision"] = "fp16"
    elif precision_text.startswith("not stated") and profile in ("h100", "h200"):
        knobs.update(precision="fp8", kv_precision="fp8")
        notes.append("precision not stated: taken as fp8 weights, activations and KV cache")
    elif precision_text.startswith("not stated") and profile == "b200":
        knobs.update(precision="fp4", kv_precision="fp8")
        notes.append("precision not stated: taken as NVFP4 weights and activations with an "
                     f"fp8 KV cache ({FP4_SOURCES}; the KV format is an assumption)")
    else:
        return no(f"precision '{row['precision']}' not expressible on {profile}")
    metric_text = str(row["metric"])
    value = float(row["value"])
    if source == "nemo-24.07":
        return _train_case(rid, source, model, hardware, knobs, row, gpus, tp, pp, notes, cp)
    lengths = _lengths(str(row["dataset"]))
    if lengths is None:
        lengths = next((v for k, v in DATASETS.items()
                        if str(row["dataset"]).startswith(k)), None)
        if lengths is None:
            return no(f"no token-length statistics for dataset '{row['dataset']}'")
    prompt, output = int(round(lengths[0])), int(round(lengths[1]))
    knobs.update(prompt_tokens=prompt, output_tokens=output, tp=tp, pp=pp)
    if gpus > 1 and engines == 1:
        knobs["devices"] = gpus
    if "latency for the batch" in metric_text:
        knobs.pop("devices", None)  # one batch on the TP group (infer takes no device count)
        knobs["batch"] = int(row["batch_global"])
        if tp * pp > GPUS_PER_NODE:  # a replica over whole nodes (its stages across them)
            knobs["nodes"] = tp * pp // GPUS_PER_NODE
        return LlmCase(rid, source, model, hardware, knobs, "e2e_latency_s", value / 1e3,
                       gpus, tuple(notes))
    knobs.update(mode="serve", length_dist="fixed")
    offline = "max load" in metric_text or metric_text.startswith("Offline")
    if source == "trtllm-0.17":
        batch, tokens = trtllm_bench_settings(model, profile, prompt, output, tp, pp,
                                              knobs["precision"] == "fp8",
                                              knobs.get("kv_precision") == "fp8")
        knobs.update(max_batch=batch, chunked_prefill=tokens)
        notes.append(f"trtllm-bench's tuning: max batch {batch}, {tokens} tokens per step, "
                     "chunked context")
    elif setting is None and offline and source.startswith("mlperf"):
        memory = re.search(r"(\d+)\s*GB", str(row["hardware"]))
        batch, tokens = trtllm_bench_settings(
            model, profile, prompt, output, tp, pp, knobs["precision"] == "fp8",
            knobs.get("kv_precision") == "fp8", fp4=knobs["precision"] == "fp4",
            memory_bytes=None if memory is None else float(memory.group(1)) * 1e9)
        knobs.update(max_batch=batch, chunked_prefill=tokens)
        notes.append(f"submission settings not published: trtllm-bench's tuning rule at "
                     f"{'the profile' if memory is None else memory.group(1) + ' GB'}'s "
                     f"memory stands in (max batch {batch}, {tokens} tokens per step)")
    else:
        if setting is None:
            return no(f"no submission settings (TP, batch) known for {model} on {profile}")
        pick = 0 if offline else 1
        tokens = setting["tokens"]
        tokens = tokens[pick] if isinstance(tokens, tuple) else tokens
        knobs.update(tp=setting["tp"], max_batch=setting["batch"][pick])
        if setting.get("chunked", True):
            knobs["chunked_prefill"] = tokens
            per_step = f"{tokens} tokens per step"
        else:  # whole prompts in prefill-only steps of the submission's token budget
            knobs["prefill_tokens"] = tokens
            per_step = f"whole prompts in prefill-only steps of at most {tokens} tokens"
        notes.append(f"submission settings: TP {setting['tp']} per engine, batch "
                     f"{setting['batch'][pick]}, {per_step}")
    if offline:
        n = _int(notes_text, "num_requests", MAX_REQUESTS)
        knobs.update(rate=HUGE_RATE_PER_S, requests=min(n, MAX_REQUESTS))
        return LlmCase(rid, source, model, hardware, knobs, "tokens_per_s", value, gpus,
                       tuple(notes), engines)
    qps = re.search(r"target_qps (\d+(?:\.\d+)?)|at (\d+(?:\.\d+)?) target QPS", notes_text)
    rate = float(qps.group(1) or qps.group(2)) if qps else setting.get("qps")
    if rate is None:
        return no("Server scenario with no target QPS in the row or the submission settings")
    knobs.update(rate=rate / engines, requests=max(SERVER_REQUESTS // engines, MAX_REQUESTS))
    if "first-token" in metric_text:
        return LlmCase(rid, source, model, hardware, knobs, "ttft_mean_s", value / 1e9, gpus,
                       tuple(notes), engines)
    if "per output token" in metric_text:
        return LlmCase(rid, source, model, hardware, knobs, "tpot_mean_s", value / 1e9, gpus,
                       tuple(notes), engines)
    notes.append("Server throughput at the submitted QPS: a check that the server keeps up")
    return LlmCase(rid, source, model, hardware, knobs, "tokens_per_s", value, gpus,
                   tuple(notes), engines)


def _train_case(rid: str, source: str, model: str, hardware: str, knobs: dict[str, Any],
                row: pd.Series, gpus: int, tp: int, pp: int, notes: list[str], cp: int = 1
                ) -> LlmCase | Unexpressible:
    """A NeMo pre-training / SFT row: micro-batch, micro-batches per step, nodes, context
    parallelism."""
    seq = re.search(r"(?:seq len|packed to) (\d+)", str(row["dataset"]))
    if seq is None:
        return Unexpressible(rid, source, "no sequence length in the row")
    seq_len = int(seq.group(1))
    mbs, gbs = int(row["batch_per_device"]), int(row["batch_global"])
    dp = gpus // (tp * pp * cp)
    if dp < 1 or gbs % (mbs * dp):
        return Unexpressible(rid, source, f"GBS {gbs} is not a whole number of micro-batches "
                             f"of {mbs} over DP {dp}")
    knobs.update(mode="train", batch=mbs, accumulate=gbs // (mbs * dp), tp=tp, pp=pp,
                 seq_len=seq_len, zero=1)
    vp = _int(str(row["notes"]), "VP")
    if vp > 1:
        knobs["vp"] = vp
    if cp > 1:
        knobs["cp"] = cp
    if "LoRA" in str(row["workload"]):
        knobs["lora_rank"] = LORA_RANK
        notes.append(f"LoRA: rank {LORA_RANK} adapters on the QKV projection ({LORA_SOURCE}; "
                     "the rows do not state theirs)")
    if gpus > GPUS_PER_NODE:
        knobs["nodes"] = gpus // GPUS_PER_NODE
    return LlmCase(rid, source, model, hardware, knobs, "train_tokens_per_s_per_gpu",
                   float(row["value"]), gpus, tuple(notes))


def llm_cases(path: str | Path) -> tuple[list[LlmCase], list[Unexpressible]]:
    """Every row of the LLM measurement CSV at `path`, runnable or not (why)."""
    try:
        table = pd.read_csv(io.StringIO(read_text_file(path, MAX_TABLE_BYTES)))
    except (OSError, ValueError) as err:
        raise AccelsimError(f"{path}: cannot read the LLM measurements: {err}") from None
    cases: list[LlmCase] = []
    skipped: list[Unexpressible] = []
    for _, row in table.iterrows():
        got = _case(row)
        (cases if isinstance(got, LlmCase) else skipped).append(got)
    return cases, skipped
