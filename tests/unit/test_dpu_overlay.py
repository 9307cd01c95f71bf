"""The DPU overlay's cores and batch engines (accelsim/devices/fpga/model.py): one image per engine,
the weights read from DRAM once per run of a core. Expected values are closed forms (PP x ICP x
OCP tiles, operand bytes), not outputs of the code under test."""

from __future__ import annotations

import math

import pytest

from accelsim.devices.fpga import model as fpga
from accelsim.profiles.devices import load_profile
from accelsim.profiles.stack_choice import default_stack
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.work import gemms_for, work_table

C, HW = 64, 28  # a 3 x 3 conv, C -> C channels, HW x HW pixels, no bias
WEIGHT_BYTES = C * C * 9  # int8


def one_conv():
    g = GraphBuilder("one_conv")
    g.conv2d(g.input("x", (C, HW, HW)), out_channels=C, kernel=3, stride=1, padding=1,
             bias=False, name="conv")
    return g.build()


def conv_row(board: str, batch: int):
    graph = one_conv()
    costs = fpga.fpga_costs(load_profile(board), work_table(graph, batch, "int8", "infer"),
                            gemms_for(graph, batch), "int8", default_stack("fpga"),
                            batch=batch).to_frame()
    return costs.iloc[0]


@pytest.mark.parametrize(("board", "batch", "fetches"), [
    ("zcu102", 3, 3),      # 3 independent DPUCZDX8G cores: each reads the weights
    ("zcu102", 1, 1),
    ("alveo-u200", 8, 2),  # 2 DPUCADF8H kernels x 4 batch engines: one read per kernel
    ("alveo-u200", 4, 1),
    ("alveo-u200", 5, 2),
])
def test_weights_are_read_once_per_core_run(board: str, batch: int, fetches: int) -> None:
    act_bytes = C * HW * HW  # int8 input = output size here
    row = conv_row(board, batch)
    assert row["dram_bytes"] == pytest.approx(2 * batch * act_bytes + fetches * WEIGHT_BYTES)


def test_one_image_runs_on_one_engine_and_a_full_batch_on_all() -> None:
    """A DPU core runs one image's instruction stream: batch 1 leaves the other cores idle
    (all tiles on one engine), a batch of one image per core takes the same time."""
    import tomllib

    from accelsim.datafiles import builtin_files

    text = builtin_files("hw_profiles", "efficiency/*.toml")["fpga"].read_text()
    efficiency = tomllib.loads(text)["fitted"]["overlay_mac_efficiency"]
    ov = load_profile("zcu102").compute.overlay
    tiles = math.ceil(HW * HW / ov.pixel_parallelism) * math.ceil(
        C / ov.output_channel_parallelism) * math.ceil(C * 9 / ov.input_channel_parallelism)
    one, full = conv_row("zcu102", 1), conv_row("zcu102", ov.cores)
    assert one["compute_s"] * ov.clock_hz == pytest.approx(math.ceil(tiles / efficiency),
                                                           abs=1.0)
    assert full["compute_s"] == pytest.approx(one["compute_s"], rel=1e-3)


def test_dpucadf8h_kernel_is_two_cores_of_four_batch_engines() -> None:
    ov = load_profile("alveo-u200").compute.overlay
    assert (ov.cores, ov.batch_engines, ov.engines) == (2, 4, 8)
    assert ov.macs_per_cycle == 8 * 8 * 16 * 16
