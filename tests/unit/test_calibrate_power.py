"""Issue 27, item 4: host power as data. RAPL where readable (a fake powercap tree here),
else the TDP is marked as not limiting the clock; the clock line says what limited a run."""

import dataclasses

import pytest

from accelsim.calibrate.host import host_facts
from accelsim.calibrate.power import read_rapl
from accelsim.calibrate.write import cpu_profile, measured_stack, write_profile
from accelsim.devices.estimate import estimate, summary
from accelsim.devices.registry import profile_power_limits
from accelsim.profiles.devices import load_profile
from accelsim.workload.zoo import build_model


def _zone(root, name, energy_uj, limit_uw=None, range_uj=2**32):
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{range_uj}\n")
    if limit_uw is not None:
        (zone / "constraint_0_power_limit_uw").write_text(f"{limit_uw}\n")
    return zone


def test_rapl_reads_the_package_zones_their_limit_and_a_wrapped_counter(tmp_path):
    _zone(tmp_path, "intel-rapl:0", 1_000_000, 125_000_000, range_uj=10_000_000)
    _zone(tmp_path, "intel-rapl:1", 5_000_000, 125_000_000)
    _zone(tmp_path, "intel-rapl:0:0", 1, 5_000_000)  # a subzone (core): not a package
    rapl = read_rapl(tmp_path)
    assert [z.name for z in rapl.zones] == ["intel-rapl:0", "intel-rapl:1"]
    assert rapl.limit_w == pytest.approx(250.0)
    # zone 0 wrapped: 9 J to its range, then 0.5 J; zone 1 rose 3 J; over 2 s: 6.25 W
    watts = rapl.mean_power_w((9_000_000.0, 5_000_000.0), (500_000.0, 8_000_000.0), 2.0)
    assert watts == pytest.approx((1.5 + 3.0) / 2.0)
    assert rapl.mean_power_w((1.0, 1.0), (2.0, 2.0), 0.0) is None


def test_no_readable_rapl_is_none(tmp_path):
    assert read_rapl(tmp_path / "absent") is None
    assert read_rapl(tmp_path) is None
    zone = _zone(tmp_path, "intel-rapl:0", 1)
    (zone / "energy_uj").write_text("")  # unreadable to this user, as a VM's or root-only
    assert read_rapl(tmp_path) is None


def _facts():
    return dataclasses.replace(host_facts(), vendor="AMD", cores=2, simd_width_bits=512,
                               has_fma=True, clock_hz=2.596e9, max_clock_hz=None)


def test_a_host_without_rapl_gets_a_tdp_that_does_not_limit_the_clock(tmp_path):
    data, _ = cpu_profile(_facts(), 2.4e10, "today", "")
    assert data["power"]["limits_clock"] is False
    assert data["sources"]["power.tdp_w"].startswith("assumed:")
    profile = load_profile(write_profile(tmp_path / "host-cpu.toml", data, "test"))
    tdp_w, static_w = profile_power_limits(profile)
    assert tdp_w == float("inf") and 0 < static_w < profile.power.tdp_w


def test_a_host_with_rapl_writes_its_limit_as_a_measured_tdp(tmp_path):
    _zone(tmp_path, "intel-rapl:0", 1_000_000, 35_000_000)
    data, _ = cpu_profile(_facts(), 2.4e10, "today", "", rapl=read_rapl(tmp_path))
    assert data["power"] == {"tdp_w": 35.0}
    assert data["sources"]["power.tdp_w"].startswith("measured:")
    profile = load_profile(write_profile(tmp_path / "host-cpu.toml", data, "test"))
    assert profile_power_limits(profile)[0] == 35.0


def _pytorch_like(tmp_path):
    """The stack of issue 27's report: streams at 5x the measured copy bandwidth (relu 5.11,
    add 5.19: cache residency the model lacks), GEMMs and convolutions at the peak."""
    stack = measured_stack("PyTorch-like", {"gemm_fp32": 1.0, "conv_fp32": 1.0,
                                            "relu_fp32": 5.0, "add_fp32": 5.0,
                                            "stream_fp32": 5.0, "pack_fp32": 10.0},
                           1e-6, False, 2.596, "vm", "today", "test")
    return str(write_profile(tmp_path / "pytorch-host.toml", stack, "test"))


def test_an_unknown_tdp_no_longer_throttles_the_calibrated_host(tmp_path):
    """Issue 27: the assumed 8.8 W of a 2-vCPU EPYC made ResNet-50's fast stream rows
    power-bound while the output said 100% clock. As written now (limits_clock false):
    nothing is power-bound; as written before (the same TDP taken as a limit): the rows that
    hit it are, and the clock record says so."""
    graph, sw = build_model("resnet50"), _pytorch_like(tmp_path)
    data, _ = cpu_profile(_facts(), 2.4e10, "today", "")
    assert data["power"]["tdp_w"] == pytest.approx(280 * 2 / 64, abs=0.051)  # epyc-7763's
    now = load_profile(write_profile(tmp_path / "now.toml", data, "test"))
    base = estimate(graph, now, 1, "fp32", software=sw)
    assert (base.layers["bound"] != "power").all()
    clock = summary(base, graph, layers=False)["clock"]
    assert clock["sustained_fraction"] == 1.0 and clock["power_limited_time_share"] == 0.0
    del data["power"]["limits_clock"], data["sources"]["power.limits_clock"]
    before = load_profile(write_profile(tmp_path / "before.toml", data, "test"))
    est = estimate(graph, before, 1, "fp32", software=sw)
    layers = est.layers
    power = layers["bound"] == "power"
    assert power.any()
    clock = summary(est, graph, layers=False)["clock"]
    # the share of the time power-bound, and the time-weighted clock: each stretched row at
    # its unthrottled time over its throttled one, so the whole run at base over throttled
    assert clock["power_limited_time_share"] == pytest.approx(
        layers.loc[power, "time_s"].sum() / layers["time_s"].sum())
    assert clock["sustained_fraction"] == pytest.approx(
        base.layers["time_s"].sum() / layers["time_s"].sum(), rel=1e-6)
    assert clock["sustained_fraction"] < 1
