"""Predictions for decoders at the token level beside the limits they must respect (issue 11):
llama2_7b/13b/70b and llama3_8b/70b on A100, H100 and H200 across batch, prompt and output
lengths and tensor-parallel sizes.

Run: python benchmarks/fidelity/llm_predictions.py [--write]   (--write updates
results/llm_predictions.md). Stack: pytorch-compiled (CUDA graphs, fused elementwise), fp16.
TP runs inside dgx-a100 / dgx-h100 / hgx-h200 (NVSwitch); TP 1 on the bare device.
Limits, checked for every row: TTFT >= prefill FLOPs / (dense fp16 peak x GPUs) (compute
limit), TPOT >= the weights (layers and LM head) and mean KV cache each GPU streams per step /
peak bandwidth (bandwidth limit, from the memory plan, not the cost model's traffic); a row
that breaks one is flagged. Splits that do not fit say so. A second table: training steps.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root: benchmarks.* and this checkout's accelsim
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.profiles.devices import load_profile  # noqa: E402
from accelsim.run import run_simulation  # noqa: E402
from accelsim.sim.knobs import make_config  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "llm_predictions.md"
MODELS = ("llama2_7b", "llama2_13b", "llama3_8b", "llama2_70b", "llama3_70b")
HARDWARE = (("a100", "dgx-a100"), ("h100", "dgx-h100"), ("h200", "hgx-h200"))
BATCHES = (1, 16, 64)
LENGTHS = ((128, 128), (2048, 256))
TPS = (1, 2, 8)


def rows() -> list[str]:
    out = []
    for model in MODELS:
        for device, system in HARDWARE:
            for tp in TPS:
                for batch in BATCHES:
                    for prompt, output in LENGTHS:
                        out.append(row(model, device, system, tp, batch, prompt, output))
    return out


def row(model: str, device: str, system: str, tp: int, batch: int, prompt: int,
        output: int) -> str:
    hw = system if tp > 1 else device
    head = f"| {model} | {device} | {tp} | {batch} | {prompt}/{output} |"
    try:
        r = run_simulation(make_config(model, hw, prompt_tokens=prompt, output_tokens=output,
                                       batch=batch, tp=tp, precision="fp16",
                                       software="compiled")).record
    except AccelsimError as err:
        return f"{head} error: {err} |" + " |" * 8
    if not r["memory"]["fits"]:
        need = r["memory"]["required_bytes"] / 1e9
        return f"{head} does not fit ({need:,.0f} GB per GPU) |" + " |" * 8
    ok = (r["ttft_s"] >= r["prefill_compute_limit_s"]
          and r["tpot_s"] >= r["decode_bandwidth_limit_s"])
    return (f"{head} {r['ttft_s'] * 1e3:,.1f} | {r['prefill_compute_limit_s'] * 1e3:,.1f} | "
            f"{r['mfu_prefill']:.0%} | {r['tpot_s'] * 1e3:.2f} | "
            f"{r['decode_bandwidth_limit_s'] * 1e3:.2f} | "
            f"{r['decode_bandwidth_utilization']:.0%} | {r['tokens_per_s']:,.0f} | "
            f"{r['mfu']:.1%} | {'yes' if ok else 'NO'} |")


TRAIN_CASES = (  # (model, system, tp, pp, zero, recompute, micro-batch, micro-batches, nodes)
    ("llama2_7b", "dgx-a100", 1, 1, 1, False, 1, 8, 1),
    ("llama2_7b", "dgx-a100", 1, 1, 2, False, 1, 1, 1),  # one micro-batch: the exchange shows
    ("llama2_7b", "dgx-h100", 2, 1, 1, False, 2, 8, 1),
    ("llama2_13b", "dgx-a100", 2, 1, 1, True, 2, 8, 1),
    ("llama2_13b", "dgx-h100", 2, 2, 2, False, 1, 16, 1),
    ("llama3_8b", "hgx-h200", 1, 1, 3, False, 2, 8, 1),
    # 16 bytes per parameter x 69 B parameters is 1.1 TB: more than one 8-GPU node holds
    ("llama2_70b", "dgx-a100", 8, 1, 1, True, 1, 16, 1),
    ("llama2_70b", "dgx-h100", 8, 1, 1, True, 1, 16, 4),
)


def train_rows() -> list[str]:
    out = []
    for model, system, tp, pp, zero, recompute, micro, m, nodes in TRAIN_CASES:
        r = run_simulation(make_config(model, system, mode="train", seq_len=4096, batch=micro,
                                       precision="bf16", software="compiled", tp=tp, pp=pp,
                                       zero=zero, recompute=recompute, accumulate=m,
                                       nodes=nodes)).record
        head = (f"| {model} | {nodes} x {system} | {tp}x{pp}x{r['dp']} | {zero} | "
                f"{'yes' if recompute else 'no'} | {micro}x{m} |")
        mem = r["memory"]
        if not mem["fits"]:
            out.append(f"{head} does not fit ({mem['required_bytes'] / 1e9:,.0f} GB) | | | | | "
                       "| | |")
            continue
        tdp_w = load_profile(r["hardware"]["name"]).power.tdp_w
        gpu_w = r["energy_breakdown_j"]["accelerators"] / r["step_time_s"] / r["devices"]
        out.append(f"{head} {r['step_time_s']:.2f} | {r['tp_comm_s']:.3f} | "
                   f"{r['dp_comm_s']:.3f} | {r['tokens_per_s']:,.0f} | "
                   f"{r['mfu']:.1%} | {mem['required_bytes'] / 1e9:,.1f} | "
                   f"{r['energy_j_per_token']:.3f} | "
                   f"{gpu_w:,.0f} of {tdp_w:g} |")
    return out


def main() -> None:
    lines = ["# LLM predictions beside their limits", "",
             "`python benchmarks/fidelity/llm_predictions.py --write`. Stack: pytorch-compiled "
             "(CUDA graphs, fused elementwise), fp16 weights, activations and KV cache. TP runs "
             "inside dgx-a100 / dgx-h100 / hgx-h200 (NVSwitch); TP 1 on the bare device.", "",
             "TTFT: prefill of the whole batch; compute limit: its FLOPs at the dense fp16 peak "
             "of all GPUs; TPOT: mean decode step; bandwidth limit: the weights (layers and LM "
             "head) and the mean step's KV cache each GPU must stream, at peak bandwidth; BW "
             "used: limit / TPOT; MFU: all model FLOPs over latency x "
             "peak x GPUs. No measured rows to compare with are in the reference data "
             "(calibration_measurements.csv has no LLM rows), so these are predictions only.",
             "",
             "| model | GPU | TP | batch | prompt/output | TTFT ms | compute limit ms | "
             "prefill MFU | TPOT ms | bandwidth limit ms | BW used | output tokens/s | MFU | "
             "within limits |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
             "--- |"]
    body = rows()
    lines += body
    bad = sum(" NO |" in r for r in body)
    lines += ["", f"{len(body)} rows; {bad} outside a limit.", "",
              "## Training steps", "",
              "bf16, sequences of 4096 tokens, pytorch-compiled; split tp x pp x dp (dp: the "
              "rest of the nodes' GPUs); MFU counts 6 x params + attention per token, not "
              "the recomputation. TP s: the TP collectives left exposed by the SimPy layer "
              "events (two all-reduces per layer each way, after each layer's compute); DP s: "
              "the data-parallel exchange left exposed past the backward by the SimPy bucket "
              "events (25 MiB buckets overlapping the last micro-batch's backward; ZeRO >= 1: "
              "reduce-scatter, then the weights' all-gather after the optimizer; across nodes "
              "the hierarchical collective over the NICs), with the backward's slowdown by "
              "the collectives. Energy: the rows' device energies plus static power while a "
              "GPU waits (bubble, communication), plus the links' bytes, the NVSwitch chips "
              "and the NICs; GPU W: each GPU's average power (its part only), of its TDP. "
              "Compute runs at the pace of the slowest of the step's GPUs (the GPU class's "
              "fitted device speed spread, accelsim.sim.straggler).",
              "",
              "| model | system | split | ZeRO | recompute | micro-batch x count | step s | "
              "TP s | DP s | tokens/s | MFU | GB per GPU | J/token | GPU W |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
              "--- |",
              *train_rows()]
    text = "\n".join(lines) + "\n"
    print(text)
    if "--write" in sys.argv:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
