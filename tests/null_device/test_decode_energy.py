"""Where decoding happens (--decode cpu|gpu|hw) and the energy of every part, against closed
forms: device time = samples / decode rate, serial with compute on the SMs and beside it on
the hardware decoder; E = count x (idle x run + (active - idle) x busy) per part.

Expected values come from the data files (rates, power figures) and the formulas, never from
recorded outputs. Runs use the null device named "a100" (so the A100's decoder profile
applies) on "infinitely fast" storage and links (tests/helpers/pipeline.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

from accelsim.devices.null import NullProfile
from accelsim.errors import AccelsimError
from accelsim.profiles.decoders import load_decoder
from accelsim.profiles.storage import load_storage
from accelsim.profiles.systems import load_system
from accelsim.sim.config import TrainConfig
from accelsim.sim.part_energy import busy_s
from accelsim.sim.run import TrainResult, simulate_training
from tests.helpers.pipeline import fast_system, scenario, shards

STEPS, BATCH = 6, 32
RATES = load_decoder("a100")


def run(decode: str | None, op_time_s: float = 1e-4, system: Any = None,
        **kw: Any) -> TrainResult:
    kw.setdefault("devices", 1)
    return simulate_training(TrainConfig(
        scenario(batch=BATCH, prefetch_batches=2), system or fast_system(),
        dataset=shards(prep_s=1e-3), device_profile=NullProfile(name="a100",
                                                                op_time_s=op_time_s),
        decode=decode, steps=STEPS, **kw))


def intervals(res: TrainResult, kind: str, resource: str = "accel0") -> pd.DataFrame:
    df = res.records
    return df[(df["kind"] == kind) & (df["resource"] == resource)].sort_values("start_s")


def test_gpu_decode_adds_device_time_equal_to_samples_times_cost() -> None:
    res = run("gpu")
    cost_s = 1.0 / RATES.sm_images_per_s
    dec = intervals(res, "decode")
    assert math.isclose(dec["duration_s"].sum(), STEPS * BATCH * cost_s, rel_tol=1e-9)
    # The SMs do one thing at a time: no decode overlaps a compute phase.
    busy = pd.concat([dec, intervals(res, "compute")]).sort_values("start_s")
    assert (busy["start_s"].to_numpy()[1:] >= busy["end_s"].to_numpy()[:-1] - 1e-12).all()
    # Compute-bound: from the first decode on, the device never idles, so the run is the
    # first batch's arrival plus, per step, its compute and its decode.
    closed = dec["start_s"].min() + STEPS * (res.compute_time_per_step_s + BATCH * cost_s)
    assert math.isclose(res.run_time_s, closed, rel_tol=1e-9)
    assert res.accelerator_utilization < 1.0 and res.utilization["host_cpu"] == 0.0


def test_hardware_decoder_overlaps_compute_and_bounds_a_fast_device() -> None:
    slow = run("hw", op_time_s=1e-2)  # compute far longer than a batch's decode
    first = intervals(slow, "decode", "jpeg0")["start_s"].min()
    assert math.isclose(slow.run_time_s, first + BATCH / RATES.hw_images_per_s
                        + STEPS * slow.compute_time_per_step_s, rel_tol=1e-9)
    fast = run("hw", op_time_s=1e-9)  # decode-bound: one batch per decode time
    dec = intervals(fast, "decode", "jpeg0")
    assert math.isclose(dec["end_s"].max() - dec["start_s"].min(),
                        STEPS * BATCH / RATES.hw_images_per_s, rel_tol=1e-9)
    assert fast.bottleneck == "prepare" and "decoding" in fast.bottleneck_detail
    assert fast.utilization["jpeg_decoder"] > 0.9
    assert fast.energy_breakdown_j["decode"] is None  # NVJPG power is not published
    assert any("hardware JPEG decoder" in n for n in fast.notes)


def test_device_decode_ships_compressed_bytes_and_cpu_decode_decoded_ones() -> None:
    ds = shards(prep_s=1e-3)
    h2d = {d: intervals(run(d), "h2d", "pcie")["bytes"].sum() for d in ("cpu", "gpu")}
    assert math.isclose(h2d["cpu"], STEPS * BATCH * ds.decoded_sample_bytes)
    assert math.isclose(h2d["gpu"], STEPS * BATCH * ds.stored_bytes_per_sample)


@pytest.mark.parametrize(("kw", "match"), [
    ({"decode": "cpu", "gpudirect": True}, "GPUDirect"),
    ({"decode": "fpga"}, "choose one of cpu, gpu, hw"),
])
def test_bad_decode_settings_are_one_line_errors(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(AccelsimError, match=match) as err:
        run(**kw)
    assert "\n" not in str(err.value)


def test_decode_needs_a_device_that_can() -> None:
    tpu = load_system("tpu-v3-8")
    sc = scenario("resnet50", batch=8)
    with pytest.raises(AccelsimError, match="cannot decode"):
        simulate_training(TrainConfig(sc, tpu, decode="gpu", steps=2))
    with pytest.raises(AccelsimError, match="no hardware JPEG decoder"):
        simulate_training(TrainConfig(sc, load_system("dgx-1"), decode="hw", steps=2,
                                      device_profile=NullProfile(name="v100")))


def draw_j(count: int, idle_w: float, active_w: float, run_s: float, busy_s: float) -> float:
    return count * (idle_w * run_s + (active_w - idle_w) * busy_s)


def test_storage_nic_and_switch_energy_follow_idle_plus_active_draw() -> None:
    dgx = load_system("dgx-a100")
    nvme = load_storage("nvme-gen4")
    # one all-reduce per step, as one message: the switches are busy steps x its time
    res = run("cpu", devices=8, overlap_allreduce=False, system=fast_system(storage=replace(
        nvme, read_bandwidth_bytes_per_s=1e9), storage_count=2))
    e, run_s = res.energy_breakdown_j, res.run_time_s
    # every sample's 1 MiB read once, at the two drives' striped bandwidth
    store_busy = STEPS * 8 * BATCH * 2**20 / (2 * 1e9)
    assert math.isclose(e["storage"], draw_j(2, nvme.idle_power_w, nvme.active_power_w, run_s,
                                             store_busy), rel_tol=1e-9)
    sw, comm = dgx.device_to_device, STEPS * res.allreduce_time_s
    assert math.isclose(e["switches"], draw_j(sw.switch_count, sw.idle_power_w,
                                              sw.active_power_w, run_s, comm), rel_tol=1e-9)
    assert e["nics"] == 0.0  # local storage, one node: the network is not used
    assert math.isclose(e["total"], sum(v for k, v in e.items() if k != "total"))


def _records(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["resource", "kind", "start_s", "end_s"])
    return df.assign(duration_s=df["end_s"] - df["start_s"])


def test_overlapping_records_are_busy_once() -> None:
    df = _records([("storage", "read", 0.0, 2.0), ("storage", "read", 1.0, 3.0),
                   ("storage", "read", 1.5, 1.5), ("storage", "read", 5.0, 6.0),
                   ("network", "read", 0.0, 9.0)])
    assert busy_s(df, "storage") == pytest.approx(2.0 + 1.0 + 1.0)  # [0, 3] and [5, 6]


def test_switches_idle_during_the_cross_node_phase_only() -> None:
    df = _records([("nvswitch", "allreduce", 0.0, 10.0), ("network", "allreduce", 2.0, 5.0),
                   ("network", "read", 6.0, 8.0), ("network", "allreduce", 9.0, 12.0)])
    # [0, 10] less the all-reduce phases on the NICs inside it, [2, 5] and [9, 10]
    assert busy_s(df, "nvswitch", idle_during="network") == pytest.approx(10.0 - 3.0 - 1.0)


def test_switches_idle_during_every_collective_kind_on_the_network() -> None:
    """ZeRO's reduce-scatter and all-gather phases (LLM training) idle the switches as an
    all-reduce's do."""
    df = _records([("nvswitch", "reducescatter", 0.0, 10.0),
                   ("network", "reducescatter", 1.0, 2.0), ("network", "allgather", 4.0, 7.0),
                   ("network", "alltoall", 8.0, 8.5)])
    assert busy_s(df, "nvswitch", idle_during="network") == pytest.approx(10.0 - 1.0 - 3.0 - 0.5)


def test_multinode_switch_energy_leaves_out_the_network_phase() -> None:
    dgx = load_system("dgx-a100")
    res = run("cpu", devices=8, nodes=2, system=fast_system(
        device_to_device=dgx.device_to_device, network=dgx.network, nic_count=dgx.nic_count))
    df, run_s, sw, net = res.records, res.run_time_s, dgx.device_to_device, dgx.network
    comm = df[df["kind"] == "allreduce"]
    on_net = comm[comm["resource"] == "network"]
    assert len(on_net) > 0
    # each bucket's cross-node phase lies inside its in-node record; buckets run one by one
    in_node = comm[comm["resource"] != "network"]["duration_s"].sum()
    busy = in_node - on_net["duration_s"].sum()
    # both nodes' switches
    expected = 2 * (dgx.nic_count * net.switch_port_power_w * run_s
                    + draw_j(sw.switch_count, sw.idle_power_w, sw.active_power_w, run_s, busy))
    assert math.isclose(res.energy_breakdown_j["switches"], expected, rel_tol=1e-9)


def test_unknown_power_is_null_with_a_note_never_zero() -> None:
    dgx = load_system("dgx-a100")
    res = run("cpu", system=replace(dgx, storage=load_storage("nas-nfs")))
    e = res.energy_breakdown_j
    assert e["storage"] is None and any("nas-nfs" in n and "unknown" in n for n in res.notes)
    net = dgx.network
    busy = res.records.loc[res.records["resource"] == "network", "duration_s"].sum()
    assert math.isclose(e["nics"], draw_j(dgx.nic_count, net.idle_power_w, net.active_power_w,
                                          res.run_time_s, busy), rel_tol=1e-9)
    assert math.isclose(e["total"], sum(v for k, v in e.items()
                                        if k != "total" and v is not None))


@pytest.mark.parametrize(("loader", "name", "extra", "field"), [
    ("storage", "nvme-gen4", 'active_power_w = 5.0\nidle_power_w = 9.0\n', "idle_power_w"),
    ("link", "infiniband-hdr-200g", 'idle_power_w = 3.0\n', "idle_power_w"),
    ("decoder", "a100", 'hw_power_w = -1.0\n', "hw_power_w"),
])
def test_bad_power_figures_are_one_line_errors(tmp_path: Any, loader: str, name: str,
                                               extra: str, field: str) -> None:
    from accelsim.profiles.links import load_link
    from accelsim.tomlfiles import find_profile

    folder = {"storage": "storage", "link": "links", "decoder": "decoders"}[loader]
    text = find_profile(name, f"{folder}/*.toml", loader).read_text()
    body, sources = text.split("[sources]")
    keys = [line.split(" = ")[0] for line in extra.splitlines()]
    drop = ("active_power_w ", "idle_power_w ", *(f"{k} " for k in keys))
    body = "\n".join(ln for ln in body.splitlines() if not ln.startswith(drop))
    sources = "\n".join(ln for ln in sources.splitlines() if not ln.startswith(drop))
    cited = "".join(f'{k} = "assumed: test"\n' for k in keys)
    path = tmp_path / f"{name}.toml"
    path.write_text(f"{body}\n{extra}\n[sources]{sources}\n{cited}")
    load = {"storage": load_storage, "link": load_link, "decoder": load_decoder}[loader]
    with pytest.raises(AccelsimError, match=field) as err:
        load(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_host_without_a_cpu_profile_has_unknown_host_energy() -> None:
    edge = load_system("edge-device")  # an inline CPU: no power figure
    res = simulate_training(TrainConfig(scenario(batch=8), edge, device_profile=NullProfile(),
                                        steps=2))
    e = res.energy_breakdown_j
    assert e["host_cpu"] is None and e["dram"] is None
    assert any("host CPU and DRAM energy are unknown" in n for n in res.notes)
    assert any("lower bounds" in n and "host_cpu" in n for n in res.notes)


def test_device_decode_is_offered_as_relief_for_a_prep_bound_run() -> None:
    import accelsim
    from accelsim.report.relief import find_relief

    knobs = {"prep_workers": 1, "steps": 8, "devices": 2}
    rec = accelsim.simulate("resnet50-train", "dgx-a100", **knobs).record
    assert rec["bottleneck"] == "prepare"
    found = find_relief("resnet50-train", "dgx-a100", rec, knobs, top=10)
    hw = [c for c in found.best if c.knobs.get("decode") == "hw"]
    assert hw and hw[0].after > found.before  # the JPEG engine takes the work off host cores
