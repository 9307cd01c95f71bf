"""Physics as a check: the invariants of `accelsim.devices.invariants` hold over every built-in
profile x zoo workload x accepted precision, inference and training; the physics fixes of the
issue "Bad input never crashes, hangs or answers nonsense" (each test below failed before its
fix); and a deliberately broken model is reported as a bug with its inputs."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from accelsim.cli import main
from accelsim.devices import invariants, registry
from accelsim.devices.estimate import estimate, figures, summary
from accelsim.devices.invariants import InvariantError, check_graph, check_serving
from accelsim.devices.precision import cannot_train
from accelsim.errors import AccelsimError, ConfigError, PrecisionError, ShapeError
from accelsim.formats import FORMATS
from accelsim.profiles.devices import builtin_profile_names, load_profile
from accelsim.sim.serve import ServeConfig, simulate_serving
from accelsim.workload.tables import counts_table
from accelsim.workload.zoo import build_model, model_names

# Small inputs where a model takes them, so the whole grid stays fast (each knob is one the
# model's published shape rules accept: image 64 keeps every strided map >= its stride).
SMALL = {"image_size": 64, "seq_len": 64, "volume_size": 32}
BATCHES = (1, 4)
FRAMEWORK_CLASSES = ("gpu", "cpu")  # the classes whose cost depends on `software`
# Models whose shape rules need more than 64 pixels: VGG's 7x7 classifier input, Inception
# v3 and v4's unpadded stride-2 convs, SSD's (and MobileDet's) four extra stride-2 layers
# after stride 32.
FULL_IMAGE = ("vgg16", "vgg19", "inception_v3", "inception_v4", "ssd_mobilenet_v2",
              "ssdlite_mobiledet_edgetpu")
# Deeper copies of a family already in the grid (same op kinds and block shapes): left out to
# keep the grid a few seconds per profile.
DEEPER_COPIES = ("resnet101", "resnet152", "vgg19", "inception_v4", "mobilenet_v4_conv_medium",
                 "mobilenet_v4_conv_large")


def small_graph(name: str):  # noqa: ANN201 - a Graph
    from accelsim.workload.zoo import model_knobs

    knobs = {k: v for k, v in SMALL.items() if k in model_knobs(name)}
    if name in FULL_IMAGE:
        knobs.pop("image_size")
    return build_model(name, **knobs)


GRAPHS = {name: small_graph(name) for name in model_names() if name not in DEEPER_COPIES}


@pytest.mark.slow
@pytest.mark.parametrize("device", builtin_profile_names())
def test_invariants_hold_over_every_workload_precision_and_mode(device: str) -> None:
    """estimate() checks every invariant on every result: a violation raises InvariantError.
    A PrecisionError means the device does not accept the format; an inference-only device
    refuses training (AccelsimError); nothing else may fail."""
    profile = load_profile(device)
    softwares = ("eager", "compiled") if profile.device_class in FRAMEWORK_CLASSES else ("eager",)
    # Every workload x precision x mode runs; batch and software take turns over that grid
    # (offset per device), so the suite covers every combination without running each on all
    # ~40 profiles (NB: keeps this test a few seconds per profile).
    combos = [(b, s) for b in BATCHES for s in softwares]
    turn = builtin_profile_names().index(device)
    ran = 0
    for graph in GRAPHS.values():
        for precision in FORMATS:
            for mode in ("infer", "train"):
                if mode == "train" and cannot_train(profile):
                    with pytest.raises(AccelsimError, match="inference-only"):
                        estimate(graph, profile, 1, precision, mode)
                    continue
                batch, software = combos[turn % len(combos)]
                turn += 1
                try:
                    est = estimate(graph, profile, batch, precision, mode, software)
                except PrecisionError:
                    continue
                assert est.device_power_w <= profile.power.tdp_w * (1 + 1e-9)
                ran += 1
    assert ran > 0


def test_runs_check_their_own_invariants() -> None:
    """Training and serving finish with their run-level checks (samples and requests
    conserved, time order, energy parts, power) on real devices."""
    res = simulate_serving(ServeConfig("resnet18", device="edge-tpu", precision="int8",
                                       rate_per_s=200.0, max_batch=4, max_wait_s=0.002,
                                       requests=300, seed=3))
    assert res.requests_served == 300
    with pytest.raises(InvariantError, match="requests conserved.*device=edge-tpu"):
        check_serving(dataclasses.replace(res, requests_served=299), 300, 0.94,
                      {"device": "edge-tpu"})
    with pytest.raises(InvariantError, match="power"):
        check_serving(dataclasses.replace(res, average_power_w=1e6), 300, 0.94,
                      {"device": "edge-tpu"})


# ---- the physics fixes -------------------------------------------------------------------


def with_power(name: str, **power: float):  # noqa: ANN201 - a DeviceProfile
    p = load_profile(name)
    return dataclasses.replace(p, power=dataclasses.replace(p.power, **power))


@pytest.mark.parametrize("tdp_w", [1e-3, 1e-9])
def test_a_tiny_tdp_throttles_the_device(tdp_w: float) -> None:
    """Energy per operation cannot shrink with the TDP without limit: an A100 held to 1 mW
    (or, built in Python, 1 nW) is power bound, not running at full speed on impossibly cheap
    MACs. Independent bound: a ResNet-50 sample is 4.1e9 MACs, at least 2 pJ (45 nm fp16 MAC)
    x (3/45) x (0.7/0.9)^2 (CV^2 scaling to 3 nm at 0.7 V) each."""
    graph = build_model("resnet50")
    stock = estimate(graph, load_profile("a100"), 1, "fp16")
    tiny = estimate(graph, with_power("a100", tdp_w=tdp_w), 1, "fp16")
    least_j_per_sample = 4.1e9 * 2e-12 * (3 / 45) * (0.7 / 0.9) ** 2
    assert tiny.throughput_samples_per_s <= tdp_w / least_j_per_sample
    assert tiny.throughput_samples_per_s < stock.throughput_samples_per_s / 100
    assert tiny.bottleneck == "power"
    assert tiny.device_power_w <= tdp_w * (1 + 1e-9)


@pytest.mark.parametrize("field", ["idle_w", "measured_min_w"])
def test_static_power_at_or_above_tdp_is_an_impossible_device(field: str) -> None:
    profile = with_power("a100", **{field: 400.0})
    with pytest.raises(ConfigError, match=f"power.{field}.*below tdp_w = 400 W"):
        estimate(build_model("mlp"), profile, 1, "fp16")


def kernels(layers: pd.DataFrame) -> pd.DataFrame:
    """FLOPs and time per kernel, each fused row folded into the unfused kernel before it in
    the forward phase (written here, apart from the model's own grouping)."""
    root, roots = -1, []
    for i, unit in enumerate(layers["unit"]):
        root = root if unit == "fused" and root >= 0 else i
        roots.append(root)
    return layers.assign(kernel=roots).groupby("kernel")[["flops", "time_s"]].sum()


@pytest.mark.parametrize("device", ["edge-tpu", "ascend-310", "orin-dla", "jetson-orin"])
def test_npu_fused_rows_run_within_their_producer(device: str) -> None:
    """On an NPU's MAC-array path a fused BN / activation drains through the post-processing
    unit during its producer's time: it adds no compute or power time of its own (it used to
    be throttled on its own, at the TDP, after the producer; only a residual input it reads
    from DRAM takes time) and no kernel exceeds the published peak."""
    profile = load_profile(device)
    layers = estimate(build_model("resnet50"), profile, 8, "int8").layers
    fused = layers[layers["unit"] == "fused"]
    assert len(fused) > 50 and (fused["bound"] != "power").all()
    assert (fused["compute_s"] == 0).all() and (fused["overhead_s"] == 0).all()
    assert (fused["time_s"] == fused["memory_s"]).all()
    k = kernels(layers)
    peak = profile.peak_flops_per_s("int8")
    assert (k["flops"] / k["time_s"] <= peak * (1 + 1e-9)).all()


def test_npu_fused_work_on_the_vector_path_costs_time() -> None:
    """The Orin runs fp32 on its CUDA cores (its profile has no fp32 matrix peak): fused work
    shares that unit, so no kernel exceeds its fp32 peak (one did, by 0.6%)."""
    profile = load_profile("jetson-orin")
    layers = estimate(build_model("resnet50"), profile, 32, "fp32").layers
    k = kernels(layers)
    assert (k["flops"] / k["time_s"] <= profile.compute.vector_peak_flops_per_s["fp32"]).all()


def test_host_fallback_power_is_reported_apart_from_the_device() -> None:
    """UNet-3D on the Edge TPU runs most of its layers on the host CPU: the host's energy is
    the host's, and only the device's part is held to the 2 W TDP."""
    graph = build_model("unet3d", volume_size=64)
    est = estimate(graph, load_profile("edge-tpu"), 2, "int8")
    rec = figures(est).place(summary(est, graph))  # as the engine places them
    host_rows = est.layers[est.layers["unit"] == "host"]
    assert len(host_rows) > len(est.layers) / 2
    assert rec["average_power_w"] > 2.0 >= rec["device_power_w"]
    assert rec["host_power_w"] > rec["device_power_w"]
    assert rec["device_power_w"] + rec["host_power_w"] == pytest.approx(rec["average_power_w"])
    assert rec["device_energy_j_per_sample"] + rec["host_energy_j_per_sample"] == \
        pytest.approx(rec["energy_j_per_sample"])
    # the host part is at most what the host rows cost, and more than their link transfers
    host_j = float(host_rows["energy_j"].sum())
    assert 0.9 * host_j < est.host_energy_j <= host_j
    assert all(r["cycles"] is None for r in rec["layers"] if r["unit"] == "host")  # valid JSON


def test_nothing_fuses_into_a_row_the_host_runs() -> None:
    """BERT on the Edge TPU runs its layer norms on the host CPU: the elementwise op after
    one runs on the NPU as its own kernel (it used to be fused, free, into the host's op)."""
    layers = estimate(build_model("bert_base", seq_len=64), load_profile("edge-tpu"), 1,
                      "int8").layers
    units = layers["unit"].tolist()
    producers = [next(u for u in reversed(units[:i]) if u != "fused")
                 for i, u in enumerate(units) if u == "fused"]
    assert "host" in units and producers and "host" not in producers


@pytest.mark.parametrize("device", ["tpu-v1", "edge-tpu", "orin-dla"])
def test_inference_only_devices_refuse_training(device: str) -> None:
    with pytest.raises(AccelsimError, match=f"{device} is an inference-only device"):
        estimate(build_model("resnet18"), load_profile(device), 2, "int8", "train")


def test_the_inference_only_attribute_decides_where_a_profile_has_one() -> None:
    trains = load_profile("a100")
    assert cannot_train(trains) is None and cannot_train(load_profile("alveo-u250")) is None
    assert "inference-only" in cannot_train(load_profile("tpu-v1"))

    class Marked:  # a profile of a schema with the field (see the module docstring)
        name, inference_only = "ascend-310", True

    assert "its profile says inference_only" in cannot_train(Marked())
    Marked.inference_only = False
    assert cannot_train(Marked()) is None


def test_cli_refuses_training_on_tpu_v1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "resnet50-train", "--hw", "tpu-v1", "--precision", "int8"]) == 2
    assert "inference-only" in capsys.readouterr().err


@pytest.mark.parametrize("size", [1, 8, 16])
def test_an_image_smaller_than_the_networks_downsampling_is_refused(size: int) -> None:
    """ResNet-50 halves its map five times (224 -> 7): at 16 the last stride-2 conv meets a
    1x1 map, below that earlier ones do. The shape rules name the op and its input shape."""
    with pytest.raises(ShapeError, match=r"op '[\w.]+' \((conv2d|maxpool2d)\) with input "
                                         r"shapes \[\(\d+, 1, 1\)\]: stride 2"):
        build_model("resnet50", image_size=size)
    assert build_model("resnet50", image_size=17).shapes["fc"] == (1000,)


def test_cli_refuses_resnet50_at_image_size_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "resnet50", "--hw", "a100", "--image-size", "1"]) == 2
    assert "op 'conv1' (conv2d) with input shapes [(3, 1, 1)]" in capsys.readouterr().err


# ---- a broken model is a bug report ------------------------------------------------------


def sabotage(kind: str):  # noqa: ANN201 - a ClassModel
    real = registry.get("gpu").model

    def broken(profile, work, gemms, precision, software):  # noqa: ANN001, ANN202
        costs = real(profile, work, gemms, precision, software).to_frame()
        big = int(np.argmax(np.asarray(work["flops"])))
        if kind == "peak":  # the largest layer 100x faster (and as frugal) than possible
            for col in ("compute_s", "memory_s", "overhead_s", "dynamic_energy_j"):
                costs.iloc[big, costs.columns.get_loc(col)] /= 100
        elif kind == "power":  # energy that escapes the power cap
            costs["power_capped"] = False
            costs.iloc[big, costs.columns.get_loc("dynamic_energy_j")] *= 1e4
        elif kind == "bytes":  # a layer that forgets its weights
            costs.iloc[big, costs.columns.get_loc("dram_bytes")] = 0.0
        else:  # a negative energy
            costs.iloc[big, costs.columns.get_loc("dynamic_energy_j")] = -1.0
        return costs

    return broken


def broken_gpu(kind: str) -> registry.DeviceClass:
    """The GPU class with its cost model sabotaged."""
    return dataclasses.replace(registry.get("gpu"), model=sabotage(kind))


@pytest.mark.parametrize(("kind", "check"), [
    ("peak", "peak"), ("power", "power within TDP"), ("bytes", "bytes conserved"),
    ("negative", "finite and non-negative"),
])
def test_a_broken_model_raises_an_invariant_error_with_its_inputs(
        monkeypatch: pytest.MonkeyPatch, kind: str, check: str) -> None:
    monkeypatch.setitem(registry.CLASSES, "gpu", broken_gpu(kind))
    with pytest.raises(InvariantError) as err:
        estimate(build_model("resnet18"), load_profile("a100"), 4, "fp16", "infer", "compiled")
    message = str(err.value)
    assert not isinstance(err.value, AccelsimError)
    assert f"invariant '{check}' violated" in message
    for needle in ("device=a100", "workload=resnet18", "batch=4", "precision=fp16",
                   "mode=infer", "software=compiled", "'conv1' (conv2d, forward"):
        assert needle in message


def test_the_cli_reports_a_violation_as_an_internal_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(registry.CLASSES, "gpu", broken_gpu("peak"))
    monkeypatch.delenv("ACCELSIM_DEBUG", raising=False)
    assert main(["simulate", "resnet18", "--hw", "a100", "--precision", "fp16",
                 "--batch", "64"]) == 70
    err = capsys.readouterr().err
    assert "internal error" in err and "InvariantError" in err and "device=a100" in err


def test_counts_that_lose_bytes_are_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = build_model("mlp", hidden=64)  # a fresh graph: check_graph caches by graph
    lossy = counts_table(graph).copy()
    lossy.loc[1, "read_elems"] -= 1
    monkeypatch.setattr(invariants, "counts_table", lambda g: lossy)
    with pytest.raises(InvariantError, match="bytes conserved.*device=a100, workload=mlp"):
        estimate(graph, load_profile("a100"), 2, "fp16")
    with pytest.raises(InvariantError, match=r"op 'fc1.linear' \(linear\) reads"):
        check_graph(graph)


def test_unit_peaks_are_the_published_ones() -> None:
    a100, tpu = load_profile("a100"), load_profile("tpu-v3")
    assert invariants.unit_peaks(a100, "fp16") == (312e12, 19.5e12)
    # One bf16 pass, at the rate the systolic model times GEMMs from: 2 FLOPs x 128 x 128 MACs
    # x 4 arrays x 940 MHz = 123.2 TFLOP/s, the published 123 rounded.
    c = tpu.compute
    assert (c.mxu_rows, c.mxu_cols, c.mxu_count, c.clock_hz) == (128, 128, 4, 940e6)
    assert invariants.unit_peaks(tpu, "fp32")[0] == pytest.approx(2 * 128 * 128 * 4 * 940e6)
    assert invariants.unit_peaks(tpu, "fp32")[0] == pytest.approx(
        tpu.peak_flops_per_s("bf16"), rel=0.01)
    assert invariants.unit_peaks(load_profile("edge-tpu"), "int8")[0] == pytest.approx(4e12)
    assert math.isinf(invariants.unit_peaks(type("Null", (), {"device_class": "null"})(),
                                            "fp32")[0])


def test_tpu_runs_at_its_geometry_rate_within_the_check() -> None:
    """Found by the fuzzer: the systolic model computes at 2 x rows x cols x arrays x clock
    (123.2 TFLOP/s on a TPU v3), a hair above the listed 123, which the peak check once
    reported as a bug at large batches."""
    est = estimate(build_model("resnet50"), load_profile("tpu-v3"), 512, "bf16")
    assert est.step_time_s > 0


def test_a_slow_post_processing_unit_charges_the_fused_work_it_cannot_hide(tmp_path) -> None:
    """Found by the fuzzer: with a vector rate far below the fused work of a kernel, fused
    rows cost the time the drain needs beyond the producer's, instead of exceeding the unit's
    peak at zero time."""
    text = (Path(load_profile("orin-dla").source_path).read_text()
            .replace("peak_tops_int8_dense = 26.25", "peak_tops_int8_dense = 0.001"))
    path = tmp_path / "slow-dla.toml"
    path.write_text(text)
    slow = load_profile(path)
    layers = estimate(build_model("gpt2", seq_len=64), slow, 1, "int8").layers
    fused = layers[layers["unit"] == "fused"]
    assert (fused["compute_s"] > 0).any()
    # The fused FLOPs take at least their time at the vector rate (a lower bound on the run).
    _, vector_peak = invariants.unit_peaks(slow, "int8")
    assert layers["time_s"].sum() >= fused["flops"].sum() / vector_peak * (1 - 1e-9)
