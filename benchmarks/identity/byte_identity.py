"""Byte identity of the command line's outputs across a refactor.

Runs a fixed set of commands (every mode and device class: train, serve, LLM infer/serve/train,
compare, sweep, report, collective, SCALE-Sim `.cfg`, ONNX, the calibrated host profiles,
validate) in process, and hashes what each writes: its stdout and every file it writes under its
scratch folder (CSV, JSON, traces, SCALE-Sim reports, HTML pages; PNG figures are left out, as
their bytes depend on the matplotlib build, not on accelsim).

    python benchmarks/identity/byte_identity.py --record   # write the hashes (before a change)
    python benchmarks/identity/byte_identity.py            # compare against them (after)

The hashes live in `benchmarks/results/byte_identity.json`; a command whose hash differs is
printed with the first differing line of its stdout, and the script exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's accelsim, not another one installed
RESULTS = ROOT / "benchmarks" / "results" / "byte_identity.json"

# NB: written literally (not through accelsim) so that the inputs cannot move with the code.
CFG = """[general]
run_name = accelsim

[architecture_presets]
ArrayHeight: 16
ArrayWidth: 16
IfmapSramSzkB: 64
FilterSramSzkB: 64
OfmapSramSzkB: 64
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth : 10
Dataflow : ws
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""
TOPOLOGY = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
            "Num Filter, Strides,\nconv1, 20, 20, 3, 3, 8, 24, 2,\n"
            "conv2, 12, 12, 1, 1, 24, 40, 1,\nfc, 1, 1, 1, 1, 400, 100, 1,\n")
CALIB = "benchmarks/results/calibrate_host"
LLAMA_SERVE = ["--mode", "serve", "--rate", "5", "--requests", "300", "--prompt-tokens", "512",
               "--output-tokens", "128"]

# name -> argv; "{T}" is the command's scratch folder.
COMMANDS: dict[str, list[str]] = {
    "list": ["list"],
    "describe-resnet50": ["describe", "resnet50", "--json"],
    "describe-resnet18-exec-int8": ["describe", "resnet18", "--execute", "--precision", "int8",
                                    "--json"],
    "describe-bert": ["describe", "bert_base", "--batch", "2", "--json"],
    "gpu-a100-bf16": ["simulate", "resnet50", "--hw", "a100", "--batch", "64", "--precision",
                      "bf16", "--json"],
    "gpu-a100-text": ["simulate", "resnet50", "--hw", "a100", "--batch", "64"],
    "gpu-v100-fp32": ["simulate", "resnet50", "--hw", "v100", "--batch", "32", "--json"],
    "gpu-t4-tensorrt-dvfs": ["simulate", "resnet50", "--hw", "t4", "--batch", "128",
                             "--precision", "fp16", "--software", "tensorrt", "--json"],
    "gpu-h100-fp8-exec": ["simulate", "resnet50", "--hw", "h100", "--precision", "fp8",
                          "--execute", "--json"],
    "gpu-h100-prune": ["simulate", "resnet50", "--hw", "h100", "--precision", "fp8", "--batch",
                       "256", "--software", "tensorrt", "--execute", "--prune-2-4", "--json"],
    "gpu-bert-a100": ["simulate", "bert_base", "--hw", "a100", "--batch", "8", "--precision",
                      "fp16", "--json"],
    "gpu-mi300x": ["simulate", "resnet50", "--hw", "mi300x", "--batch", "32", "--precision",
                   "bf16", "--json"],
    "tpu-v1-os": ["simulate", "resnet50", "--hw", "tpu-v1", "--precision", "int8", "--dataflow",
                  "os", "--json"],
    "tpu-v1-exec": ["simulate", "resnet50", "--hw", "tpu-v1", "--precision", "int8",
                    "--execute", "--json"],
    "tpu-v3-bf16": ["simulate", "resnet50", "--hw", "tpu-v3", "--batch", "32", "--json"],
    "npu-edge-tpu": ["simulate", "mobilenet_v2", "--hw", "edge-tpu", "--precision", "int8",
                     "--json"],
    "npu-coral-usb": ["simulate", "mobilenet_v2", "--hw", "coral-usb", "--precision", "int8",
                      "--json"],
    "npu-jetson-orin": ["simulate", "resnet50", "--hw", "jetson-orin", "--precision", "int8",
                        "--json"],
    "fpga-u250": ["simulate", "resnet50", "--hw", "alveo-u250", "--precision", "int8", "--json"],
    "fpga-zcu102": ["simulate", "resnet50", "--hw", "zcu102", "--precision", "int8", "--json"],
    "cpu-xeon": ["simulate", "resnet50", "--hw", "xeon-8480", "--batch", "8", "--json"],
    "cpu-rpi": ["simulate", "mobilenet_v2", "--hw", "raspberry-pi-4", "--json"],
    "cpu-calibrated-host": ["simulate", "resnet50", "--hw", f"{CALIB}/host-cpu.toml",
                            "--software", f"{CALIB}/numpy-host.toml", "--batch", "1", "--json"],
    "cpu-calibrated-bert": ["simulate", "bert_base", "--hw", f"{CALIB}/host-cpu.toml",
                            "--software", f"{CALIB}/numpy-host.toml", "--batch", "1",
                            "--precision", "fp16", "--json"],
    "cpu-calibrated-bert-int8": ["simulate", "bert_base", "--hw", f"{CALIB}/host-cpu.toml",
                                 "--software", f"{CALIB}/numpy-host.toml", "--batch", "1",
                                 "--precision", "int8", "--json"],
    "train-dgx-a100": ["simulate", "resnet50-train", "--hw", "dgx-a100", "--steps", "20",
                       "--json"],
    "train-dgx-a100-text": ["simulate", "resnet50-train", "--hw", "dgx-a100", "--steps", "20"],
    "train-records-noprefetch": ["simulate", "resnet50-train", "--hw", "dgx-a100", "--dataset",
                                 "imagenet-records", "--prefetch", "0", "--steps", "20",
                                 "--json"],
    "train-nas-gds-trace": ["simulate", "resnet50-train", "--hw", "dgx-a100", "--storage",
                            "nas-nfs", "--gpudirect", "--steps", "20", "--trace",
                            "{T}/run.json", "--json"],
    "train-h100-hw-decode": ["simulate", "resnet50-train", "--hw", "dgx-h100", "--decode", "hw",
                             "--steps", "20", "--json"],
    "train-bert-multinode": ["simulate", "bert-large-train", "--hw", "dgx-2", "--nodes", "32",
                             "--accumulate", "2", "--steps", "6", "--json"],
    "train-mlperf-emulate": ["simulate", "unet3d-train", "--hw", "dgx-a100",
                             "--emulate-accelerators", "a100", "--max-accelerators", "--json"],
    "collective": ["collective", "--hw", "dgx-a100", "--nodes", "4", "--sizes", "8B:8GB",
                   "--json"],
    "serve-t4": ["simulate", "resnet50", "--hw", "t4", "--mode", "serve", "--precision", "fp16",
                 "--rate", "800", "--max-batch", "16", "--max-wait-ms", "2", "--json"],
    "serve-closed-loop": ["simulate", "resnet50", "--hw", "a100", "--mode", "serve",
                          "--concurrency", "32", "--max-batch", "16", "--json"],
    "scalesim-cfg": ["simulate", "{T}/topo.csv", "--hw", "{T}/array.cfg", "--json",
                     "--scalesim-report", "{T}/rep"],
    "scalesim-resnet50-cfg": ["simulate", "benchmarks/scalesim_topologies/resnet50.csv",
                              "--hw", "{T}/array.cfg", "--json"],
    "onnx-resnet-block": ["simulate", "tests/fixtures/torch_resnet_block.onnx", "--hw", "a100",
                          "--batch", "4", "--json"],
    "onnx-bert-layer": ["simulate", "tests/fixtures/torch_bert_layer.onnx", "--hw", "t4",
                        "--json"],
    "llm-infer-a100": ["simulate", "llama2_7b", "--hw", "a100", "--prompt-tokens", "512",
                       "--output-tokens", "128", "--batch", "8", "--json"],
    "llm-infer-tp-pp": ["simulate", "llama2_70b", "--hw", "dgx-a100", "--tp", "4", "--pp", "2",
                        "--prompt-tokens", "2048", "--output-tokens", "256", "--json"],
    "llm-infer-int4": ["simulate", "llama3_8b", "--hw", "h100", "--weight-precision", "int4",
                       "--software", "compiled", "--json"],
    "llm-infer-text": ["simulate", "llama2_7b", "--hw", "a100", "--batch", "4"],
    "llm-serve": ["simulate", "llama2_7b", "--hw", "a100", *LLAMA_SERVE, "--length-dist",
                  "uniform", "--batching", "continuous", "--slo-ttft-ms", "500", "--slo-tpot-ms",
                  "50", "--json"],
    "llm-serve-moe": ["simulate", "mixtral_8x7b", "--hw", "dgx-h100", "--tp", "2", "--devices",
                      "8", "--mode", "serve", "--rate", "20", "--requests", "200",
                      "--chunked-prefill", "512", "--json"],
    "llm-train": ["simulate", "llama2_7b", "--hw", "dgx-a100", "--mode", "train", "--seq-len",
                  "4096", "--batch", "1", "--precision", "bf16", "--tp", "2", "--zero", "1",
                  "--accumulate", "8", "--software", "compiled", "--json"],
    "compare-classes": ["compare", "resnet50", "--hw", "a100,tpu-v3,alveo-u250,edge-tpu,xeon-8480",
                        "--precision", "int8", "--batch", "32", "--csv", "{T}/compare.csv",
                        "--json"],
    "compare-train": ["compare", "resnet50-train", "--hw", "dgx-a100,dgx-h100", "--steps", "20",
                      "--csv", "{T}/compare.csv"],
    "sweep-batch": ["sweep", "resnet50", "--hw", "a100,h100,t4,l4", "--batch", "1,2,4,...,1024",
                    "--precision", "fp16", "--csv", "{T}/sweep.csv", "--quiet"],
    "sweep-train": ["sweep", "resnet50-train", "--hw", "dgx-a100", "--devices", "1,2,4,8",
                    "--set", "prep_workers=2,8", "--steps", "20", "--csv", "{T}/sweep.csv",
                    "--quiet"],
    "sweep-llm": ["sweep", "llama2_7b", "--hw", "a100", "--batch", "1,8,32", "--csv",
                  "{T}/sweep.csv", "--quiet"],
    "report-train": ["report", "resnet50-train", "--hw", "dgx-a100", "--prep-workers", "3",
                     "--steps", "20", "--out", "{T}/r.html"],
    "report-llm": ["report", "llama2_7b", "--hw", "a100", "--batch", "4", "--out",
                   "{T}/r.html"],
    "validate": ["validate", "workloads/validate-example.csv", "--json"],
    "validate-fit": ["validate", "workloads/validate-example.csv", "--fit", "--out",
                     "{T}/calibrated"],
}


def _strip_images(text: bytes) -> bytes:
    """An HTML page without its embedded PNGs (their bytes are matplotlib's, not ours)."""
    import re

    return re.sub(rb"data:image/png;base64,[A-Za-z0-9+/=]+", b"data:image/png", text)


def run_one(argv: list[str]) -> tuple[str, str]:
    """One command in process: (sha256 over stdout, exit code and written files, stdout)."""
    from accelsim.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "array.cfg").write_text(CFG)
        (t / "topo.csv").write_text(TOPOLOGY)
        args = [a.replace("{T}", tmp) for a in argv]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        h = hashlib.sha256()
        text = out.getvalue().replace(tmp, "{T}")
        h.update(f"exit {code}\n".encode() + text.encode())
        for f in sorted(t.rglob("*")):
            if f.is_file() and f.suffix != ".png" and f.name not in ("array.cfg", "topo.csv"):
                data = f.read_bytes().replace(tmp.encode(), b"{T}")
                if f.suffix == ".html":
                    data = _strip_images(data)
                h.update(str(f.relative_to(t)).encode() + b"\0" + data)
        return h.hexdigest(), text + (f"\n[stderr] {err.getvalue()}" if code else "")


def main() -> int:
    """Record or check the hashes; exit 1 on any difference."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="write the hashes")
    ap.add_argument("--only", default="", help="comma list of command names")
    ap.add_argument("--dump", default="", help="folder to write each command's stdout to")
    a = ap.parse_args()
    os.chdir(ROOT)
    names = [n for n in COMMANDS if not a.only or n in a.only.split(",")]
    recorded = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    got, bad = {}, []
    for name in names:
        digest, text = run_one(COMMANDS[name])
        got[name] = digest
        if a.dump:
            Path(a.dump).mkdir(parents=True, exist_ok=True)
            (Path(a.dump) / f"{name}.txt").write_text(text)
        same = recorded.get(name) == digest
        print(f"{'same' if same else 'DIFF':4}  {name}", flush=True)
        if not same:
            bad.append(name)
    if a.record:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({**recorded, **got}, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(got)} commands in {RESULTS.relative_to(ROOT)}")
        return 0
    print(f"{len(names) - len(bad)} of {len(names)} commands byte-identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
