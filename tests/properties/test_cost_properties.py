"""Class-model properties (hypothesis): a GPU's and a CPU's per-layer costs are non-negative
and a step's time and energy never fall as the batch grows (the closed forms of each class:
unit/test_gpu_cpu_models.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.devices import cpu, gpu  # noqa: F401 - registers the class models
from accelsim.devices.estimate import estimate
from accelsim.profiles.devices import load_profile
from accelsim.workload.zoo import build_model


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 96), extra=st.integers(1, 64),
       device=st.sampled_from(["v100", "a100", "xeon-8480", "epyc-7763"]),
       software=st.sampled_from(["eager", "compiled"]), mode=st.sampled_from(["infer", "train"]))
def test_costs_non_negative_and_grow_with_batch(batch: int, extra: int, device: str,
                                                software: str, mode: str) -> None:
    graph = build_model("resnet18")
    precision = "fp32" if device == "epyc-7763" else "bf16" if device != "v100" else "fp16"
    small = estimate(graph, load_profile(device), batch, precision, mode, software)
    large = estimate(graph, load_profile(device), batch + extra, precision, mode, software)
    cols = ["compute_s", "memory_s", "overhead_s", "dynamic_energy_j", "dram_bytes",
            "onchip_bytes", "time_s", "energy_j"]
    assert (small.layers[cols].to_numpy() >= 0).all()
    assert large.step_time_s >= small.step_time_s * (1 - 1e-12)
    assert large.energy_j >= small.energy_j * (1 - 1e-12)
