"""Federated learning (mode federated, accelsim.sim.federated): round times, bytes, drops and
energy against closed forms built from the network profile and the device's own step."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.devices.estimate import estimate
from accelsim.errors import AccelsimError
from accelsim.profiles.hardware import host_cpu, resolve_hardware
from accelsim.profiles.networks import MBIT, load_network
from accelsim.profiles.systems import load_system
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.zoo import build_model

MODEL, HW, BATCH = "mobilenet_v2", "jetson-orin", 8


def _run(**kw) -> dict:
    knobs = {"mode": "federated", "batch": BATCH, "rounds": 2, **kw}
    return run_simulation(make_config(MODEL, HW, **knobs)).record


def _step() -> tuple[float, float, int]:
    system, profile = resolve_hardware(HW)
    graph = build_model(MODEL)
    est = estimate(graph, profile, BATCH, "fp32", "train", "default", "sgd", *host_cpu(system))
    return est.step_time_s, est.energy_j, graph.params


def test_round_is_the_sum_of_its_phases():
    """No contention (5 clients x 13 Mbit/s against a 25 GbE server): a round is half an RTT
    and the model over the downlink, the steps, half an RTT and the update over the uplink,
    and the server's pass over the updates at its DRAM bandwidth."""
    step_s, step_j, params = _step()
    net, server = load_network("lte"), load_system("workstation")
    k, steps = 5, 3
    model_b = 4 * params
    agg_s = (k * model_b + 2 * model_b) / server.host.dram_bandwidth_bytes_per_s
    want_s = (net.rtt_s + model_b / net.downlink_bytes_per_s + steps * step_s
              + model_b / net.uplink_bytes_per_s + agg_s)
    r = _run(population=k, local_steps=steps)
    f = r["federated"]
    assert f["round_s"]["mean"] == pytest.approx(want_s, rel=1e-9)
    assert f["total_s"] == pytest.approx(2 * want_s, rel=1e-9)
    assert f["bytes_per_round"] == {"down": k * model_b, "up": k * model_b}
    assert f["finished_share"] == 1.0
    assert r["throughput_samples_per_s"] == pytest.approx(2 * k * steps * BATCH / (2 * want_s))
    assert r["bottleneck"] == "uplink"  # 6 Mbit/s up against 13 down and a fast device


def test_client_energy_closed_form():
    """Huang et al.'s linear radio model at the achieved rates, plus the steps' energy."""
    step_s, step_j, params = _step()
    net = load_network("lte")
    down_s, up_s = 4 * params / net.downlink_bytes_per_s, 4 * params / net.uplink_bytes_per_s
    radio_j = (down_s * net.radio_power_w(downlink_bytes_per_s=net.downlink_bytes_per_s)
               + up_s * net.radio_power_w(uplink_bytes_per_s=net.uplink_bytes_per_s))
    e = _run(population=2, local_steps=4)["federated"]["client_energy_j_per_round"]
    assert e["compute"] == pytest.approx(4 * step_j, rel=1e-9)
    assert e["radio"] == pytest.approx(radio_j, rel=1e-9)
    assert e["total"] == pytest.approx(4 * step_j + radio_j, rel=1e-9)


def test_update_precision_halves_the_upload():
    _, _, params = _step()
    f = _run(population=3, update_precision="fp16")["federated"]
    assert f["update_bytes"] == 2 * params
    assert f["bytes_per_round"]["up"] == 3 * 2 * params
    assert f["bytes_per_round"]["down"] == 3 * 4 * params  # the model goes down in fp32


def test_server_network_shared_by_uploads():
    """200 clients at 1 Gbit/s each against one 25 GbE port: the uploads share the port
    max-min fairly, all ending together at 200 x update / 25 Gbit/s."""
    _, _, params = _step()
    port = load_system("workstation").network_bandwidth_bytes_per_s
    r = _run(population=200, uplink_mbps=1000, downlink_mbps=1e5, local_steps=1, rounds=1)
    up_s = r["federated"]["client_phase_s"]["upload"]
    assert 200 * 4 * params / port > 4 * params / (1000 * MBIT)  # the port binds
    assert up_s == pytest.approx(200 * 4 * params / port, rel=1e-6)
    assert r["bottleneck"] == "server network"


def test_deadline_drops_exactly_the_slow_clients():
    """With a speed spread, the clients dropped are those whose own finish time (phases in
    closed form, uncontended) passes the deadline."""
    step_s, _, params = _step()
    net = load_network("lte")
    steps, spread, n = 200, 1.0, 30
    speed = np.random.default_rng(0).lognormal(0.0, spread, n)  # the engine's draw, seed 0
    fixed_s = (net.rtt_s + 4 * params / net.downlink_bytes_per_s
               + 4 * params / net.uplink_bytes_per_s)
    finish_s = fixed_s + steps * step_s * speed
    deadline_s = float(np.median(finish_s))
    r = _run(population=n, local_steps=steps, client_spread=spread, deadline_s=deadline_s,
             rounds=1)
    f = r["federated"]
    assert f["finished_per_round"] == int((finish_s <= deadline_s).sum())
    assert f["per_round"][0]["updates_arrived_s"] == pytest.approx(deadline_s)
    assert r["bottleneck"] == "deadline"


def test_sampling_is_seeded_and_bounded():
    a = _run(population=20, clients_per_round=5, client_spread=0.5, seed=3)
    b = _run(population=20, clients_per_round=5, client_spread=0.5, seed=3)
    assert a["federated"]["per_round"] == b["federated"]["per_round"]
    assert a["federated"]["clients_per_round"] == 5


@pytest.mark.parametrize("knobs, words", [
    ({"population": 3, "clients_per_round": 5}, "clients_per_round"),
    ({"network": "carrier-pigeon"}, "carrier-pigeon"),
    ({"update_precision": "fp99"}, "fp99"),
    ({"server": "edge-device"}, "no network"),
])
def test_bad_federated_input(knobs, words):
    with pytest.raises(AccelsimError, match=words):
        _run(**knobs)


def test_federated_knobs_need_the_mode():
    with pytest.raises(AccelsimError, match="applies to mode federated"):
        make_config(MODEL, HW, population=5)


def test_text_fits_a_terminal():
    from accelsim.results.render import render

    text = render(_run(population=4, client_spread=0.3, deadline_s=30))
    assert text.splitlines()[1].lstrip().startswith("round")
    assert max(len(line) for line in text.splitlines()) <= 100
