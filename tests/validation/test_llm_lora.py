"""LoRA fine-tuning of a decoder (issue 25 item 4 for decoders): the base weights frozen,
rank-r adapters on each layer's QKV projection trained, against closed forms: a frozen GEMM's
backward is its input gradient only (its forward FLOPs once, not twice), the adapters' both;
gradients, Adam state and the exchange hold r (d + QKV width) parameters a layer."""

import pytest

from accelsim.llm.costs import Platform
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.train import GRAD_BYTES, TrainSplit, _micro_rows, train_memory
from accelsim.profiles.devices import load_profile
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

CFG, DGX = decoder("llama-2-7b"), load_system("dgx-h100")
PLAT = Platform(CFG, load_profile("h100"), "megatron", "bf16", "bf16", 1)
RANK = 32


def _flops(split: TrainSplit, phase: str, names: tuple[str, ...]) -> float:
    work, _ = _micro_rows(PLAT, split)
    rows = work[(work["phase"] == phase) & work["name"].isin(names)]
    return float(rows["flops"].sum())


def test_frozen_gemms_take_the_input_gradient_only_and_adapters_both():
    lora = TrainSplit(8, 1, 4096, lora_rank=RANK)
    base = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head")
    fwd = _flops(lora, "forward", base)
    assert fwd > 0 and _flops(lora, "backward", base) == pytest.approx(fwd)
    full = TrainSplit(8, 1, 4096)
    assert _flops(full, "backward", base) == pytest.approx(2 * _flops(full, "forward", base))
    adapters = ("lora_a", "lora_b")
    tokens = 4096
    want = 2 * tokens * RANK * (CFG.d_model + 3 * CFG.d_model)  # A then B, MHA QKV = 3 d
    assert _flops(lora, "forward", adapters) == pytest.approx(want)
    assert _flops(lora, "backward", adapters) == pytest.approx(2 * want)
    work, _ = _micro_rows(PLAT, lora)
    assert not ((work["phase"] == "backward") & (work["op"] == "embedding")).any()


def test_only_the_adapters_hold_gradients_and_adam_state():
    lay = layout(CFG, DGX, 1, 1)
    mem = train_memory(PLAT, lay, TrainSplit(8, 1, 4096, lora_rank=RANK), 80e9)
    adapters = CFG.n_layers * RANK * (CFG.d_model + 3 * CFG.d_model)
    assert mem["gradients_bytes"] == pytest.approx(adapters * GRAD_BYTES)
    assert mem["optimizer_bytes"] == pytest.approx(adapters * 12.0)  # fp32 master, m, v


def test_a_lora_step_is_faster_than_full_training_and_says_its_rank():
    knobs = dict(mode="train", batch=1, seq_len=4096, zero=1, precision="fp8",
                 software="megatron", accumulate=4)
    full = run_simulation(make_config("llama-2-7b", "dgx-h100", **knobs)).record
    lora = run_simulation(make_config("llama-2-7b", "dgx-h100", lora_rank=RANK, **knobs)).record
    assert lora["lora_rank"] == RANK and full["lora_rank"] == 0
    assert lora["step_time_s"] < full["step_time_s"]
    assert lora["memory"]["optimizer_bytes"] < full["memory"]["optimizer_bytes"] / 100
