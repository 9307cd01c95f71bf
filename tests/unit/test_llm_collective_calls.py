"""A stack's time per tensor-parallel collective call (`host.per_collective_us`, fitted for
FasterTransformer): each of a decoder layer's two all-reduces in every forward pass costs it
once more, serially; without tensor parallelism there is no call to charge."""

import re
from pathlib import Path

import pytest

from accelsim.llm.models import decoder
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

BASE = Path(__file__).resolve().parents[2] / "hw_profiles" / "software" / "tensorrt-llm.toml"


def _stack(tmp_path: Path, per_collective_us: float) -> str:
    """tensorrt-llm's stack with a time per collective call added (and sourced)."""
    text = re.sub(r"(?m)^per_step_us = (.*)$",
                  rf"per_step_us = \1\nper_collective_us = {per_collective_us}",
                  BASE.read_text(), count=1)
    source = '"host.per_collective_us" = "assumed: a test figure"'
    text = text.replace("[sources]\n", f"[sources]\n{source}\n", 1)
    path = tmp_path / f"calls-{per_collective_us:g}.toml"
    path.write_text(text)
    return str(path)


def _latency_s(stack: str, hw: str, tp: int, output: int) -> float:
    cfg = make_config("ft-gpt-20b", hw, mode="infer", tp=tp, batch=1, prompt_tokens=20,
                      output_tokens=output, software=stack)
    return run_simulation(cfg).record["e2e_latency_s"]


@pytest.mark.parametrize("output", [1, 8])
def test_each_all_reduce_call_adds_the_stack_time_once(tmp_path, output):
    layers = decoder("ft-gpt-20b").n_layers
    base = _latency_s(_stack(tmp_path, 0.0), "dgx-a100", 8, output)
    more = _latency_s(_stack(tmp_path, 100.0), "dgx-a100", 8, output)
    # closed form: `output` forward passes (the prefill makes the first token), each with two
    # all-reduces per layer, each 100 us more
    assert more - base == pytest.approx(output * layers * 2 * 100e-6, rel=1e-6)


def test_no_tensor_parallelism_no_collective_calls(tmp_path):
    base = _latency_s(_stack(tmp_path, 0.0), "a100", 1, 8)
    assert _latency_s(_stack(tmp_path, 500.0), "a100", 1, 8) == base
