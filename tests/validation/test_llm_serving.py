"""Decoder serving (accelsim.llm.engine, serve, requests): the engine against a naive loop,
conservation of requests, batching policies, chunked prefill, replicas, trace files, goodput
and the highest rate meeting latency targets."""

import math

import numpy as np
import pytest

from accelsim.errors import AccelsimError, ConfigError
from accelsim.llm.engine import Engine, Requests, StepCosts
from accelsim.llm.requests import read_requests
from accelsim.llm.slo import keeps_up, max_rate_meeting_slo, meets_slo, meets_targets
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config


def run(model, hw, **knobs):
    return run_simulation(make_config(model, hw, **knobs)).record


# --- serving ------------------------------------------------------------------------------

def _costs():
    return StepCosts(lambda t, s, q: 1e-3 * t + 1e-6 * q + 0.01, lambda b, c: 0.02 + 1e-6 * c)


def test_requests_alone_take_exactly_their_prefill_and_decode_steps():
    n, p, o = 20, np.full(20, 100), np.full(20, 10)
    req = Requests(np.arange(n) * 100.0, p, o)  # far apart: each runs alone
    out = Engine(_costs(), req, 8, 10_000, 16).run()
    pre = 1e-3 * 100 + 1e-6 * 100 * 101 / 2 + 0.01
    decode = sum(0.02 + 1e-6 * (100 + i) for i in range(1, 10))  # a naive loop
    assert np.allclose(out.first_s - req.arrival_s, pre)
    assert np.allclose(out.done_s - req.arrival_s, pre + decode)


@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_every_request_is_served_once_in_order_even_under_preemption(batching):
    rng = np.random.default_rng(1)
    n = 300
    req = Requests(np.cumsum(rng.exponential(0.01, n)), rng.integers(1, 200, n),
                   rng.integers(1, 100, n))
    out = Engine(_costs(), req, 32, 40, 16, batching, 0.05).run()  # 40 blocks: 640 tokens
    assert np.isfinite(out.done_s).all()
    assert (req.arrival_s <= out.first_s).all() and (out.first_s <= out.last_s).all()
    assert (out.last_s <= out.done_s + 1e-12).all()
    if batching == "continuous":
        assert out.preemptions > 0 and out.peak_blocks <= 40


def test_a_prompt_that_can_never_fit_the_kv_blocks_is_an_error_not_a_hang():
    req = Requests(np.array([0.0]), np.array([100]), np.array([4]))
    with pytest.raises(AccelsimError, match="needs 7 KV blocks; the engine has 2"):
        Engine(_costs(), req, 8, 2, 16).run()  # 101 tokens: 7 blocks of 16


def test_continuous_batching_beats_static_on_latency_under_load():
    rec = {b: run("llama2_7b", "a100", mode="serve", rate=4.0, requests=300,
                  prompt_tokens=256, output_tokens=64, max_batch=32, batching=b,
                  length_dist="uniform", software="compiled")
           for b in ("continuous", "static")}
    assert rec["continuous"]["latency_p99_s"] < rec["static"]["latency_p99_s"]
    for r in rec.values():
        assert r["ttft_p50_s"] <= r["ttft_p99_s"] and r["tpot_p50_s"] <= r["tpot_p99_s"]
        assert r["goodput_requests_per_s"] <= r["requests_per_s"] + 1e-12


@pytest.mark.slow
def test_goodput_counts_only_requests_meeting_the_targets():
    r = run("llama2_7b", "a100", mode="serve", rate=2.0, requests=200, prompt_tokens=128,
            output_tokens=32, slo_ttft_ms=1e-3, software="compiled")
    assert r["goodput_requests_per_s"] == 0 and math.isclose(r["slo_met_fraction"], 0)


def test_a_chunked_step_reads_the_weights_once_for_decodes_and_prefill():
    rec = {c: run("llama2_7b", "a100", mode="serve", rate=6.0, requests=300, prompt_tokens=512,
                  output_tokens=64, software="compiled", **({"chunked_prefill": c} if c else {}))
           for c in (None, 256)}
    for r in rec.values():
        assert math.isfinite(r["latency_p99_s"]) and r["requests"] == 300
    # prefill no longer stalls the decodes: the worst gaps between tokens shrink
    assert rec[256]["tpot_p99_s"] < rec[None]["tpot_p99_s"]


def test_replicas_split_the_load():
    two = run("llama2_7b", "dgx-a100", mode="serve", rate=8.0, requests=400, devices=2,
              prompt_tokens=256, output_tokens=32, software="compiled")
    one = run("llama2_7b", "dgx-a100", mode="serve", rate=4.0, requests=200,
              prompt_tokens=256, output_tokens=32, software="compiled")
    assert two["replicas"] == 2 and two["devices"] == 2
    assert two["tpot_p50_s"] == pytest.approx(one["tpot_p50_s"], rel=0.15)
    with pytest.raises(AccelsimError, match="multiple of tp"):
        run("llama2_7b", "dgx-a100", mode="serve", rate=1.0, devices=3, tp=2, prompt_tokens=8)


def test_a_trace_file_gives_the_requests(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n0.5,20,1\n2.0,300,9\n")
    req = read_requests(str(path), 4096)
    assert req.arrival_s.tolist() == [0.0, 0.5, 2.0] and req.output.tolist() == [5, 1, 9]
    r = run("llama2_7b", "a100", mode="serve", requests_file=str(path), prompt_tokens=8)
    assert r["requests"] == 3 and r["ttft_p50_s"] > 0
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n-1,20,x\n")
    with pytest.raises(ConfigError, match="line 3 arrival_s"):
        read_requests(str(path), 4096)


def _poisson_trial(rate):
    """400 Poisson requests (50 prompt, 20 output tokens) at `rate` on the synthetic engine."""
    rng = np.random.default_rng(0)
    req = Requests(np.cumsum(rng.exponential(1 / rate, 400)), np.full(400, 50),
                   np.full(400, 20))
    return req, Engine(_costs(), req, 16, 10_000, 16).run()


def test_the_highest_rate_meeting_the_targets_is_where_p99_crosses_them():
    trial = _poisson_trial

    best = max_rate_meeting_slo(trial, 1.0, 0.5, None)
    assert best is not None and meets_slo(*trial(best), 0.5, None)
    assert not meets_slo(*trial(best * 1.05), 0.5, None)


def test_a_tpot_target_alone_is_not_met_by_a_server_that_falls_behind():
    trial = _poisson_trial

    # an overloaded server still decodes at 20 ms a step: a 50 ms TPOT target alone holds at
    # any rate, but 16 sequences at 20 ms a token finish at most 16 / (20 x 0.02) = 40 req/s
    assert meets_slo(*trial(10_000.0), None, 0.05) and not keeps_up(*trial(10_000.0))
    best = max_rate_meeting_slo(trial, 1.0, None, 0.05)
    assert best is not None and best < 40.0
    assert meets_targets(*trial(best), None, 0.05)
    assert not meets_targets(*trial(best * 1.05), None, 0.05)


def test_a_prefill_only_step_takes_at_most_its_token_budget():
    costs = _costs()
    # 40 requests of 100-token prompts arrive at once: with a 1,000-token budget a prefill
    # step admits 10 of them, so 4 prefill steps; with 4,000 tokens, one
    req = Requests(np.zeros(40), np.full(40, 100), np.full(40, 2))
    small = Engine(costs, req, 64, 10_000, 16, prefill_tokens=1000).run()
    large = Engine(costs, req, 64, 10_000, 16, prefill_tokens=4000).run()
    assert small.prefill_steps == 4 and large.prefill_steps == 1
    # the first tenth of the requests have their first token after one 1,000-token step
    first = np.sort(small.first_s)[:10]
    assert first == pytest.approx(np.full(10, 1e-3 * 1000 + 1e-6 * 10 * 100 * 101 / 2 + 0.01))


def test_prefill_tokens_is_refused_where_no_step_reads_it():
    with pytest.raises(AccelsimError, match="prefill_tokens caps a prefill-only step"):
        run("llama-3.1-8b", "dgx-h100", mode="serve", rate=5, requests=50, tp=1,
            chunked_prefill=512, prefill_tokens=4096)
    with pytest.raises(AccelsimError, match="static batch prefills all its prompts"):
        run("llama-3.1-8b", "dgx-h100", mode="serve", rate=5, requests=50, tp=1,
            batching="static", prefill_tokens=4096)


def test_a_mostly_idle_server_draws_static_power_plus_at_most_tdp_while_busy():
    from accelsim.devices.estimate import power_limits_w
    from accelsim.profiles.devices import load_profile

    tdp_w, static_w = power_limits_w(load_profile("a100"))
    r = run("llama2_7b", "a100", mode="serve", rate=0.05, requests=30, prompt_tokens=256,
            output_tokens=16, software="compiled")
    busy = r["engine_busy_fraction"]
    assert busy < 0.1
    assert static_w * (1 - busy) <= r["average_power_w"] <= static_w + busy * tdp_w


def test_serving_a_decoder_without_llm_knobs_runs_the_token_engine_and_says_its_lengths():
    r = run("llama2_7b", "a100", mode="serve", rate=2.0, requests=60)
    assert r["ttft_p50_s"] > 0 and r["tpot_p50_s"] > 0
    assert any("512 prompt and 128 output tokens" in n for n in r["notes"])
    with pytest.raises(AccelsimError, match="max_wait_ms applies to the request-level"):
        run("llama2_7b", "a100", mode="serve", rate=2.0, requests=60, max_wait_ms=5)
