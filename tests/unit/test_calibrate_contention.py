"""Issue 27, item 2: a busy host is noticed, from injected timings (a pure function), and
calibrate says so, switches to CPU time on one thread or refuses, and writes the load."""

import pytest

from accelsim.calibrate.contention import (
    BUSY_BLAS_SCALING,
    assess_load,
    blas_scaling,
    spread,
)
from accelsim.errors import AccelsimError


def test_spread_and_blas_scaling_are_their_formulas():
    assert spread([2.0, 3.0, 2.5]) == pytest.approx(0.5)
    assert spread([1.0]) == 0.0
    # 2 threads at 110 GFLOP/s against one at 100: 55% a thread
    assert blas_scaling({"numpy_1_thread": 100e9, "numpy_2_threads": 110e9}, 2) == \
        pytest.approx(0.55)
    assert blas_scaling({"numpy_1_thread": 100e9}, 2) is None
    assert blas_scaling({"numpy_1_thread": 1e9, "numpy_1_threads": 1e9}, 1) is None


def test_an_idle_host_is_idle():
    # as measured on an idle 2-vCPU VM: load 0.1, 2 threads at 1.9x one, cases at 98% of a
    # core, repeats within 3%
    load = assess_load(2, 0.1, {"numpy_1_thread": 100e9, "numpy_2_threads": 190e9},
                       [0.98, 0.99, 0.97], [0.01, 0.03, 0.02, 0.05])
    assert not load.busy and load.reasons == ()
    assert load.text().startswith("idle host (load 0.10; BLAS scaling 95%")
    assert load.spread_worst == pytest.approx(0.05)


@pytest.mark.parametrize("signal,reason", [
    ({"load_1m": 1.5}, "load average 1.50 on 2 CPUs"),
    # issue 27: one other process on one of two cores, numpy's 2-thread GEMM 10x slower
    ({"blas_rates": {"numpy_1_thread": 100e9, "numpy_2_threads": 20e9}}, "ran at 10% of"),
    ({"cpu_over_wall": [0.5, 0.6, 0.55]}, "got 55% of a core"),
    ({"spreads": [0.4, 0.02, 0.3]}, "differ by 30% (median)"),
])
def test_each_signal_alone_makes_a_host_busy(signal, reason):
    load = assess_load(2, **signal)
    assert load.busy and len(load.reasons) == 1 and reason in load.reasons[0]
    assert load.text().startswith("busy host (") and reason in load.text()


def test_thresholds_are_exclusive_at_their_edges():
    edge = {"numpy_1_thread": 100e9, "numpy_2_threads": 200e9 * BUSY_BLAS_SCALING}
    assert not assess_load(2, 1.0, edge, [0.85], [0.15]).busy


def test_calibrate_refuses_or_switches_on_a_busy_host(tmp_path, monkeypatch):
    from accelsim.calibrate import run
    from accelsim.calibrate.peak import blas_thread_setter

    monkeypatch.setattr(run, "load_average_1m", lambda: 7.0)  # a busy host, injected
    with pytest.raises(AccelsimError, match=r"busy host \(load average 7.00 .*refused"):
        run.calibrate(tmp_path / "a", budget="tiny", progress=False, torch=False,
                      on_busy="refuse")
    result = run.calibrate(tmp_path / "b", budget="tiny", progress=False, torch=False)
    s = result.summary
    assert s["switched_to_cpu_time"] and s["clock"] == "timed by process CPU time"
    assert s["host_load_before"]["busy"] and s["host_load_before"]["load_1m"] == 7.0
    if blas_thread_setter() is not None:
        assert s["blas_threads"] == 1
    stack = (tmp_path / "b" / "numpy-host.toml").read_text()
    assert "thread(s)" in stack and "timed by process CPU time" in stack
    assert "cases' fit error min" in stack  # each fitted figure's spread (item 3, part)
    cpu = (tmp_path / "b" / "host-cpu.toml").read_text()
    assert "busy host (load average 7.00" in cpu
    kept = run.calibrate(tmp_path / "c", budget="tiny", progress=False, torch=False,
                         on_busy="wall")
    assert not kept.summary["switched_to_cpu_time"]
    assert kept.summary["clock"] == "timed by wall time"
    with pytest.raises(AccelsimError, match="--on-busy 'maybe'"):
        run.calibrate(tmp_path / "d", budget="tiny", on_busy="maybe")


def test_describe_time_by_cpu_time_runs_numpy_blas_on_one_thread(monkeypatch):
    from accelsim.calibrate import timing
    from accelsim.calibrate.peak import blas_thread_setter, blas_threads
    from accelsim.workload.zoo import build_model

    if blas_thread_setter() is None:
        pytest.skip("numpy's BLAS thread count cannot be set here")
    seen = []

    def fake(graph, batch, precision, repeats, clock):
        seen.append(blas_threads())
        return {op.name: 1e-3 for op in graph.ops}

    monkeypatch.setattr(timing, "time_graph", fake)
    before = blas_threads()
    timing.measure_beside_prediction(build_model("gemm", m=4, n=4, k=4), 1, "fp32",
                                     cpu_time=True)
    timing.measure_beside_prediction(build_model("gemm", m=4, n=4, k=4), 1, "fp32")
    assert seen == [1, before] and blas_threads() == before
