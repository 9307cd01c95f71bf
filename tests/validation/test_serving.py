"""Inference serving on the null device, checked against queueing theory and closed forms."""

import json
import pickle

import numpy as np
import pytest

from accelsim.devices.estimate import estimate
from accelsim.devices.null import NullProfile
from accelsim.errors import AccelsimError
from accelsim.interconnect.links import transfer_time_s
from accelsim.profiles.links import load_link
from accelsim.results.records import Recorder
from accelsim.results.trace import chrome_trace, write_chrome_trace
from accelsim.sim.batching import batch_to_take, next_wake_s
from accelsim.sim.serve import ServeConfig, simulate_serving
from accelsim.sim.service import service_table
from accelsim.workload.memory import io_bytes_per_sample
from accelsim.workload.zoo import build_model

MODEL = "mlp"
NULL = NullProfile(op_time_s=1e-3)
S = estimate(build_model(MODEL), NULL, 1, "fp32").step_time_s  # the same at every batch size


def serve(**kw):
    kw.setdefault("device", NULL)
    return simulate_serving(ServeConfig(MODEL, **kw))


# --- the batching policy -------------------------------------------------------------------

def test_policy_takes_full_batches_at_once_and_partial_ones_at_the_deadline():
    assert batch_to_take(0, 0.0, 5.0, max_batch=4, max_wait_s=0.1) == 0
    assert batch_to_take(9, 1.0, 1.0, max_batch=4, max_wait_s=0.1) == 4
    assert batch_to_take(3, 1.0, 1.05, max_batch=4, max_wait_s=0.1) == 0
    assert batch_to_take(3, 1.0, 1.1, max_batch=4, max_wait_s=0.1) == 3
    assert batch_to_take(2, 1.0, 1.0, max_batch=4, max_wait_s=0.0) == 2


def test_policy_wakes_at_the_deadline_or_when_the_batch_fills():
    assert next_wake_s(1.0, fill_at_s=2.0, max_wait_s=0.5) == 1.5
    assert next_wake_s(1.0, fill_at_s=1.2, max_wait_s=0.5) == 1.2
    assert next_wake_s(float("inf"), fill_at_s=float("inf"), max_wait_s=0.5) == float("inf")


# --- queueing theory -----------------------------------------------------------------------

@pytest.mark.slow
def test_md1_waiting_time_matches_pollaczek_khinchine():
    rho = 0.6
    res = serve(rate_per_s=rho / S, requests=200_000, seed=3)
    wq_s = rho * S / (2 * (1 - rho))
    assert res.queueing_delay_mean_s == pytest.approx(wq_s, rel=0.03)
    assert res.latency_mean_s == pytest.approx(wq_s + S, rel=0.03)
    assert res.batch_size_mean == 1.0


@pytest.mark.slow
def test_mm1_waiting_time_with_exponential_service():
    rho = 0.5
    res = serve(rate_per_s=rho / S, requests=200_000, seed=4, service_distribution="exponential")
    assert res.queueing_delay_mean_s == pytest.approx(rho * S / (1 - rho), rel=0.05)


def test_littles_law_and_utilisation():
    rho = 0.7
    res = serve(rate_per_s=rho / S, requests=50_000, seed=5)
    req = res.requests
    # Time-average number in system from an event sweep over arrivals and departures.
    times = np.concatenate([req["arrival_s"], req["end_s"]])
    steps = np.concatenate([np.ones(len(req)), -np.ones(len(req))])
    order = np.argsort(times, kind="stable")
    in_system = np.cumsum(steps[order])[:-1]
    area = float(np.sum(in_system * np.diff(times[order])))
    horizon_s = res.makespan_s - float(req["arrival_s"].min())
    lam = len(req) / horizon_s
    assert area / horizon_s == pytest.approx(lam * res.latency_mean_s, rel=1e-6)
    # Busy servers: L_service = lambda * S, so utilisation ~ rho.
    assert res.utilization[0] == pytest.approx(rho, rel=0.02)
    assert res.offered_load == pytest.approx(rho)


def test_closed_loop_single_client_runs_back_to_back():
    res = serve(concurrency=1, requests=5_000)
    assert res.throughput_samples_per_s == pytest.approx(1 / S, rel=1e-9)
    assert res.latency_p99_s == pytest.approx(S, rel=1e-9)
    assert res.queueing_delay_mean_s == pytest.approx(0.0, abs=1e-12)
    assert res.utilization[0] == pytest.approx(1.0, rel=1e-9)


def test_closed_loop_with_think_time_obeys_the_response_time_law():
    res = serve(concurrency=8, think_time_s=5 * S, max_batch=4, max_wait_s=S / 2,
                requests=20_000, seed=6, devices=2)
    # Interactive response time law: X = N / (R + Z).
    expected = 8 / (res.latency_mean_s + 5 * S)
    assert res.throughput_samples_per_s == pytest.approx(expected, rel=0.02)


# --- dynamic batching ----------------------------------------------------------------------

def test_dynamic_batching_raises_throughput_at_high_load():
    rate = 3 / S  # three times what one request per batch can serve
    single = serve(rate_per_s=rate, requests=20_000, seed=7)
    batched = serve(rate_per_s=rate, requests=20_000, seed=7, max_batch=8, max_wait_s=S)
    assert single.throughput_samples_per_s == pytest.approx(1 / S, rel=0.01)
    assert batched.throughput_samples_per_s == pytest.approx(rate, rel=0.02)
    assert batched.batch_size_mean > 2.5
    assert batched.latency_p99_s < single.latency_p99_s / 10


def test_max_wait_bounds_added_latency_at_low_load():
    rate, wait_s = 0.05 / S, 2 * S
    eager = serve(rate_per_s=rate, requests=20_000, seed=8, max_batch=8)
    patient = serve(rate_per_s=rate, requests=20_000, seed=8, max_batch=8, max_wait_s=wait_s)
    assert patient.requests["wait_s"].max() <= wait_s + S + 1e-9
    added_s = patient.latency_mean_s - eager.latency_mean_s
    assert 0 < added_s <= wait_s
    assert patient.batch_size_mean > eager.batch_size_mean


def test_every_request_is_served_once_in_arrival_order():
    res = serve(rate_per_s=2 / S, requests=5_000, seed=9, max_batch=4, max_wait_s=S, devices=3)
    req = res.requests
    assert len(req) == 5_000 and res.records["samples"].sum() == 5_000
    assert (np.diff(req["arrival_s"]) >= 0).all() and (np.diff(req["start_s"]) >= 0).all()
    assert (req["wait_s"] >= -1e-12).all() and (res.records["samples"] <= 4).all()
    assert set(res.records["resource"]) == {"accel0", "accel1", "accel2"}


# --- determinism, energy, links ------------------------------------------------------------

def test_same_seed_same_result_and_config_pickles():
    cfg = ServeConfig(MODEL, device=NULL, rate_per_s=0.8 / S, requests=3_000, seed=11,
                      max_batch=4, max_wait_s=S)
    a, b = simulate_serving(cfg), simulate_serving(pickle.loads(pickle.dumps(cfg)))
    assert a.records.equals(b.records) and a.to_dict() == b.to_dict()
    c = simulate_serving(ServeConfig(MODEL, device=NULL, rate_per_s=0.8 / S, requests=3_000,
                                     seed=12, max_batch=4, max_wait_s=S))
    assert not a.records.equals(c.records)


def test_energy_per_inference_counts_busy_and_idle_power():
    dev = NullProfile(op_time_s=1e-3, op_energy_j=0.01, static_w=2.0)
    busy = serve(device=dev, concurrency=1, requests=1_000)
    batch_j = estimate(build_model(MODEL), dev, 1, "fp32").energy_j
    assert busy.energy_j_per_sample == pytest.approx(batch_j)
    idle = serve(device=dev, rate_per_s=0.1 / S, requests=5_000, seed=1)
    idle_s = idle.makespan_s * (1 - idle.utilization[0])
    assert idle.energy_j == pytest.approx(5_000 * batch_j + 2.0 * idle_s)
    assert idle.average_power_w == pytest.approx(idle.energy_j / idle.makespan_s)


def test_service_time_adds_host_link_transfers():
    link = load_link("pcie-gen4-x16")
    graph = build_model(MODEL)
    table = service_table(graph, NULL, link, max_batch=4, precision="fp16")
    in_b, out_b = io_bytes_per_sample(graph, "fp16")
    for b in (1, 4):
        want_s = (transfer_time_s(b * in_b, link, achieved=True) + S
                  + transfer_time_s(b * out_b, link, achieved=True))
        assert table.loc[b, "service_s"] == pytest.approx(want_s)
    res = serve(host_link="pcie-gen4-x16", concurrency=1, requests=100, precision="fp16")
    assert res.throughput_samples_per_s == pytest.approx(1 / table.loc[1, "service_s"])


# --- impossible settings -------------------------------------------------------------------

@pytest.mark.parametrize("kw, words", [
    ({"rate_per_s": 0.0}, "rate_per_s"),
    ({"rate_per_s": -1.0}, "rate_per_s"),
    ({"rate_per_s": float("nan")}, "rate_per_s"),
    ({"rate_per_s": 1.0, "concurrency": 2}, "both"),
    ({}, "neither"),
    ({"rate_per_s": 1.0, "max_batch": 0}, "max_batch"),
    ({"rate_per_s": 1.0, "max_wait_s": -0.001}, "max_wait_s"),
    ({"rate_per_s": 1.0, "requests": 0}, "requests"),
    ({"concurrency": 0}, "concurrency"),
    ({"rate_per_s": 1.0, "think_time_s": 1.0}, "closed loop"),
    ({"rate_per_s": 1.0, "devices": 0}, "devices"),
    ({"rate_per_s": 1.0, "software": "jit"}, "software"),
    ({"rate_per_s": 1.0, "precision": "fp7"}, "precision"),
    ({"rate_per_s": 1.0, "service_distribution": "pareto"}, "service_distribution"),
    ({"rate_per_s": 1.0, "device": None}, "device"),
    ({"rate_per_s": 1.0, "device": 3.5}, "device"),
    ({"rate_per_s": 1.0, "system": 7}, "system"),
    ({"rate_per_s": 1, "max_batch": True}, "max_batch"),
])
def test_impossible_settings_are_clear_errors(kw, words):
    kw = {"device": NULL, **kw}
    with pytest.raises(AccelsimError, match=words):
        ServeConfig(MODEL, **kw)


def test_a_batch_that_does_not_fit_names_the_largest_that_does():
    small = NullProfile(capacity_bytes=2e8)
    with pytest.raises(AccelsimError, match="largest batch that fits is"):
        simulate_serving(ServeConfig("resnet50", device=small, rate_per_s=1.0, max_batch=64,
                                     requests=10))


def test_unknown_names_are_clear_errors():
    with pytest.raises(AccelsimError):
        simulate_serving(ServeConfig("no_such_model", device=NULL, rate_per_s=1.0))
    with pytest.raises(AccelsimError):
        simulate_serving(ServeConfig(MODEL, device="no_such_device", rate_per_s=1.0))
    with pytest.raises(AccelsimError, match="workload"):
        ServeConfig(42, device=NULL, rate_per_s=1.0)


# --- the Chrome trace ----------------------------------------------------------------------

def test_trace_has_one_named_track_per_resource_and_the_records_durations(tmp_path):
    res = serve(rate_per_s=2 / S, requests=2_000, seed=10, max_batch=4, max_wait_s=S,
                devices=2)
    path = write_chrome_trace(res.records, tmp_path / "serve.json")
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["accel0", "accel1"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(res.records)
    for tid, resource in names.items():
        dur_us = sum(e["dur"] for e in spans if e["tid"] == tid)
        want_s = res.records.loc[res.records["resource"] == resource, "duration_s"].sum()
        assert dur_us == pytest.approx(want_s * 1e6, rel=1e-9)


def test_trace_of_mixed_resources_keeps_their_order_and_fields():
    rec = Recorder()
    rec.add("storage", "read", 0.0, 0.002, n_bytes=1e6)
    rec.add("pcie", "h2d", 0.002, 0.003, step=0, n_bytes=1e6)
    rec.add("accel0", "compute", 0.003, 0.010, step=0, device=0, samples=32, energy_j=1.5)
    rec.add("storage", "read", 0.002, 0.004, detail="file 7")
    events = chrome_trace(rec.frame())["traceEvents"]
    tracks = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
    assert tracks == ["storage", "pcie", "accel0"]
    compute = next(e for e in events if e["name"] == "compute")
    assert compute["ts"] == pytest.approx(3000.0) and compute["dur"] == pytest.approx(7000.0)
    assert compute["args"]["samples"] == 32 and compute["args"]["energy_j"] == 1.5
    json.dumps(events, allow_nan=False)  # valid JSON, plain Python types


def test_trace_to_an_unwritable_path_is_a_clear_error(tmp_path):
    rec = Recorder()
    rec.add("accel0", "batch", 0.0, 1.0)
    with pytest.raises(AccelsimError, match="cannot write .*t.json: no such folder"):
        write_chrome_trace(rec.frame(), tmp_path / "missing_dir" / "t.json")
