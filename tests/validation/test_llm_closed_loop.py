"""Closed-loop clients for decoder serving (accelsim.llm.arrivals, engine, serve): one client
sees the single-request latency of infer mode, Little's law holds for the clients, throughput
rises with the clients to the open loop's saturated throughput, replicas share the clients, and
the combinations that make no sense are refused in one line."""

import math

import numpy as np
import pytest
import simpy

from accelsim.llm.arrivals import Clients
from accelsim.llm.engine import Requests, StepCosts
from accelsim.llm.requests import draw_requests
from accelsim.llm.serve import serve_requests
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from tests.helpers.cli import one_line_error, run_cli

SHORT = {"prompt_tokens": 64, "output_tokens": 16, "software": "compiled"}


def run(hw="a100", **knobs):
    return run_simulation(make_config("llama2_7b", hw, mode=knobs.pop("mode", "serve"),
                                      **{**SHORT, **knobs}))


def _costs():
    return StepCosts(lambda t, s, q: 1e-3 * t + 1e-6 * q + 0.01, lambda b, c: 0.02 + 1e-6 * c)


def _closed(n, prompt, output, concurrency, think_s=0.0, replicas=1, max_batch=8,
            batching="continuous", max_wait_s=0.0):
    clients = Clients(simpy.Environment(), n, concurrency, think_s, replicas, seed=0)
    req = Requests(clients.arrival_s, np.full(n, prompt), np.full(n, output))
    out = serve_requests(_costs(), req, replicas, max_batch, 10_000, 16, batching, max_wait_s,
                         None, clients=clients)
    return req, out


# --- the engine with closed-loop clients --------------------------------------------------

@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_one_client_sends_each_request_as_the_last_returns(batching):
    req, out = _closed(12, 100, 10, concurrency=1, batching=batching)
    pre = 1e-3 * 100 + 1e-6 * 100 * 101 / 2 + 0.01
    decode = sum(0.02 + 1e-6 * (100 + i) for i in range(1, 10))  # a naive loop
    assert np.allclose(out.done_s - req.arrival_s, pre + decode)
    assert req.arrival_s[0] == 0 and (req.arrival_s[1:] == out.done_s[:-1]).all()


@pytest.mark.parametrize("batching,max_wait_s", [("continuous", 0.0), ("static", 0.0),
                                                 ("static", 0.3)])
def test_clients_never_send_more_than_the_requests_and_all_return(batching, max_wait_s):
    for concurrency, think_s, replicas in ((3, 0.0, 1), (5, 0.2, 2), (40, 0.05, 3)):
        req, out = _closed(31, 50, 7, concurrency, think_s, replicas, 4, batching, max_wait_s)
        assert np.isfinite(req.arrival_s).all() and np.isfinite(out.done_s).all()
        assert (np.diff(req.arrival_s) >= 0).all()  # numbered in arrival order
        assert (req.arrival_s[:min(concurrency, 31)] == 0).all()
        in_system = np.searchsorted(np.sort(out.done_s), req.arrival_s, "right")
        # at each arrival, at most `concurrency` requests are out (sent, not returned)
        assert (np.arange(1, 32) - in_system <= concurrency).all()


def test_a_static_batch_of_as_many_clients_as_the_batch_is_always_full():
    req, out = _closed(40, 30, 5, concurrency=8, max_batch=8, batching="static")
    ends = np.unique(out.done_s)
    assert len(ends) == 5  # five batches of eight, each sent back together
    assert out.batch_sum / (out.steps - out.prefill_steps) == 8


@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_replicas_each_serve_their_share_of_the_clients(batching):
    """Round robin in arrival order: with fixed lengths, 4 clients on 2 replicas run as 2
    clients on each (the replicas return at the same instants: each engine lets the other's
    returns deal it their clients' next requests before it steps again)."""
    _, two = _closed(400, 64, 16, concurrency=4, replicas=2, max_batch=2, batching=batching)
    _, one = _closed(200, 64, 16, concurrency=2, max_batch=2, batching=batching)
    assert np.nanmax(two.done_s) == pytest.approx(np.nanmax(one.done_s), rel=1e-9)
    assert two.steps == 2 * one.steps


def test_closed_loop_lengths_are_the_open_loops_for_the_seed():
    for dist in ("fixed", "uniform", "exponential"):
        closed = draw_requests(500, None, 200, 50, dist, 4096, 7)
        opened = draw_requests(500, 3.0, 200, 50, dist, 4096, 7)
        assert np.isinf(closed.arrival_s).all()
        assert (closed.prompt == opened.prompt).all() and (closed.output == opened.output).all()


# --- the token-level model ----------------------------------------------------------------

@pytest.mark.parametrize("hw,knobs", [
    ("a100", {}), ("a100", {"batching": "static"}), ("dgx-a100", {"tp": 2}),
    ("dgx-a100", {"devices": 2}),  # (chunked prefill would split the prompt over steps)
])
def test_one_client_sees_the_single_request_latency_of_infer_mode(hw, knobs):
    res = run(hw, concurrency=1, requests=30, prompt_tokens=256, output_tokens=32, **knobs)
    alone = run(hw, mode="infer", prompt_tokens=256, output_tokens=32,
                **{k: v for k, v in knobs.items() if k == "tp"}).record["e2e_latency_s"]
    latency = res.records["duration_s"].to_numpy()
    assert len(latency) == 30
    # NB: serving costs its steps from tables interpolated on grids (accelsim.llm.steps),
    # infer mode at the exact shapes
    assert latency == pytest.approx(np.full(30, alone), rel=2e-3)
    assert latency.max() - latency.min() <= 1e-9 * alone
    r = res.record
    assert r["requests_per_s"] == pytest.approx(1 / r["latency_mean_s"], rel=1e-9)
    assert r["rate_per_s"] is None and r["bottleneck_detail"].startswith("1 closed-loop client, ")
    assert any(n.startswith("closed loop: 1 client,") for n in r["notes"])
    opened = run(hw, rate=1.0, requests=30, prompt_tokens=256, output_tokens=32, **knobs).record
    assert list(r) == list(opened)  # the same record, key for key


@pytest.mark.parametrize("clients,think_ms,knobs", [
    (2, 0, {}), (8, 0, {}), (2, 100, {}), (8, 100, {}),
    (6, 100, {"batching": "static", "max_batch": 4}), (8, 50, {"chunked_prefill": 32}),
    (8, 100, {"hw": "dgx-a100", "tp": 2}), (8, 100, {"hw": "dgx-a100", "devices": 4}),
])
def test_littles_law_holds_for_the_clients(clients, think_ms, knobs):
    """N = X (R + Z): every client is always either waiting for its request or thinking.
    Tolerance: the end of the run (fewer clients left) and the think times' sample mean
    (about Z / sqrt(n) off its mean)."""
    n = 1500
    extra = {"think_time_ms": think_ms} if think_ms else {}
    r = run(knobs.pop("hw", "a100"), concurrency=clients, requests=n, length_dist="uniform",
            **extra, **knobs).record
    x, resp, z = r["requests_per_s"], r["latency_mean_s"], think_ms / 1e3
    tolerance = 0.01 + 3 * z / (resp + z) / math.sqrt(n)
    assert x * (resp + z) == pytest.approx(clients, rel=tolerance)
    assert r["requests"] == n


@pytest.mark.slow
def test_throughput_rises_with_clients_to_the_saturated_open_loop():
    common = {"requests": 1000, "max_batch": 16, "length_dist": "uniform", "output_tokens": 8}
    x, batch = {}, {}
    for n in (1, 2, 4, 8, 16, 32, 64):
        r = run(concurrency=n, **common).record
        x[n], batch[n] = r["requests_per_s"], r["batch_size_mean"]
    saturated = run(rate=1e5, **common).record["requests_per_s"]  # all there at once
    assert x[1] < x[2] < x[4] < x[8] < x[16]
    for n in (16, 32, 64):  # at and past the largest batch the running batch stays full
        assert x[n] == pytest.approx(saturated, rel=0.01)
        assert batch[n] >= 0.97 * 16
    assert batch[8] <= 8


def test_goodput_and_the_rate_search_work_in_closed_loop():
    r = run(concurrency=4, requests=200, slo_ttft_ms=50, slo_tpot_ms=30).record
    assert 0 < r["goodput_requests_per_s"] <= r["requests_per_s"] + 1e-12
    assert r["max_rate_meeting_slo_per_s"] is not None and r["max_rate_meeting_slo_per_s"] > 0
    again = run(concurrency=4, requests=200, slo_ttft_ms=50, slo_tpot_ms=30).record
    assert again["ttft_p99_s"] == r["ttft_p99_s"]  # seeded: the same run


# --- the command line ---------------------------------------------------------------------

SERVE = ("simulate", "llama2_7b", "--hw", "a100", "--mode", "serve")


def test_the_command_line_serves_closed_loop_clients(capsys):
    code, out, err = run_cli(capsys, *SERVE, "--concurrency", "4", "--think-time-ms", "20",
                             "--requests", "40", "--prompt-tokens", "64", "--output-tokens",
                             "8")
    assert code == 0, err
    assert "closed loop: 4 clients" in out and "think time of mean 20 ms" in out


@pytest.mark.parametrize("flags,says", [
    (("--concurrency", "4", "--rate", "5"), "give one"),
    (("--concurrency", "4", "--requests-file", "{trace}"), "drop --concurrency"),
    (("--concurrency", "4", "--think-time-ms", "5", "--requests-file", "{trace}"),
     "drop --concurrency and --think-time-ms"),
    (("--rate", "5", "--think-time-ms", "10"), "--think-time-ms applies to closed-loop"),
    (("--concurrency", "4", "--max-wait-ms", "5"), "max_wait_ms applies to the request-level"),
    (("--concurrency", "0"), "concurrency"),
])
def test_bad_combinations_are_refused_in_one_line(capsys, tmp_path, flags, says):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n")
    args = [f.format(trace=trace) for f in flags]
    assert says in one_line_error(capsys, *SERVE, *args)
