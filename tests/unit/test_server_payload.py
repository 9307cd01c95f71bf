"""A server stack's request payload (`[host] payload_gb_s`, triton): each batch's input bytes
cost host time at that rate, serial with the device, in closed form."""

from __future__ import annotations

import dataclasses

import pytest

from accelsim.devices.estimate import estimate
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import builtin_stacks
from accelsim.workload.zoo import build_model


def test_a_batch_pays_its_input_bytes_over_the_payload_rate() -> None:
    triton = builtin_stacks()["triton"]
    assert triton.payload_bytes_per_s  # the built-in server stack has one
    bare = dataclasses.replace(triton, payload_bytes_per_s=None)
    graph, a100 = build_model("resnet50"), load_profile("a100")
    batch = 32
    with_payload = estimate(graph, a100, batch, "fp16", "infer", triton)
    without = estimate(graph, a100, batch, "fp16", "infer", bare)
    input_bytes = 3 * 224 * 224 * 2  # one fp16 image
    expected_s = batch * input_bytes / triton.payload_bytes_per_s  # reference host: scale 1
    assert with_payload.step_time_s - without.step_time_s == pytest.approx(expected_s, rel=1e-6)


def test_a_stack_without_a_payload_rate_pays_nothing() -> None:
    eager = builtin_stacks()["pytorch-eager"]
    assert eager.payload_bytes_per_s is None and eager.host_payload_s(1e9) == 0.0
