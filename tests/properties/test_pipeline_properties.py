"""Pipeline and collective properties (hypothesis): the read plan reads every sample once and
conserves bytes; the ring all-reduce is its alpha-beta closed form; contention slows compute by
the share of its overlap with a collective; a decoder's gradient exchange conserves bytes and
overlapping it never ends later (the closed forms around them: null_device/test_pipeline_train.py,
null_device/test_collectives_ddp.py, validation/test_llm_train.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.interconnect.buckets import advance
from accelsim.interconnect.collectives import ring_allreduce_time_s
from accelsim.profiles.datasets import load_dataset
from accelsim.profiles.systems import load_system
from accelsim.sim.readplan import read_plan, sample_file_sizes_bytes

SYSTEM = load_system("dgx-a100")  # as validation/test_llm_train.py's


@settings(max_examples=60, deadline=None)
@given(samples=st.integers(1, 3000), per_file=st.integers(1, 300), devices=st.integers(1, 8),
       batch=st.integers(1, 64), threads=st.integers(1, 16), seed=st.integers(0, 9))
def test_read_plan_property_every_sample_once_bytes_conserved(
        samples: int, per_file: int, devices: int, batch: int, threads: int, seed: int) -> None:
    files = math.ceil(samples / per_file)
    ds = replace(load_dataset("imagenet-raw"), sample_count=samples, file_count=files,
                 samples_per_file=per_file)
    plan = read_plan(ds, devices, batch, threads, steps=None, epochs=1, seed=seed)
    assert plan.samples.sum() == samples and (plan.samples >= 0).all()
    assert (plan.batch_samples()[:-1] == batch).all()
    assert ((plan.requests > 0) == (plan.samples > 0)).all()
    again = read_plan(ds, devices, batch, threads, steps=None, epochs=1, seed=seed)
    assert plan.bytes.sum() == pytest.approx(again.bytes.sum())
    sizes = sample_file_sizes_bytes(ds, files, np.random.default_rng([seed, 0]))
    assert plan.bytes.sum() == pytest.approx(sizes.sum(), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 512), m=st.floats(1.0, 1e10), bw=st.floats(1e8, 1e12),
       lat=st.floats(0.0, 1e-4))
def test_ring_allreduce_closed_form(n: int, m: float, bw: float, lat: float) -> None:
    assert ring_allreduce_time_s(n, m, bw, lat) == pytest.approx(
        2 * (n - 1) / n * m / bw + 2 * (n - 1) * lat, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(work=st.floats(1e-3, 10.0), share=st.floats(0.0, 0.9), u=st.floats(0.0, 0.999),
       v=st.floats(0.0, 1.0))
def test_contention_slows_compute_by_the_share_of_the_overlap(work: float, share: float,
                                                             u: float, v: float) -> None:
    """Compute of `work` s from t = 0 at 1 - share while a collective runs on [a, a + w]."""
    a = u * work
    w = v * (work - a)  # inside the compute: it ends share x w late
    assert advance([0.0, 0.0, 0], work, [(a, a + w)], share) == pytest.approx(
        work + share * w, rel=1e-9, abs=1e-12)
    # a collective running past the end: the rest of the work at 1 - share
    assert advance([0.0, 0.0, 0], work, [(a, a + 100 * work)], share) == pytest.approx(
        a + (work - a) / (1 - share), rel=1e-9, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(1e-4, 1e-2), min_size=1, max_size=12),
       st.lists(st.floats(1e5, 3e8), min_size=1, max_size=12), st.floats(1e5, 5e8),
       st.sampled_from([0, 2]))
def test_the_exchange_conserves_bytes_and_overlap_never_ends_later(seg_s, seg_bytes, bucket,
                                                                   zero):
    from accelsim.interconnect.multinode import fabric
    from accelsim.llm.dp_events import DpPlan, dp_exchange

    n = min(len(seg_s), len(seg_bytes))
    seg_s, seg_bytes = np.array(seg_s[:n]), np.array(seg_bytes[:n])
    fab = fabric(SYSTEM, 1, 8)
    runs = {o: dp_exchange(fab, DpPlan(zero, o, bucket), seg_s, seg_bytes, 0.0, 1e-3,
                           float(seg_bytes.sum()) if zero else 0.0) for o in (False, True)}
    total = float(seg_bytes.sum())
    for ex in runs.values():
        wire = ex.records.loc[ex.records["resource"] == "d2d", "bytes"].sum()
        assert wire == pytest.approx(2 * 7 * total)  # ring: 2 (n-1) M in all, either way
        busy = ex.records.loc[ex.records["resource"] == "d2d", "duration_s"].sum()
        assert ex.end_s >= max(seg_s.sum(), busy) + 1e-3 - 1e-12
    # no contention: overlapping only helps, but for each extra bucket's latency (2 (n-1) L)
    extra_s = (runs[True].collectives - runs[False].collectives) * 2 * 7 * \
        SYSTEM.device_to_device.latency_s
    assert runs[True].end_s <= runs[False].end_s + extra_s + 1e-12
