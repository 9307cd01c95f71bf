"""One output schema (issue 9 item 8): every record of a mode has the same keys whatever the
device class (GPU, TPU, NPU); training's `utilization` has every role (0 when idle) and its
AU is labelled apart; a single device has no all-reduce (null, never "over None"); an energy
part whose power is unknown is null with a note, never 0.
"""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.results.metrics import ROLES, STALL_NAMES
from accelsim.results.render import render
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

TRAIN = {"gpu, one device": ("resnet50-train", "a100", {}),
         "gpu, 2 devices": ("resnet50-train", "dgx-a100", {"devices": 2}),
         "tpu": ("resnet50-train", "tpu-v3-8", {"devices": 2, "batch": 32})}


def record(workload: str, hw: str, **knobs: Any) -> dict[str, Any]:
    return run_simulation(make_config(workload, hw, **knobs), detail=False).record


@pytest.fixture(scope="module")
def trained() -> dict[str, dict[str, Any]]:
    return {k: record(w, hw, steps=2, **kw) for k, (w, hw, kw) in TRAIN.items()}


def test_training_records_share_keys_roles_and_stall_names(trained: dict[str, Any]) -> None:
    keys = {name: set(r) for name, r in trained.items()}
    assert all(k == keys["gpu, one device"] for k in keys.values()), keys
    for r in trained.values():
        assert tuple(r["utilization"]) == ROLES
        assert set(r["stalls"]) == set(STALL_NAMES.values())
        assert r["utilization"]["host_cpu"] >= 0.0 and "accelerator_utilization" in r
    parts = {tuple(r["energy_breakdown_j"]) for r in trained.values()}
    assert len(parts) == 1


def test_one_device_has_no_allreduce(trained: dict[str, Any]) -> None:
    one = trained["gpu, one device"]
    assert one["devices"] == 1 and one["allreduce_algorithm"] is None
    assert one["comm_link"] is None and one["allreduce_buckets"] == 0
    text = render(one, layers=0)
    assert "none (one device)" in text and "None" not in text
    two = trained["gpu, 2 devices"]
    assert two["allreduce_algorithm"] in ("ring", "tree", "nvls") and two["comm_link"]


def test_unknown_energy_is_null_and_said(trained: dict[str, Any]) -> None:
    for r in trained.values():
        e = r["energy_breakdown_j"]
        unknown = [k for k, v in e.items() if v is None]
        for part in unknown:
            assert any(part in n and "unknown" in n for n in r["notes"]), (part, r["notes"])
        assert e["total"] == pytest.approx(sum(v for k, v in e.items()
                                               if k != "total" and v is not None))
    assert trained["tpu"]["energy_breakdown_j"]["storage"] is None  # object store: unpublished
    assert trained["gpu, 2 devices"]["energy_breakdown_j"]["storage"] > 0


@pytest.mark.parametrize(("mode", "knobs"), [("infer", {}),
                                             ("serve", {"rate": 50.0, "requests": 50})])
def test_inference_and_serving_share_keys_across_classes(mode: str,
                                                         knobs: dict[str, Any]) -> None:
    recs = [record("mobilenet_v2", hw, mode=mode, precision="int8", **knobs)
            for hw in ("a100", "tpu-v1", "edge-tpu")]
    assert set(recs[0]) == set(recs[1]) == set(recs[2])
    if mode == "serve":  # the training roles; the devices' share, the rest unknown (null)
        for r in recs:
            assert tuple(r["utilization"]) == ROLES and r["utilization"]["accelerators"] > 0
            assert r["utilization"]["host_cpu"] is None
            assert any("utilization of the other roles is unknown" in n for n in r["notes"])
