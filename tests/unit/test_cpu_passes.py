"""Measured element-pass tables (accelsim/devices/cpu/passes.py): log-log interpolation against
closed forms, the CPU model's pass terms against hand-derived sums, stacks without tables
unchanged, and bad tables as one-line errors naming file, field and value (issue 10)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from accelsim.calibrate.pass_bench import PASS_SIZES, measure_passes, pass_names
from accelsim.calibrate.write import measured_stack, toml_text, with_passes
from accelsim.devices.cpu.model import cpu_costs
from accelsim.devices.cpu.passes import PassTable
from accelsim.errors import ConfigError
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import builtin_stacks, load_stack
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table
from tests.helpers.cpu import row as _row  # one M x K x N linear row's costs

WS = (1e6, 4e6, 16e6)
S = (1e-9, 2e-9, 8e-9)


def test_interpolation_is_exact_at_the_points_and_a_power_law_between():
    table = PassTable(WS, S)
    assert table.s_per_element(np.array(WS)) == pytest.approx(S, rel=1e-12)
    # between (1e6, 1 ns) and (4e6, 2 ns): s = 1 ns x (ws / 1e6) ^ (ln 2 / ln 4) = sqrt(ws/1e6)
    for ws in (1.5e6, 2e6, 3e6):
        assert table.s_per_element(ws) == pytest.approx(1e-9 * math.sqrt(ws / 1e6), rel=1e-12)
    # between (4e6, 2 ns) and (16e6, 8 ns): exponent ln 4 / ln 4 = 1, linear in ws
    assert table.s_per_element(8e6) == pytest.approx(4e-9, rel=1e-12)


def test_interpolation_is_monotone_between_points_and_clamped_outside():
    rising = PassTable(WS, S)
    dip = PassTable(WS, (3e-9, 1e-9, 2e-9))  # falls then rises
    grid = np.geomspace(WS[0], WS[-1], 400)
    assert np.all(np.diff(rising.s_per_element(grid)) >= 0)
    first = dip.s_per_element(grid[grid <= WS[1]])
    second = dip.s_per_element(grid[grid >= WS[1]])
    assert np.all(np.diff(first) <= 0) and np.all(np.diff(second) >= 0)
    assert rising.s_per_element(np.array([1.0, 1e3, 0.0])) == pytest.approx([S[0]] * 3)
    assert rising.s_per_element(np.array([1e9, 1e12])) == pytest.approx([S[-1]] * 2)
    assert rising.time_s(np.array([0.0, 10.0]), np.array([1e6, 1e6])) == pytest.approx(
        [0.0, 10 * S[0]])


def _flat(s_per_element):
    return PassTable((1e3,), (s_per_element,))  # one point: the same rate at every size


def _numpy_like(**passes):
    base = builtin_stacks()["pytorch-eager"]
    return dataclasses.replace(base, weight_casts=True,
                               cpu_efficiency={"pack_bf16": 0.5, "quantize_int8": 0.03,
                                               "gemm_int8": 0.015}, cpu_passes=passes)


def test_builtin_stacks_have_no_tables_and_a_table_for_another_precision_changes_nothing():
    assert all(not s.cpu_passes for s in builtin_stacks().values())
    plain = _numpy_like()
    other = _numpy_like(cast_fp16=_flat(1e-9), quantize_int8=_flat(1e-9))
    for m, k, n in ((8, 1024, 1024), (64, 768, 3072)):
        a, b = _row(m, k, n, "bf16", plain), _row(m, k, n, "bf16", other)
        assert a.equals(b)
        a, b = _row(m, k, n, "fp32", plain), _row(m, k, n, "fp32", other)
        assert a.equals(b)  # no gemv_fp32 table, no cast at fp32


def test_cast_table_prices_the_weight_input_and_output_roundings():
    # bf16 M x K x N: without a table the weight cast is K N x (4 + 2) B at the pack figure;
    # with a flat table of c s per element it is c (K N + M K + M N) (numpy rounds all three)
    m, k, n, c = 16, 1024, 2048, 2e-9
    plain = _numpy_like()
    tabled = _numpy_like(cast_bf16=_flat(c))
    bandwidth = load_profile("xeon-8380").offchip_memory.bandwidth_bytes_per_s
    cast_bytes = k * n * (4 + 2)
    delta = _row(m, k, n, "bf16", tabled)["compute_s"] - _row(m, k, n, "bf16", plain)["compute_s"]
    assert delta == pytest.approx(c * (k * n + m * k + m * n) - cast_bytes / (bandwidth * 0.5),
                                  rel=1e-9)


def test_cast_table_prices_rounding_an_embeddings_whole_table():
    # numpy's bf16 embedding rounds its whole V x D table on every call, though a lookup of S
    # tokens reads S x D of it: with a flat table of c s per element, c V D more time
    vocab, dim, seq, c = 30522, 64, 16, 2e-9
    g = GraphBuilder("emb")
    g.embedding(g.input("ids", (seq,), "index"), num_embeddings=vocab, embedding_dim=dim,
                name="emb")
    graph = g.build()
    work, gemms = work_table(graph, 1, "bf16"), gemms_for(graph, 1)
    profile = load_profile("xeon-8380")
    plain = cpu_costs(profile, work, gemms, "bf16", _numpy_like()).to_frame().iloc[0]
    tabled = cpu_costs(profile, work, gemms, "bf16",
                       _numpy_like(cast_bf16=_flat(c))).to_frame().iloc[0]
    assert tabled["compute_s"] - plain["compute_s"] == pytest.approx(c * vocab * dim, rel=1e-9)
    # serial with the lookup's stream too (both terms of the row's max carry it)
    assert tabled["memory_s"] - plain["memory_s"] == pytest.approx(c * vocab * dim, rel=1e-9)
    # a stack that does not cast (numpy rounds only under the narrow-float kernels) pays none
    no_casts = dataclasses.replace(_numpy_like(cast_bf16=_flat(c)), weight_casts=False)
    assert cpu_costs(profile, work, gemms, "bf16", no_casts).to_frame().iloc[0]["compute_s"] == \
        cpu_costs(profile, work, gemms, "bf16",
                  dataclasses.replace(_numpy_like(), weight_casts=False)
                  ).to_frame().iloc[0]["compute_s"]
    fp32 = cpu_costs(profile, work_table(graph, 1, "fp32"), gemms, "fp32",
                     _numpy_like(cast_bf16=_flat(c))).to_frame().iloc[0]
    assert fp32["compute_s"] == cpu_costs(profile, work_table(graph, 1, "fp32"), gemms,
                                          "fp32", _numpy_like()).to_frame().iloc[0]["compute_s"]


def test_quantize_table_prices_both_operands_each_at_its_own_working_set():
    # int8 M x K x N: quantisation of X (M K elements, 4 M K bytes) and W (K N, 4 K N bytes)
    m, k, n = 8, 512, 4096
    table = PassTable((4.0 * m * k, 4.0 * k * n), (1e-9, 5e-9))  # X at 1 ns, W at 5 ns
    plain = _numpy_like()
    tabled = _numpy_like(quantize_int8=table)
    bandwidth = load_profile("xeon-8380").offchip_memory.bandwidth_bytes_per_s
    by_rate = 4.0 * (m * k + k * n) / (bandwidth * 0.03)
    delta = _row(m, k, n, "int8", tabled)["compute_s"] - _row(m, k, n, "int8", plain)["compute_s"]
    assert delta == pytest.approx(1e-9 * m * k + 5e-9 * k * n - by_rate, rel=1e-9)


def test_quantize_table_prices_a_convs_input_not_its_im2col():
    # numpy's int8 conv quantises its input x (B C H W elements), then im2cols the int8 copy:
    # a 3 x 3 stride-1 conv's m x k (9 C H W per image) is not what the quantise pass reads
    c_in, hw, out, batch, per = 16, 28, 32, 2, 5e-9
    g = GraphBuilder("conv")
    g.conv2d(g.input("x", (c_in, hw, hw)), out_channels=out, kernel=3, stride=1, padding=1,
             bias=False, name="conv")
    graph = g.build()
    work, gemms = work_table(graph, batch, "int8"), gemms_for(graph, batch)
    profile = load_profile("xeon-8380")
    plain = cpu_costs(profile, work, gemms, "int8", _numpy_like()).to_frame().iloc[0]
    tabled = cpu_costs(profile, work, gemms, "int8", _numpy_like(quantize_int8=_flat(per))
                       ).to_frame().iloc[0]
    m, k, n = batch * hw * hw, 9 * c_in, out  # the im2col GEMM
    bandwidth = profile.offchip_memory.bandwidth_bytes_per_s
    by_rate = 4.0 * (m * k + k * n) / (bandwidth * 0.03)  # the byte model: m x k stands in
    expected = per * (batch * c_in * hw * hw + k * n) - by_rate
    assert tabled["compute_s"] - plain["compute_s"] == pytest.approx(expected, rel=1e-9)


def test_gemv_table_is_the_stream_after_the_cast():
    # M = 1: memory time = the fp32 GEMV stream of K + K N elements, then (bf16) the casts
    k, n, g, c = 1024, 4096, 0.25e-9, 2e-9
    fp32 = _row(1, k, n, "fp32", _numpy_like(gemv_fp32=_flat(g)))
    assert fp32["memory_s"] == pytest.approx(g * (k + k * n), rel=1e-12)
    bf16 = _row(1, k, n, "bf16", _numpy_like(gemv_fp32=_flat(g), cast_bf16=_flat(c)))
    assert bf16["memory_s"] == pytest.approx(g * (k + k * n) + c * (k * n + k + n), rel=1e-12)
    # not GEMV-shaped: no stream table term
    assert _row(2, k, n, "fp32", _numpy_like(gemv_fp32=_flat(g)))["memory_s"] == \
        _row(2, k, n, "fp32", _numpy_like())["memory_s"]


def _stack_file(tmp_path, tables):
    data = measured_stack("numpy here, measured", {"gemm_fp32": 0.5}, 2e-6, True, 2.6, "vm",
                          "today", "note")
    path = tmp_path / "numpy-host.toml"
    path.write_text(toml_text(with_passes(data, tables, "vm", "today", "CPU time"), "t"))
    return path


def test_tables_round_trip_through_a_stack_file(tmp_path):
    tables = {"cast_bf16": PassTable((524288.0, 8388608.0), (1.25e-9, 3.5e-9)),
              "gemv_fp32": PassTable((524288.0, 8388608.0), (6e-11, 2.4e-10))}
    stack = load_stack(_stack_file(tmp_path, tables))
    assert set(stack.cpu_passes) == set(tables)
    for name, t in tables.items():
        got = stack.cpu_passes[name]
        assert got.working_set_bytes == t.working_set_bytes
        assert got.s_per_element_points == pytest.approx(t.s_per_element_points, rel=1e-3)
    assert stack.sources["cpu_passes.cast_bf16"].startswith("measured:")
    assert not load_stack(_stack_file(tmp_path, {})).cpu_passes


@pytest.mark.parametrize(("old", "new", "field"), [
    ("ns_per_element = [1.25, 3.5]", "ns_per_element = [1.25]",
     "cpu_passes.cast_bf16.ns_per_element"),
    ("working_set_bytes = [524288, 8388608]", "working_set_bytes = [8388608, 524288]",
     "cpu_passes.cast_bf16.working_set_bytes"),
    ("ns_per_element = [1.25, 3.5]", "ns_per_element = [1.25, -3.5]",
     "cpu_passes.cast_bf16.ns_per_element"),
    ("ns_per_element = [1.25, 3.5]", 'ns_per_element = [1.25, "x"]',
     "cpu_passes.cast_bf16.ns_per_element"),
    ("[cpu_passes.cast_bf16]", "[cpu_passes.cast_bf8]", "cpu_passes.cast_bf8"),
    ("ns_per_element = [1.25, 3.5]", "ns_per_elem = [1.25, 3.5]",
     "cpu_passes.cast_bf16.ns_per_elem"),
    ('"cpu_passes.cast_bf16" = "measured', '"cpu_passes.other" = "measured',
     "sources.cpu_passes.other"),
    ("[cpu_passes.cast_bf16]\nworking_set_bytes = [524288, 8388608]\n"
     "ns_per_element = [1.25, 3.5]", "[cpu_passes]", "cpu_passes"),  # an empty table
])
def test_a_bad_table_is_a_one_line_error_naming_file_field_value(tmp_path, old, new, field):
    path = _stack_file(tmp_path, {"cast_bf16": PassTable((524288.0, 8388608.0),
                                                         (1.25e-9, 3.5e-9))})
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_stack(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and f"'{field}'" in message


def test_tiny_measurement_gives_a_positive_table_per_pass_of_the_precisions():
    assert pass_names(("fp32", "bf16", "int8")) == ("cast_bf16", "quantize_int8", "gemv_fp32")
    assert pass_names(("int8",)) == ("quantize_int8",)
    tables = measure_passes(("fp32", "fp16"), PASS_SIZES["tiny"], repeats=1, sweeps=1)
    assert set(tables) == {"cast_fp16", "gemv_fp32"}
    for t in tables.values():
        assert len(t.working_set_bytes) == 2 and all(s > 0 for s in t.s_per_element_points)
