"""The single-GPU rows of calibration_measurements.csv the GPU model and the software stacks are
fitted and cross-validated on (`calibration_rows(path of the CSV)`; the repo keeps a copy in
tests/reference/): each row mapped onto a model, a device profile, the system whose
host CPU ran it, a software stack (hw_profiles/software/) and a metric.

Mapping (each an assumption, stated in the results):
- SKU (the product in the row's hardware text) -> profile: V100-SXM2-16GB, V100-SXM2-32GB and
  V100-SXM3-32GB -> `v100` (same GV100 chip; memory size and the SXM3's 350 W limit are not
  modelled), A100-SXM4-80GB -> `a100`, Tesla T4 16GB -> `t4`. The system (whose host CPU sets
  the host-time scale): DGX-1 -> dgx-1, DGX-2 -> dgx-2, DGX A100 -> dgx-a100; the T4 rows name
  none: workstation (NB: its epyc-7763 stands in for the unknown host). `GENERATIONS`: the
  architecture of each profile (Volta, Turing, Ampere), for leave-one-generation-out.
- software text -> stack: PyTorch -> pytorch-eager; TensorFlow (1 or 2) -> tensorflow-graph,
  or tensorflow-xla where the precision says "+ XLA"; MXNet -> mxnet; Triton with ONNX
  Runtime-TensorRT -> triton; MXNet in the NGC 22.10 container -> mxnet-ngc22 (a release
  with far less host time per kernel than the 20.x containers' mxnet); PaddlePaddle ->
  paddlepaddle; Paddle-TRT (TensorRT through Paddle Inference) -> paddle-tensorrt.
- precision: AMP / FP16 -> fp16, TF32 -> tf32, FP32 -> fp32, INT8 -> int8; 2:4-sparse
  training (ASP) rows are left out.
- model: ResNet-50 v1.5 -> resnet50 (momentum SGD); BERT-Large (pre-training, fine-tuning,
  SQuAD) -> bert_large, BERT-Base (SQuAD) -> bert_base, at the row's seq len (training: adam,
  NB LAMB costed as Adam); gradient accumulation -> the micro-batch, one optimizer step per
  accumulation group.
- metric: throughput rows -> batch / step time; "latency avg" and "latency p50" -> step time of
  one batch. "latency p99" rows are left out (NB: the model predicts a deterministic step, not
  a tail).
Multi-GPU rows are the training pipeline's (benchmarks/fidelity/fidelity.py,
collective_fidelity.py), not these.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from accelsim.calibrate.stack_fit import Row
from accelsim.tomlfiles import MAX_TABLE_BYTES, read_text_file

SKUS = {"V100-SXM2-16GB": "v100", "V100-SXM2-32GB": "v100", "V100-SXM3-32GB": "v100",
        "A100-SXM4-80GB": "a100", "Tesla T4 16GB": "t4"}
SYSTEMS = {"DGX-1": "dgx-1", "DGX-2": "dgx-2", "DGX A100": "dgx-a100"}
# NB: the T4 rows name no server; the workstation system's host CPU (epyc-7763) stands in for
# it (it sets the host-time scale only; these rows time the device, not the input pipeline).
STANDALONE = {"Tesla T4 16GB": "workstation"}
GENERATIONS = {"v100": "Volta", "t4": "Turing", "a100": "Ampere"}
PRECISIONS = (("AMP", "fp16"), ("FP16", "fp16"), ("TF32", "tf32"), ("FP32", "fp32"),
              ("INT8", "int8"))


def stack_for(software: str, precision: str) -> str | None:
    """The software stack of a row's software text (None: not a GPU framework row)."""
    if software.startswith("PyTorch"):
        return "pytorch-eager"
    if software.startswith("TensorFlow") and "Lite" not in software:
        return "tensorflow-xla" if "XLA" in precision else "tensorflow-graph"
    if software.startswith("MXNet"):
        return "mxnet-ngc22" if "mxnet-22." in software else "mxnet"
    if software.startswith("Triton"):
        return "triton"
    if software.startswith("Paddle-TRT"):
        return "paddle-tensorrt"
    if software.startswith("PaddlePaddle"):
        return "paddlepaddle"
    return None


def _model(workload: str, dataset: str, task: str) -> tuple[str, int | None, str] | None:
    if workload.startswith("ResNet-50"):
        return "resnet50", None, "momentum"
    seq = re.search(r"seq len (\d+)", dataset)
    if seq is None:
        return None
    if workload.startswith("BERT-Large"):
        return "bert_large", int(seq.group(1)), "adam"
    if workload.startswith("BERT-Base"):
        return "bert_base", int(seq.group(1)), "adam"
    return None


def row_for(r: pd.Series) -> Row | None:
    """The Row of one CSV row, None where it is not a single-GPU framework row we model."""
    hw = re.match(r"1x (\S+) \((.+)\)$", str(r["hardware"]))
    alone = re.match(r"1x (.+)$", str(r["hardware"]))
    if hw is not None and hw.group(1) in SKUS and hw.group(2) in SYSTEMS:
        sku, system = hw.group(1), SYSTEMS[hw.group(2)]
    elif alone is not None and alone.group(1) in STANDALONE:
        sku, system = alone.group(1), STANDALONE[alone.group(1)]
    else:
        return None
    stack = stack_for(str(r["software"]), str(r["precision"]))
    model = _model(str(r["workload"]), str(r["dataset"]), str(r["task"]))
    metric_text = str(r["metric"])
    if stack is None or model is None or "p99" in metric_text or "ASP" in str(r["precision"]):
        return None  # (2:4-sparse training, ASP, is not a dense row)
    precision = next((p for key, p in PRECISIONS if str(r["precision"]).startswith(key)), None)
    if precision is None:
        return None
    batch_text = str(r["batch_per_device"])
    listed = int(re.match(r"\d+", batch_text).group())
    accum = re.search(r"with (\d+) accumulation steps", batch_text)
    steps = int(accum.group(1)) if accum else 1
    name, seq_len, optimizer = model
    return Row(name, seq_len, listed // steps, steps, precision, str(r["task"]), optimizer,
               "latency" if metric_text.startswith("latency") else "throughput",
               id=str(r["id"]), sku=sku, device=SKUS[sku], system=system, stack=stack,
               measured=float(r["value"]),
               workload=str(r["workload"]))


def calibration_rows(csv: str | Path) -> list[Row]:
    """Every single-GPU row of the calibration file the stack fit uses."""
    table = pd.read_csv(io.StringIO(read_text_file(csv, MAX_TABLE_BYTES)))
    rows = (row_for(r) for _, r in table.iterrows())
    return [r for r in rows if r is not None]
