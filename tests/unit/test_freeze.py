"""Transfer learning (accelsim.workload.freeze): a partly frozen MLP's backward work, memory
and gradient exchange against closed forms from the layer sizes alone (784-512-512-10)."""

from __future__ import annotations

import pytest

from accelsim.errors import AccelsimError
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.freeze import frozen_graph
from accelsim.workload.memory import memory_need
from accelsim.workload.work import work_table
from accelsim.workload.zoo import build_model

B = 32
LAYERS = {"fc1.linear": (784, 512), "fc2.linear": (512, 512), "fc3": (512, 10)}


def _params(name: str) -> int:
    i, o = LAYERS[name]
    return i * o + o


def _bwd(graph) -> dict[str, float]:
    w = work_table(graph, B, "fp32", "train", "adam")
    return dict(zip(w.loc[w["phase"] == "backward", "name"],
                    w.loc[w["phase"] == "backward", "flops"], strict=True))


def test_last_layer_only():
    g = frozen_graph(build_model("mlp"), trainable="last:1")
    assert g.meta["frozen"] == ("fc1.linear", "fc2.linear")
    bwd = _bwd(g)
    # nothing upstream of fc3 trains: its weight gradient only, 2 x B x 512 x 10 (dW = X^T dY)
    assert set(bwd) == {"fc3"}
    assert bwd["fc3"] == pytest.approx(2 * B * 512 * 10, rel=0.01)
    opt = work_table(g, B, "fp32", "train", "adam").query("phase == 'optimizer'")
    full = work_table(build_model("mlp"), B, "fp32", "train", "adam").query(
        "phase == 'optimizer'")
    assert opt["flops"].iloc[0] / full["flops"].iloc[0] == pytest.approx(
        _params("fc3") / sum(_params(n) for n in LAYERS))
    mem = memory_need(g, B, "fp32", "train", "adam")
    assert mem.gradients_bytes == 4 * _params("fc3")
    assert mem.optimizer_state_bytes == 2 * 4 * _params("fc3")  # Adam: two fp32 moments
    assert mem.activations_bytes == B * 512 * 4  # fc3's saved input only


def test_frozen_middle_needs_input_gradients_but_no_weight_gradient():
    g = frozen_graph(build_model("mlp"), freeze="fc2")
    bwd = _bwd(g)
    full = _bwd(build_model("mlp"))
    # fc1 trains, so fc2 (frozen) and the relus pass input gradients back: dX = dY W^T,
    # 2 x B x 512 x 512 for fc2, no dW; fc1 needs dW but no dX (nothing before it trains)
    assert bwd["fc2.linear"] == pytest.approx(2 * B * 512 * 512, rel=0.01)
    assert bwd["fc1.linear"] == pytest.approx(2 * B * 784 * 512, rel=0.01)
    assert full["fc2.linear"] == pytest.approx(2 * bwd["fc2.linear"], rel=0.01)
    assert "flatten" not in bwd
    mem = memory_need(g, B, "fp32", "train", "sgd")
    assert mem.gradients_bytes == 4 * (_params("fc1.linear") + _params("fc3"))


def test_all_is_the_unfrozen_model():
    g = build_model("mlp")
    assert frozen_graph(g, "all", "") is g
    assert frozen_graph(g, "from:fc1") is g  # the first layer with weights: all train


def test_a_frozen_base_trains_faster_and_exchanges_less():
    full = run_simulation(make_config("resnet50-train", "dgx-a100", steps=10)).record
    head = run_simulation(make_config("resnet50-train", "dgx-a100", steps=10,
                                      trainable="last:1")).record
    assert head["memory"]["gradients_bytes"] == 4 * (2048 * 1000 + 1000)
    assert head["allreduce_time_s"] < full["allreduce_time_s"]
    assert head["device_only"]["latency_s"] < full["device_only"]["latency_s"]


@pytest.mark.parametrize("knobs, words", [
    ({"trainable": "last:0"}, "last:N"),
    ({"trainable": "from:nope"}, "no layer 'nope'"),
    ({"trainable": "some"}, "choose all"),
    ({"freeze": "fc9"}, "no layer with weights named 'fc9'"),
    ({"freeze": "fc1+fc2+fc3"}, "nothing would train"),
])
def test_bad_specs(knobs, words):
    with pytest.raises(AccelsimError, match=words):
        frozen_graph(build_model("mlp"), knobs.get("trainable", "all"), knobs.get("freeze", ""))


def test_knobs_train_only():
    with pytest.raises(AccelsimError, match="applies to mode train"):
        make_config("resnet50", "a100", trainable="last:1")


def test_record_says_what_trains():
    rec = run_simulation(make_config("mlp", "a100", mode="train", trainable="last:1",
                                     steps=5)).record
    assert rec["workload"]["trainable_params"] == _params("fc3")
    assert any("transfer learning" in n for n in rec["notes"])


def test_decoders_refuse_freezing():
    with pytest.raises(AccelsimError, match="lora-rank"):
        run_simulation(make_config("llama2_7b", "dgx-a100", mode="train", trainable="last:1",
                                   seq_len=512, tp=2))  # (tp: the token-level engine)
