"""Tensor-parallel collectives as SimPy events (accelsim.llm.tp_events) against the closed forms
of a stage's timeline, and the step model that uses them."""

import pytest

from accelsim.errors import AccelsimError
from accelsim.interconnect.nccl import collective_time_s
from accelsim.llm.costs import Platform
from accelsim.llm.models import decoder
from accelsim.llm.parallel import layout
from accelsim.llm.steps import StepModel
from accelsim.llm.tp_events import ExposedCache, stage_events, stage_layers_s
from accelsim.profiles.devices import load_profile
from accelsim.profiles.systems import load_system

COMPUTE_S = [3e-4, 5e-4, 2e-4, 4e-4, 6e-4]
SHORT_AR_S = [1e-4, 0.5e-4, 1.5e-4, 0.9e-4, 2e-4]  # each shorter than the next layer's compute


def test_without_overlap_a_stage_is_its_compute_plus_its_all_reduces():
    t, n = stage_events(COMPUTE_S, SHORT_AR_S, 2, overlap=False)
    assert t == pytest.approx(sum(COMPUTE_S) + sum(SHORT_AR_S))
    assert n == 2 * len(COMPUTE_S)


def test_overlapped_all_reduces_shorter_than_the_next_compute_leave_only_the_last():
    t = stage_layers_s(COMPUTE_S, SHORT_AR_S, 2, overlap=True)
    assert t == pytest.approx(sum(COMPUTE_S) + SHORT_AR_S[-1])


def test_overlapped_all_reduces_longer_than_the_compute_queue_on_the_link():
    # the link carries one collective at a time: after the first compute it never idles
    c, a, layers = 1e-4, 3e-4, 6
    assert stage_layers_s([c] * layers, [a] * layers, 2, True) == pytest.approx(c + layers * a)


def test_one_gpu_has_no_collective_events():
    assert stage_events(COMPUTE_S, [0.0] * 5, 2, overlap=False) == (
        pytest.approx(sum(COMPUTE_S)), 0)
    cfg, system = decoder("llama2_7b"), load_system("dgx-a100")
    plat = Platform(cfg, load_profile("a100"), "compiled", "fp16", "fp16", 1)
    model = StepModel(plat, layout(cfg, system, 1, 1, overlap_tp=True))
    model.decode_table(8, 8 * 600).step_s(8, 8 * 600)
    model.prefill(4, 256)
    assert model.events.simulated == 0  # no stage was simulated: nothing to overlap


def test_a_step_hides_all_but_the_last_layers_all_reduces_behind_compute():
    cfg, system = decoder("llama2_13b"), load_system("dgx-a100")
    plat = Platform(cfg, load_profile("a100"), "compiled", "fp16", "fp16", 4)
    b, held = 32, 32 * 600
    serial = StepModel(plat, layout(cfg, system, 4, 1))
    hidden = StepModel(plat, layout(cfg, system, 4, 1, overlap_tp=True))
    ar_s = serial._comm_s(b)[0]  # the layer's two all-reduces
    assert ar_s == pytest.approx(2 * collective_time_s(
        "allreduce", "auto", 4, b * cfg.d_model * 2, system.device_to_device)[0])
    saved = serial.decode_table(b, held).step_s(b, held) - hidden.decode_table(
        b, held).step_s(b, held)
    assert saved == pytest.approx((cfg.n_layers - 1) * ar_s, rel=1e-9)
    assert hidden.events.simulated == 1  # one step, one bucket


def test_mismatched_layer_lists_are_one_line_errors():
    with pytest.raises(AccelsimError, match="one of each per layer"):
        stage_layers_s([1e-4, 1e-4], [1e-5], 2, False)
    with pytest.raises(AccelsimError, match=">= 0"):
        stage_layers_s([-1e-4], [1e-5], 2, False)


@pytest.mark.parametrize("overlap", [False, True])
def test_the_bucketed_cache_stays_within_one_percent_of_simulating_each_step(overlap):
    layers, a = 32, 2e-4
    cache = ExposedCache(layers, 2, overlap)
    for ratio in (0.3, 0.9, 0.99, 1.0, 1.01, 1.2, 3.0):  # compute / collectives, both regimes
        c = ratio * a
        exact = stage_layers_s([c] * layers, [a] * layers, 2, overlap)
        assert cache.layers_s(c, a) == pytest.approx(exact, rel=0.01)
