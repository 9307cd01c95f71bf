"""A served decoder's memory lists every part of what it requires (issue 24, bad output: the
running batch's logits buffer was counted in the total but listed nowhere): the parts add up
to the total, and the buffer is one fp32 row of the vocabulary a running sequence."""

import pytest

from accelsim.llm.models import decoder
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

PARTS = ("weights_bytes", "kv_cache_bytes", "activations_bytes", "reserve_bytes")


@pytest.mark.parametrize("max_batch", [1, 64, 256])
def test_the_parts_add_up_to_what_a_served_decoder_requires(max_batch):
    knobs = dict(mode="serve", rate=5.0, requests=20, prompt_tokens=256, output_tokens=16,
                 max_batch=max_batch)
    mem = run_simulation(make_config("llama2_7b", "a100", **knobs)).record["memory"]
    assert sum(mem[k] for k in PARTS) == pytest.approx(mem["required_bytes"], rel=1e-12)
    one = run_simulation(make_config("llama2_7b", "a100", **(knobs | {"max_batch": 1})))
    extra = mem["activations_bytes"] - one.record["memory"]["activations_bytes"]
    assert extra == pytest.approx((max_batch - 1) * decoder("llama2_7b").vocab * 4.0)
