"""Context parallelism in decoder training (issue 20 item 6): each sequence split over cp
GPUs (Megatron-LM), against closed forms: a rank's tokens, saved activations and causal
attention pairs are 1/cp of the sequence's, its K/V exchange is hidden behind the attention
unless the hops outlast it, and the gradient group holds data x context ranks."""

import pytest

from accelsim.errors import AccelsimError
from accelsim.interconnect.links import transfer_time_s
from accelsim.llm.costs import Platform
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.train import TrainSplit, _micro_rows, train_memory
from accelsim.llm.train_parts import cp_exposed_s
from accelsim.profiles.devices import load_profile
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

CFG, DGX = decoder("llama-3-8b"), load_system("dgx-h100")
PLAT = Platform(CFG, load_profile("h100"), "megatron", "bf16", "bf16", 1)
SEQ = 8192


def _forward_flops(split: TrainSplit, op: str) -> float:
    work, _ = _micro_rows(PLAT, split)
    rows = work[(work["phase"] == "forward") & (work["shape"] == 0) & (work["op"] == op)]
    return float(rows["flops"].sum())


def test_a_rank_holds_one_cp_th_of_the_sequence():
    whole, half = TrainSplit(8, 1, SEQ), TrainSplit(8, 1, SEQ // 2, cp=2)
    for op in ("linear", "attention"):  # tokens, and causal pairs, both halve
        assert _forward_flops(half, op) == pytest.approx(_forward_flops(whole, op) / 2)
    lay = layout(CFG, DGX, 1, 1)
    mem = {s.cp: train_memory(PLAT, lay, s, 80e9) for s in (whole, half)}
    assert mem[2]["activations_bytes"] == pytest.approx(mem[1]["activations_bytes"] / 2)
    assert mem[2]["weights_bytes"] == mem[1]["weights_bytes"]


def test_the_kv_exchange_is_hidden_unless_its_hops_outlast_the_attention():
    split = TrainSplit(8, 1, SEQ // 2, cp=2)
    work, gemms = _micro_rows(PLAT, split)
    from accelsim.llm.costs import cost_frames

    done = cost_frames(PLAT, work.drop(columns="shape"), gemms).assign(shape=work["shape"])
    att = done[(done["shape"] == 0) & (done["op"] == "attention")]
    f_att = float(att.loc[att["phase"] == "forward", "time_s"].sum())
    chunk = 1 * (SEQ // 2) * 2 * CFG.n_kv_heads * CFG.head_dim * 2.0  # K and V, bf16
    for system in (DGX, load_system("l40s-server")):  # NVLink; PCIe
        lay = layout(CFG, system, 1, 1)
        hop = transfer_time_s(chunk, lay.link, achieved=True)
        fwd, _ = cp_exposed_s(PLAT, lay, split, done)
        assert fwd == pytest.approx(max(hop - f_att / 2, 0.0))


def test_cp_through_the_run_and_its_refusals():
    knobs = dict(mode="train", batch=1, seq_len=SEQ, zero=1, precision="fp8",
                 software="megatron")
    r = run_simulation(make_config("llama-3-8b", "dgx-h100", cp=2, accumulate=4,
                                   **knobs)).record
    assert (r["cp"], r["dp"]) == (2, 4)  # 8 GPUs: 4 data-parallel replicas of 2 CP ranks
    assert r["global_batch_tokens"] == 4 * 4 * SEQ  # micro-batches x replicas x sequence
    with pytest.raises(AccelsimError, match="multiple of cp"):
        run_simulation(make_config("llama-3-8b", "dgx-h100", cp=3, **knobs))
    with pytest.raises(AccelsimError, match="2 x cp"):
        run_simulation(make_config("llama-3-8b", "dgx-h100", cp=2, **(knobs | {"seq_len": 4094})))
