"""ONNX import fidelity: a ResNet-50 exported from PyTorch, read by accelsim, against the zoo.

Run (from the accelsim venv; PyTorch lives in another interpreter, with `onnx`):
  python benchmarks/fidelity/onnx_resnet50.py --torch-python /tmp/torchenv/bin/python [--write]
  --write  updates results/onnx_import.md

The script runs itself under `--torch-python` twice: to build ResNet-50 v1.5 in plain
`torch.nn` (torchvision's layout; no torchvision needed) with seeded weights and batchnorm
statistics, and export it with the TorchScript exporter (`dynamo=False`, dynamic batch) twice:
- "batchnorm kept" (`training=PRESERVE`): Conv and BatchNormalization nodes, as in training;
- "batchnorm folded" (the default `EVAL`): the exporter folds each batchnorm into its conv's
  weight and bias.
and then to run the PyTorch model on the inputs accelsim generates. accelsim reads each file;
its parameters and forward FLOPs are compared with the zoo's `resnet50` (25,557,032 parameters,
the torchvision count), and its numpy kernels, run with the file's initialisers, with PyTorch's
output. The folded export differs from the zoo by a closed form: each batchnorm's gamma and beta
(2C parameters) become a conv bias (C), and its 5 FLOPs per element vanish.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim

RESULTS = ROOT / "benchmarks" / "results" / "onnx_import.md"
VARIANTS = {"batchnorm kept": "resnet50_bn.onnx", "batchnorm folded": "resnet50_folded.onnx"}
BATCH = 2  # samples run through both PyTorch and accelsim's kernels
SEED = 0


# ---- under PyTorch -------------------------------------------------------------------------


def _torch_resnet50():  # noqa: ANN202 - torch is not importable in the accelsim venv
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, c_in: int, width: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # v1.5
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, 4 * width, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(4 * width)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or c_in != 4 * width:
                self.downsample = nn.Sequential(nn.Conv2d(c_in, 4 * width, 1, stride, bias=False),
                                                nn.BatchNorm2d(4 * width))

        def forward(self, x):  # noqa: ANN001, ANN202
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet50(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1, self.relu = nn.BatchNorm2d(64), nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            blocks, c_in = [], 64
            for n, width in zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True):
                for b in range(n):
                    blocks.append(Bottleneck(c_in, width, 2 if b == 0 and width != 64 else 1))
                    c_in = 4 * width
            self.layers = nn.Sequential(*blocks)
            self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(2048, 1000)

        def forward(self, x):  # noqa: ANN001, ANN202
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            return self.fc(torch.flatten(self.avgpool(self.layers(x)), 1))

    torch.manual_seed(SEED)
    model = ResNet50().eval()
    with torch.no_grad():  # trained-looking statistics: distinct per layer, none trivial
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model


def export(out: Path) -> None:
    import torch

    model = _torch_resnet50()
    print(f"torch {torch.__version__}: {sum(p.numel() for p in model.parameters())} parameters")
    modes = {"batchnorm kept": torch.onnx.TrainingMode.PRESERVE,
             "batchnorm folded": torch.onnx.TrainingMode.EVAL}
    for variant, mode in modes.items():
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(out / VARIANTS[variant]),
                          dynamo=False, training=mode, input_names=["image"],
                          output_names=["logits"], dynamic_axes={"image": {0: "batch"},
                                                                 "logits": {0: "batch"}})


def forward(out: Path) -> None:
    import torch

    x = torch.from_numpy(np.load(out / "input.npy"))
    with torch.no_grad():
        np.save(out / "torch_logits.npy", _torch_resnet50()(x).numpy())


# ---- under accelsim ------------------------------------------------------------------------


def _torch(python: str, step: str, out: Path) -> None:
    subprocess.run([python, __file__, f"--{step}", str(out)], check=True)


def measure(python: str, out: Path) -> tuple[list[dict], str]:
    from accelsim.kernels.execute import make_inputs, run_graph
    from accelsim.workload.importers.onnx import read_graph
    from accelsim.workload.tables import counts_table, totals, unsupported_ops
    from accelsim.workload.zoo import build_model

    _torch(python, "export", out)
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    zoo = build_model("resnet50")
    z = totals(zoo)
    bn = counts_table(zoo)[counts_table(zoo)["op"] == "batchnorm"]
    closed = {"batchnorm kept": (z["params"], z["flops_per_sample"]),
              "batchnorm folded": (z["params"] - int(bn["params"].sum()) // 2,
                                   z["flops_per_sample"] - float(bn["fwd_flops"].sum()))}
    rows = []
    for variant, file in VARIANTS.items():
        t0 = time.perf_counter()
        g = read_graph(out / file)
        t_read = time.perf_counter() - t0
        got = totals(g)
        if not rows:  # PyTorch on the inputs accelsim generates for this graph
            np.save(out / "input.npy", make_inputs(g, BATCH, SEED)["image"])
            _torch(python, "forward", out)
        ref = np.load(out / "torch_logits.npy")
        t0 = time.perf_counter()
        ours = run_graph(g, BATCH, "fp32", SEED)[g.outputs[0]]
        t_run = time.perf_counter() - t0
        rows.append({
            "variant": variant, "file_mb": (out / file).stat().st_size / 1e6, "ops": len(g.ops),
            "params": got["params"], "flops": got["flops_per_sample"],
            "expected_params": closed[variant][0], "expected_flops": closed[variant][1],
            "unsupported": len(unsupported_ops(g)),
            "rel_error": float(np.linalg.norm(ours - ref) / np.linalg.norm(ref)),
            "read_s": t_read, "run_s": t_run})
    return rows, version


def render(rows: list[dict], torch_version: str) -> str:
    lines = [
        "# ONNX import: ResNet-50 exported from PyTorch",
        "",
        f"Generated by `python benchmarks/fidelity/onnx_resnet50.py --torch-python PY --write` on "
        f"{platform.machine()}, Python {platform.python_version()}, PyTorch {torch_version} "
        "(TorchScript exporter, `dynamo=False`, dynamic batch). Expected: the zoo's `resnet50` "
        "(25,557,032 parameters, as torchvision); for the folded export, the zoo minus the "
        "closed form (each batchnorm's 2C gamma/beta become a C conv bias; its 5 FLOPs per "
        "element vanish). `error` is the relative L2 error of accelsim's numpy kernels, run "
        f"with the file's initialisers, against PyTorch on the same {BATCH} images (fp32).",
        "",
        "| export | file MB | ops | params | expected | FLOPs/sample | expected | unsupported |"
        " error vs PyTorch | read s | run s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['file_mb']:.1f} | {r['ops']} | {r['params']:,} | "
            f"{r['expected_params']:,} | {r['flops']:,.0f} | {r['expected_flops']:,.0f} | "
            f"{r['unsupported']} | {r['rel_error']:.1e} | {r['read_s']:.2f} | {r['run_s']:.2f} |")
    lines += [
        "",
        "\"batchnorm kept\" is `training=PRESERVE`; \"batchnorm folded\" the exporter's default "
        "(`EVAL`), which folds each batchnorm into its conv. The zoo's graph has 174 ops: the "
        "import adds two reshapes that move no data (GlobalAveragePool keeps its 1x1 axes, "
        "Flatten drops them). `read s`: `read_graph` (load, check, infer shapes, map); `run s`: "
        "`run_graph` (the initialisers read again, then the forward pass).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", help="an interpreter with torch and onnx installed")
    ap.add_argument("--write", action="store_true", help=f"update {RESULTS.name}")
    ap.add_argument("--export", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--forward", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.export:
        export(args.export)
        return
    if args.forward:
        forward(args.forward)
        return
    if not args.torch_python:
        ap.error("--torch-python is required (an interpreter with torch and onnx)")
    with tempfile.TemporaryDirectory() as tmp:
        rows, version = measure(args.torch_python, Path(tmp))
    text = render(rows, version)
    print(text)
    ok = all(r["params"] == r["expected_params"] and r["flops"] == r["expected_flops"]
             and r["rel_error"] < 1e-4 for r in rows)
    if args.write:
        RESULTS.write_text(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
