"""`accelsim calibrate`, measured stacks and `describe --execute --time` (issue 10)."""

import json
import math
import time
import tomllib

import numpy as np
import pytest

from accelsim.calibrate.cases import kernel_cases
from accelsim.calibrate.fit import case_key, fit_efficiencies, with_group_figures
from accelsim.calibrate.run import calibrate
from accelsim.calibrate.write import efficiency_cap, toml_text
from accelsim.devices.cpu.model import cpu_costs
from accelsim.errors import ConfigError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import load_stack, stack_fields
from accelsim.profiles.stack_choice import resolve_software
from accelsim.profiles.storage import load_storage
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table
from tests.helpers.cli import run_cli


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny calibration run shared by the tests below (and its wall time)."""
    out = tmp_path_factory.mktemp("calibration")
    start = time.perf_counter()
    result = calibrate(out, budget="tiny", progress=False, torch=False)
    return result, time.perf_counter() - start


def test_fit_recovers_known_rates_from_synthetic_timings():
    # t = work / e + kernels * t0, with e = 0.4 (gemm) and 0.05 (relu), t0 = 3 us: exact data.
    work = np.array([1e-4, 4e-4, 2e-3, 1e-2, 2e-5, 8e-5, 3e-4])
    keys = ["gemm_fp32"] * 4 + ["relu_fp32"] * 3
    truth = {"gemm_fp32": 0.4, "relu_fp32": 0.05}
    kernels = np.ones(len(keys))
    measured = np.array([w / truth[k] for w, k in zip(work, keys, strict=True)]) + 3e-6
    fit = fit_efficiencies(keys, work, kernels, measured, dispatch_s=3e-6)
    assert fit.efficiency == pytest.approx(truth, rel=1e-9)
    assert fit.per_kernel_s == 3e-6
    assert np.max(np.abs(fit.relative_error)) < 1e-9


def test_fit_subtracts_the_measured_fault_time():
    # t = work / 0.4 + serial / 0.8 + t0 + fault, with a known fault time per case (measured,
    # not fitted): the joint fit recovers the GEMM and pack figures exactly, and predicts t.
    from accelsim.calibrate.fit import fit_with_pack

    work = np.array([1e-4, 4e-4, 2e-3, 1e-2])
    serial = np.array([3e-4, 1e-4, 5e-4, 2e-3])
    faults = np.array([0.0, 2e-4, 0.0, 5e-3])
    measured = work / 0.4 + serial / 0.8 + 3e-6 + faults
    fit = fit_with_pack(["gemm_fp32"] * 4, work, serial, np.ones(4), measured, 3e-6,
                        faults_s=faults)
    assert fit.efficiency["gemm_fp32"] == pytest.approx(0.4, rel=1e-9)
    assert fit.efficiency["pack_fp32"] == pytest.approx(0.8, rel=1e-9)
    assert np.max(np.abs(fit.relative_error)) < 1e-9


def test_fit_of_noisy_timings_is_the_closed_form_slope():
    # GEMM rate from noisy timings: 1/e = sum(x (t - t0)) / sum(x^2), computed here by hand for
    # three cases (x = 1, 2, 5 ms of work at peak; t0 = 0.1 ms).
    work = np.array([1e-3, 2e-3, 5e-3])
    measured = np.array([2.6e-3, 3.9e-3, 1.1e-2])
    slope = (1e-3 * 2.5e-3 + 2e-3 * 3.8e-3 + 5e-3 * 10.9e-3) / (1e-6 + 4e-6 + 25e-6)
    fit = fit_efficiencies(["gemm_fp32"] * 3, work, np.ones(3), measured, dispatch_s=1e-4)
    assert fit.efficiency["gemm_fp32"] == pytest.approx(1 / slope, rel=1e-12)
    assert fit.relative_error == pytest.approx((work * slope + 1e-4) / measured - 1)


def test_joint_fit_recovers_gemm_pack_and_stream_rates_from_model_timings():
    # Timings made by the model itself with known rates: gemm 0.3, packing and casts 0.45,
    # a GEMV's DRAM stream 0.9, relu 0.6, dispatch 2 us; the skinny GEMMs' time is mostly
    # packing and the M = 1 one is memory-bound. The fit must give every rate back.
    from accelsim.calibrate.cases import _linear, _unary
    from accelsim.calibrate.fit import fit_with_pack, unit_work_s

    profile = load_profile("xeon-8380")
    cases = [_linear(m, 512, n) for m, n in ((1, 2048), (8, 1024), (32, 512), (256, 256))]
    cases += [_unary("relu", (64, 1024)), _unary("relu", (512, 1024))]
    truth = {"gemm_fp32": 0.3, "relu_fp32": 0.6, "pack_fp32": 0.45, "gemv_fp32": 0.9}
    keys = [case_key(c, "fp32") for c in cases]
    terms = np.array([unit_work_s(profile, c, "fp32") for c in cases])
    work, serial, memory, kernels = terms.T
    assert serial[1] > 0.2 * work[1]  # the skinny GEMM's packing and cast matter
    compute = np.array([w / truth[k] for w, k in zip(work, keys, strict=True)]) \
        + serial / truth["pack_fp32"]
    # the CPU model's bound: a matmul streams its DRAM bytes at the `gemv` figure
    stream = np.array([truth["gemv_fp32"] if k.startswith("gemm") else truth[k] for k in keys])
    measured = np.maximum(compute, memory / stream) + kernels * 2e-6
    assert (memory / stream > compute)[0]  # the M = 1 case is memory-bound
    fit = fit_with_pack(keys, work, serial, kernels, measured, 2e-6, memory)
    assert fit.efficiency == pytest.approx(truth, rel=1e-9)
    assert np.max(np.abs(fit.relative_error)) < 1e-9


def test_joint_fit_recovers_int8_mac_and_quantise_rates_from_model_timings():
    # numpy's int8 GEMMs: t = MACs at the gemm figure + the per-call quantisation of both
    # operands at the quantize figure + dispatch, made here from known rates (gemm 0.015,
    # quantize 0.03, dispatch 2 us) over M = 1 to 512. The joint fit must give both back, and
    # write `quantize_int8` (not `pack_int8`).
    from accelsim.calibrate.cases import _linear
    from accelsim.calibrate.fit import fit_with_pack, unit_work_s

    profile = load_profile("xeon-8380")
    cases = [_linear(m, k, n) for m, k, n in ((1, 1024, 2048), (4, 768, 768), (32, 512, 1024),
                                              (512, 512, 512))]
    truth = {"gemm_int8": 0.015, "quantize_int8": 0.03}
    keys = [case_key(c, "int8") for c in cases]
    terms = np.array([unit_work_s(profile, c, "int8", weight_casts=True) for c in cases])
    work, serial, memory, kernels = terms.T
    peak = profile.compute.vector_peak_flops_per_s["fp32"]
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s
    for case, w, s in zip(cases, work, serial, strict=True):  # the closed forms, by hand
        m, (k,), n = case.batch, case.graph.inputs["x"][0], case.graph.ops[-1].attrs[
            "out_features"]
        assert w == pytest.approx(2 * m * k * n / peak, rel=1e-12)  # no micro-tile waste
        assert s == pytest.approx(4 * (m * k + k * n) / bandwidth, rel=1e-12)
    measured = work / truth["gemm_int8"] + serial / truth["quantize_int8"] + kernels * 2e-6
    fit = fit_with_pack(keys, work, serial, kernels, measured, 2e-6, memory)
    assert fit.efficiency == pytest.approx(truth, rel=1e-9)
    assert np.max(np.abs(fit.relative_error)) < 1e-9


def test_a_serial_figure_the_joint_fit_cannot_separate_from_zero_is_dropped_to_the_cap():
    # The quantisation passes of these int8 GEMMs explain none of their time (the smallest
    # takes less than its passes at peak), so the joint fit's quantise coefficient is not
    # positive: it is dropped (slope 1 / the stack's cap, 10) and the GEMM rate refitted alone,
    # the closed-form slope in relative error of what is left.
    from accelsim.calibrate.fit import fit_with_pack
    from accelsim.profiles.software import MAX_CPU_EFFICIENCY

    keys = ["gemm_int8"] * 3 + ["relu_int8"] * 2
    work = np.array([1e-4, 1e-3, 1e-2, 1e-4, 1e-3])
    serial = np.array([1e-3, 1e-3, 1e-3, 0.0, 0.0])
    measured = np.array([1e-4, 2e-3, 2e-2, 4e-4, 4e-3])
    fit = fit_with_pack(keys, work, serial, np.ones(5), measured, 0.0, np.zeros(5))
    assert fit.efficiency["relu_int8"] == pytest.approx(0.25)
    assert fit.efficiency["quantize_int8"] == pytest.approx(MAX_CPU_EFFICIENCY)
    floor = 1.0 / MAX_CPU_EFFICIENCY
    a = work[:3] / measured[:3]
    b = 1.0 - serial[:3] * floor / measured[:3]
    slope = float(np.sum(a * b) / np.sum(a * a))
    assert 1.0 / fit.efficiency["gemm_int8"] == pytest.approx(slope, rel=1e-9)
    expected = (work[:3] * slope + serial[:3] * floor) / measured[:3] - 1
    assert fit.relative_error[:3] == pytest.approx(expected, rel=1e-9)


def test_group_figures_are_geometric_means():
    eff = with_group_figures({"relu_fp32": 0.5, "add_fp32": 0.125, "gelu_fp32": 0.01,
                              "gemm_fp32": 0.7})
    assert eff["stream_fp32"] == pytest.approx(0.25)  # sqrt(0.5 * 0.125)
    assert eff["vector_fp32"] == pytest.approx(0.01)
    assert "gemm_fp32" in eff and "vector_int8" not in eff


def test_every_case_key_is_a_stack_field():
    allowed = {f.key for f in next(f for f in stack_fields() if f.key == "cpu_efficiency").sub}
    for case in kernel_cases("full"):
        for precision in ("fp32", "fp16", "bf16", "int8"):
            assert case_key(case, precision) in allowed


def test_toml_text_parses_back_to_the_data():
    data = {"a": 1, "b": 0.000123456, "c": "x \"q\"", "d": [1, 2], "t": {"e": True,
            "s": {"f": 2.5}}, "sources": {"t.e": "defined: x"}}
    back = tomllib.loads(toml_text(data, "header"))
    assert back == {**data, "b": 0.0001235}  # four significant digits


def test_tiny_calibration_writes_loadable_profiles_quickly(tiny):
    result, wall_s = tiny
    # a guard against a pathological run, not a speed figure (20 s failed on a loaded box)
    assert wall_s < 60
    s = result.summary
    profile = load_profile(result.files["cpu"])
    stack = load_stack(result.files["software"])
    disk = load_storage(result.files["storage"])
    # what the loaders read back is what was measured (to the 4 digits written)
    assert profile.compute.vector_peak_flops_per_s["fp32"] == pytest.approx(
        s["fp32_vector_peak_flops_per_s"], rel=1e-3)
    assert profile.offchip_memory.bandwidth_bytes_per_s == pytest.approx(
        s["stream_bytes_per_s"], rel=1e-3)
    for key, value in s["numpy"]["efficiency"].items():
        # (a fraction of the FLOP peak is written at most 1: issue 27)
        cap = efficiency_cap(key)
        assert stack.cpu_factor(*key.rsplit("_", 1)) == pytest.approx(min(value, cap), rel=1e-3)
        assert (key in s["numpy"]["clamped"]) == (value > cap)
    assert stack.per_kernel_s["cpu"] == pytest.approx(s["numpy"]["per_kernel_s"], rel=1e-3,
                                                       abs=1e-9)
    assert stack.cpu_micro_tile is None and stack.weight_casts  # numpy rounds weights per call
    assert disk.read_bandwidth_bytes_per_s == pytest.approx(
        s["disk"]["read_bandwidth_bytes_per_s"], rel=1e-3)
    figures = [s["fp32_vector_peak_flops_per_s"], s["stream_bytes_per_s"],
               s["disk"]["random_read_4k_iops"], s["disk"]["request_latency_s"],
               *s["numpy"]["efficiency"].values(), *(r["measured_s"] for r in
                                                     s["numpy"]["cases"])]
    assert all(math.isfinite(v) and v > 0 for v in figures)
    assert s["numpy"]["per_kernel_s"] >= 0
    sources = tomllib.loads(result.files["cpu"].read_text())["sources"]
    assert sources["offchip_memory.bandwidth_gb_s"].startswith("measured: accelsim calibrate on")
    assert json.loads(result.files["summary"].read_text())["budget"] == "tiny"


def test_calibration_writes_the_allocator_and_the_host_probes(tiny):
    # On glibc the numpy stack carries its allocator: the measured time per fresh page and
    # glibc's largest mmap threshold (4 MiB x sizeof(long): 32 MiB on 64-bit); the probes of
    # the host's speed are recorded beside it (least of the runs before and after the cases).
    from accelsim.calibrate.alloc_bench import mmap_threshold_max_bytes

    result, _ = tiny
    s = result.summary
    stack = load_stack(result.files["software"])
    if mmap_threshold_max_bytes() is None:
        assert stack.allocator is None
    else:
        page_s, page_bytes, threshold = stack.allocator
        assert page_s == pytest.approx(s["allocator"]["fresh_page_s"], rel=1e-3)
        assert page_bytes == s["allocator"]["page_bytes"] and threshold == 32 << 20
    probes = s["host_speed_probe_s"]
    assert set(probes) == {"cast", "sgemm"} and all(v > 0 for v in probes.values())
    assert probes == {k: min(p[k] for p in s["host_speed_probes_s"]) for k in probes}


def test_simulate_takes_the_calibrated_files(tiny, capsys):
    files = tiny[0].files
    args = ("simulate", "resnet18", "--hw", str(files["cpu"]), "--software",
            str(files["software"]))
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "numpy-host" in out.splitlines()[0]  # the header names the stack that ran
    code, out, err = run_cli(capsys, *args, "--json")
    run = json.loads(out)
    assert code == 0 and run["throughput_samples_per_s"] > 0


def _gemm_costs(gemm_eff: float, tmp_path):
    g = GraphBuilder("g")
    g.linear(g.input("x", (2048,)), out_features=2048, bias=False, name="fc")
    graph = g.build()
    base = tmp_path / "base.toml"
    text = toml_text({
        "description": "test", "classes": ["cpu"],
        "host": {"per_step_us": 0.0, "reference_single_thread_ghz": 3.0,
                 "per_kernel_us": {"cpu": 0.0}},
        "graph": {"weight_casts": False, "layout_conversions_per_conv": 0.0},
        "efficiency": {"tensor_core": 1.0, "cuda_core": 1.0, "dram_bandwidth": 1.0},
        "cpu_efficiency": {"gemm_fp32": gemm_eff},
        "sources": {"host.per_step_us": "defined: t", "host.reference_single_thread_ghz":
                    "defined: t", "host.per_kernel_us.cpu": "defined: t",
                    "graph.weight_casts": "defined: t",
                    "graph.layout_conversions_per_conv": "defined: t",
                    "efficiency.tensor_core": "defined: t", "efficiency.cuda_core": "defined: t",
                    "efficiency.dram_bandwidth": "defined: t",
                    "cpu_efficiency.gemm_fp32": "defined: t"}}, "test stack")
    base.write_text(text)
    profile = load_profile("xeon-8380")
    work = work_table(graph, 512, "fp32")
    return cpu_costs(profile, work, gemms_for(graph, 512), "fp32",
                     resolve_software(str(base), "cpu")[0]).to_frame(), work, profile


def test_stack_gemm_efficiency_sets_the_cpu_compute_time(tmp_path):
    costs, work, profile = _gemm_costs(0.5, tmp_path)
    # 512 x 2048 x 2048 on 40 AVX-512 cores: 4 x 16 micro-tiles, 128 x 128 = 16384 of them in
    # ceil(16384 / 40) = 410 waves of 40 (16400 slots); then BLAS packs both operands (read and
    # written) at the class's assumed 0.7 of DRAM bandwidth (the stack gives no stream figure)
    flops = 2 * 512 * 2048 * 2048
    peak = profile.compute.vector_peak_flops_per_s["fp32"]
    pack_s = 2 * 4 * (512 * 2048 + 2048 * 2048) / (
        profile.offchip_memory.bandwidth_bytes_per_s * 0.7)
    assert work["flops"].iloc[0] == flops
    assert costs["compute_s"].iloc[0] == pytest.approx(
        flops * 16400 / 16384 / (peak * 0.5) + pack_s, rel=1e-9)
    costs_quarter, _, _ = _gemm_costs(0.25, tmp_path)
    assert costs_quarter["compute_s"].iloc[0] - pack_s == pytest.approx(
        2 * (costs["compute_s"].iloc[0] - pack_s))


def test_bad_stack_files_are_one_line_errors(tmp_path, capsys):
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", "xeon-8380", "--software",
                           str(tmp_path / "missing.toml"))
    assert code == 2 and "missing.toml" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text(load_path_text("openvino").replace("[sources]",
                                                      "[cpu_efficiency]\ngemm_fp32 = 50.0\n\n"
                                                      "[sources]"))
    with pytest.raises(ConfigError, match="gemm_fp32"):
        load_stack(bad)


def load_path_text(name: str) -> str:
    from accelsim.datafiles import builtin_files

    return builtin_files("hw_profiles", "software/*.toml")[name].read_text()


def test_describe_time_json_measures_whole_and_per_layer(tiny, capsys):
    files = tiny[0].files
    code, out, err = run_cli(capsys, "describe", "mlp", "--batch", "2", "--execute", "--time",
                             "--cpu-time",
                             "--hw", str(files["cpu"]), "--software", str(files["software"]),
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    per_layer = [row["measured_time_s"] for row in d["layers"]]
    assert all(t > 0 for t in per_layer)
    assert d["measured_time_s"] == pytest.approx(sum(per_layer))
    assert d["predicted_time_s"] > 0
    assert d["relative_error"] == pytest.approx(d["predicted_time_s"] / d["measured_time_s"] - 1)


def test_describe_time_needs_execute(capsys):
    code, _, err = run_cli(capsys, "describe", "mlp", "--time")
    assert code == 2 and "--execute" in err


def test_a_host_without_a_clock_gets_an_assumed_placeholder_not_a_measured_one():
    import dataclasses

    from accelsim.calibrate.host import host_facts
    from accelsim.calibrate.write import FALLBACK_CLOCK_HZ, cpu_profile

    facts = dataclasses.replace(host_facts(), clock_hz=None, max_clock_hz=None)
    data, peak = cpu_profile(facts, 1e10, "today", "no JPEG")
    assert data["compute"]["clock_mhz"] == FALLBACK_CLOCK_HZ / 1e6
    assert data["sources"]["compute.clock_mhz"].startswith("assumed:")
    assert "placeholder" in data["sources"]["compute.clock_mhz"]
    read = dataclasses.replace(facts, clock_hz=2.5e9)
    assert cpu_profile(read, 1e10, "today", "")[0]["sources"]["compute.clock_mhz"].startswith(
        "measured:")


def test_tiny_calibration_records_what_simulate_predicts_for_each_case(tiny):
    """Beside the fit's error, each case carries simulate's error under the written profiles.
    For matmul cases, whose fitted terms add as the model adds them, the two must agree: the
    written files reproduce the fit (a round trip through the TOML, the stack's group figures
    and `estimate`), except where a figure of the peak was written clamped at 1 (issue 27):
    simulate is slower there, as the clamp says."""
    result, _ = tiny
    rows = result.summary["numpy"]["cases"]
    clamped = result.summary["numpy"]["clamped"]
    matmuls = [r for r in rows if r["kernel"] in ("gemm", "conv", "attention")]
    assert matmuls and all("simulated_relative_error" in r for r in rows)
    for row in matmuls:
        if row["key"] in clamped:
            assert row["simulated_relative_error"] >= row["fit_relative_error"] - 1e-3
            continue
        assert row["simulated_relative_error"] == pytest.approx(
            row["fit_relative_error"], abs=1e-3), row["case"]
    errors = [abs(r["simulated_relative_error"]) for r in rows]
    assert result.summary["numpy"]["median_abs_simulated_error"] == pytest.approx(
        float(np.median(errors)))
