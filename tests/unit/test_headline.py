"""The headline record (`accelsim.results.headline`): one set of figures per run, placed once,
read back the same by every renderer, and consistent with the closed forms that define it
(throughput x latency = batch, power x time = energy)."""

from __future__ import annotations

import json

import pytest

from accelsim.results.headline import (
    RATE_KEYS,
    SPLIT_KEYS,
    Figures,
    Headline,
    PowerSplit,
    reserve,
)
from accelsim.results.render import summary_lines
from accelsim.results.summary import flat_row
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

RUNS = {
    "infer": ("resnet18", "a100", {"batch": 8}),
    "infer-npu": ("mobilenet_v2", "coral-usb", {"precision": "int8"}),
    "train": ("resnet18", "dgx-a100", {"mode": "train", "steps": 3, "devices": 2}),
    "serve": ("resnet18", "t4", {"mode": "serve", "rate": 200.0, "requests": 200,
                                 "max_batch": 8}),
    "llm-infer": ("llama2_7b", "a100", {"prompt_tokens": 128, "output_tokens": 16,
                                        "batch": 2}),
    "llm-serve": ("llama2_7b", "a100", {"mode": "serve", "rate": 2.0, "requests": 40,
                                        "prompt_tokens": 128, "output_tokens": 16}),
    "llm-train": ("llama2_7b", "dgx-a100", {"mode": "train", "seq_len": 512, "tp": 8}),
    "does-not-fit": ("resnet50", "t4", {"batch": 8192}),
    "train-does-not-fit": ("resnet50", "dgx-a100", {"batch": 8192, "mode": "train",
                                                    "steps": 2}),
    "llm-does-not-fit": ("llama2_70b", "t4", {"prompt_tokens": 128, "output_tokens": 16}),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request: pytest.FixtureRequest) -> tuple[str, dict]:
    workload, hw, knobs = RUNS[request.param]
    return request.param, run_simulation(make_config(workload, hw, **knobs)).record


def test_headline_survives_json(run: tuple[str, dict]) -> None:
    """A record written as JSON and read back gives the same headline: the report and the
    summary can be rendered from a saved run."""
    _, record = run
    assert Headline.of(json.loads(json.dumps(record))) == Headline.of(record)


def test_flat_row_is_the_headline(run: tuple[str, dict]) -> None:
    _, record = run
    head, row = Headline.of(record), flat_row(record)
    fig = head.figures
    for key in RATE_KEYS + ("bottleneck", "bottleneck_detail"):
        assert row[key] == getattr(fig, key)
    assert row["fits"] == head.memory.fits
    assert row["required_bytes"] == head.memory.required_bytes
    if head.tokens is not None:
        assert row["tokens_per_s"] == head.tokens.tokens_per_s


def test_figures_obey_their_definitions(run: tuple[str, dict]) -> None:
    """Throughput, latency, energy and power from independent parts of the record."""
    name, record = run
    fig = Headline.of(record).figures
    if not record["memory"]["fits"]:
        assert fig.bottleneck == "memory capacity"
        assert all(getattr(fig, k) is None for k in RATE_KEYS)
        assert summary_lines(record)[0].startswith("DOES NOT FIT")
        return
    batch = record["workload"]["batch_size"]
    if name in ("infer", "infer-npu", "llm-infer"):
        # one batch: samples per second is batch over latency; energy is power x time
        assert fig.throughput_samples_per_s == pytest.approx(batch / fig.latency_s, rel=1e-12)
        assert fig.energy_j_per_sample * batch == pytest.approx(
            fig.average_power_w * fig.latency_s, rel=1e-12)
    if name == "train":
        total_j = record["energy_breakdown_j"]["total"]
        assert fig.latency_s == record["step_time_s"]
        assert fig.energy_j_per_sample * record["samples"] == pytest.approx(total_j, rel=1e-12)
        assert fig.average_power_w * record["run_time_s"] == pytest.approx(total_j, rel=1e-12)
        assert record["device_only"]["latency_s"] < fig.latency_s * record["steps"]
    if name in ("serve", "llm-serve"):
        assert fig.latency_s == record["latency_mean_s"]
        assert Headline.of(record).serving.latency_p50_s <= record["latency_p99_s"]
    if name == "llm-train":
        seq = record["workload"]["seq_len"]
        assert fig.throughput_samples_per_s * seq == pytest.approx(record["tokens_per_s"])
    # the summary text shows the figure the record holds
    assert f"{fig.throughput_samples_per_s:,.1f} samples/s" in "\n".join(summary_lines(record))


def test_split_only_where_one_device_runs_one_batch(run: tuple[str, dict]) -> None:
    """Device and host apart on a device-level run only; a pipeline or server reports the
    device's one-batch figures under `device_only` instead."""
    name, record = run
    split = Headline.of(record).figures.split
    if name in ("infer", "infer-npu"):
        assert split.device_power_w + split.host_power_w == pytest.approx(
            record["average_power_w"], rel=1e-12)
    elif name in ("train", "serve"):
        assert split is None and set(SPLIT_KEYS) <= set(record["device_only"])


def test_place_keeps_the_layout() -> None:
    """A reserved key keeps its place, a new one follows, the split keys go when there is no
    split."""
    record = {"workload": {}, **reserve(with_split=True), "bottleneck": None, "memory": {}}
    Figures(2.0, 0.5, 3.0, 12.0, "compute", "why").place(record)
    assert list(record) == ["workload", *RATE_KEYS, "bottleneck", "memory",
                            "bottleneck_detail"]
    assert record["latency_s"] == 0.5 and record["bottleneck_detail"] == "why"
    split = PowerSplit(1.0, 11.0, 0.25, 2.75)
    Figures(2.0, 0.5, 3.0, 12.0, "compute", "why", split).place(record)
    assert [record[k] for k in SPLIT_KEYS] == [1.0, 11.0, 0.25, 2.75]
    assert Figures(2.0, 0.5, 3.0, 12.0, "compute", None).samples_per_j == pytest.approx(2 / 12)
    assert Figures(None, None, None, None, "memory capacity", None).samples_per_j is None


def test_durations_read_in_the_unit_of_their_magnitude():
    """Issue 23: '14821.993 ms' reads as '14.822 s', an overloaded server's TTFT in minutes or
    hours; below a second, milliseconds at the caller's decimals as before."""
    from accelsim.results.render import duration_text

    assert duration_text(0.0541) == "54.100 ms"
    assert duration_text(0.0049, 1) == "4.9 ms"
    assert duration_text(14.821993) == "14.822 s"
    assert duration_text(3476.1025) == "57.94 min"
    assert duration_text(7200.0) == "2.00 h"
