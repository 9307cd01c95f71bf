"""The one reader of input files (`accelsim.tomlfiles.read_file_bytes`) and the readers built on
it: ONNX models and their external data, SCALE-Sim configurations and topologies, request
traces (issue 24). Each bad input here once hung, crashed or was read as something else."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelsim.devices.systolic.scalesim.config import cfg_text, read_profile
from accelsim.errors import AccelsimError, ConfigError, DataFileError
from accelsim.llm.requests import read_requests
from accelsim.tomlfiles import read_file_bytes, read_text_file
from accelsim.workload.importers import topology
from accelsim.workload.importers.onnx import read_graph, read_weights

TRACE_HEADER = "arrival_s,prompt_tokens,output_tokens\n"


def within(seconds: float, fn, *args):
    """`fn(*args)` run in a thread that must finish within `seconds` (a hang fails the test,
    and the daemon thread is left behind). Returns what it raised, or None."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            fn(*args)
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            outcome.append(err)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert outcome, f"{fn.__name__} still running after {seconds} s (a hang)"
    return outcome[0]


# --- the reader -----------------------------------------------------------------------------


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    err = within(10, read_file_bytes, fifo)
    assert isinstance(err, DataFileError) and "not a regular file" in str(err)


@pytest.mark.parametrize("path,says", [("/dev/zero", "not a regular file"),
                                       ("/", "is a directory"),
                                       ("/no/such/file", "no such file")])
def test_what_is_not_a_regular_file_is_refused(path, says):
    with pytest.raises(DataFileError, match=says):
        read_file_bytes(path)


def test_a_symlink_is_followed_to_what_it_names(tmp_path):
    (tmp_path / "real.txt").write_text("hello")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    (tmp_path / "zero").symlink_to("/dev/zero")
    assert read_text_file(tmp_path / "link.txt") == "hello"
    with pytest.raises(DataFileError, match="not a regular file"):
        read_file_bytes(tmp_path / "zero")


def test_the_size_cap_and_the_encoding_are_named(tmp_path):
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * 101)
    with pytest.raises(DataFileError, match="101 bytes; this file is at most 100"):
        read_file_bytes(big, max_bytes=100)
    bad = tmp_path / "latin1.csv"
    bad.write_bytes(b"caf\xe9\n")
    with pytest.raises(DataFileError, match="not UTF-8 text \\(byte 3\\)"):
        read_text_file(bad)


# --- ONNX -----------------------------------------------------------------------------------


def linear_model(weight: np.ndarray) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", weight.shape[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", weight.shape[1]])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x],
                          [y], [numpy_helper.from_array(weight, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def external_model(folder: Path, location: str) -> Path:
    """A MatMul model in `folder` whose weight is external data at `location`."""
    folder.mkdir(parents=True, exist_ok=True)
    m = linear_model(np.ones((4, 3), np.float32))
    onnx.save_model(m, folder / "m.onnx", save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    m = onnx.load(folder / "m.onnx", load_external_data=False)
    m.graph.initializer[0].external_data[0].value = location
    onnx.save_model(m, folder / "m.onnx")
    return folder / "m.onnx"


def test_external_data_inside_the_folder_is_read(tmp_path):
    path = external_model(tmp_path / "model", "w.bin")
    weights = read_weights(path)
    assert np.array_equal(weights["mm"]["weight"], np.ones((3, 4), np.float32))


@pytest.mark.parametrize("location,says", [
    ("../outside.bin", "climbs out with '..'"),
    ("/etc/passwd", "absolute path"),
    ("sub/../../outside.bin", "climbs out"),
])
def test_external_data_outside_the_models_folder_is_refused(tmp_path, location, says):
    (tmp_path / "outside.bin").write_bytes(np.ones(12, np.float32).tobytes())
    path = external_model(tmp_path / "model", location)
    with pytest.raises(AccelsimError, match=says) as err:
        read_graph(path)
    assert "tensor 'w'" in str(err.value) and "\n" not in str(err.value)


def test_a_symlink_inside_the_folder_to_a_file_outside_is_refused(tmp_path):
    # onnx 1.15 followed it and loaded the outside file as weights
    outside = tmp_path / "secret.bin"
    outside.write_bytes(np.ones(12, np.float32).tobytes())
    path = external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").unlink()
    (tmp_path / "model" / "w.bin").symlink_to(outside)
    with pytest.raises(AccelsimError, match="through a symlink"):
        read_graph(path)


def test_external_data_of_the_wrong_length_is_refused(tmp_path):
    path = external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").write_bytes(b"\0" * 8)
    with pytest.raises(AccelsimError, match="runs past the end"):
        read_graph(path)


def test_an_onnx_path_that_is_a_fifo_or_links_to_dev_zero_is_refused(tmp_path):
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    err = within(10, read_graph, fifo)
    assert isinstance(err, AccelsimError) and "not a regular file" in str(err)
    link = tmp_path / "zero.onnx"
    link.symlink_to("/dev/zero")  # was KeyError: ''
    with pytest.raises(AccelsimError, match="not a regular file"):
        read_graph(link)


# --- SCALE-Sim ------------------------------------------------------------------------------


def test_a_percent_sign_in_a_scalesim_cfg_is_a_character(tmp_path):
    # configparser's interpolation raised InterpolationSyntaxError (a traceback)
    path = tmp_path / "a.cfg"
    path.write_text(cfg_text(32, 32, 64, 64, 64, 10, "ws").replace("Dataflow : ws",
                                                                    "Dataflow : w%s"))
    with pytest.raises(ConfigError, match="Dataflow' = 'w%s'"):
        read_profile(path)
    path.write_text(cfg_text(32, 32, 64, 64, 64, 10, "ws").replace("run_name = accelsim",
                                                                    "run_name = 100%"))
    assert read_profile(path).compute.mxu_rows == 32


@pytest.mark.parametrize("edit,field", [
    (("IfmapSramSzkB: 64", "IfmapSramSzkB: 1000000000000"), "IfmapSramSzkB"),
    (("ArrayHeight: 32", "ArrayHeight: ３２"), "ArrayHeight"),
    (("ArrayHeight: 32", "ArrayHeight: 3_2"), "ArrayHeight"),
    (("Bandwidth : 10", "Bandwidth : 1e300"), "Bandwidth"),
])
def test_scalesim_cfg_values_outside_physical_ranges_are_refused(tmp_path, edit, field):
    path = tmp_path / "a.cfg"
    path.write_text(cfg_text(32, 32, 64, 64, 64, 10, "ws").replace(*edit))
    with pytest.raises(ConfigError, match=field):
        read_profile(path)


def test_a_scalesim_gemm_whose_operands_would_be_tebibytes_is_refused(tmp_path):
    # 2^24 cubed was within the per-number caps and allocated 2 TiB in the SRAM walk
    path = tmp_path / "g.csv"
    path.write_text(f"Layer, M, N, K,\nfc1, {2**24}, {2**24}, {2**24},\n")
    with pytest.raises(ConfigError, match="row 2 \\(fc1\\).*TiB"):
        topology.read_graph(path)


# --- request traces -------------------------------------------------------------------------


@pytest.mark.parametrize("rows,says", [
    ("0.0,100,5,7\n", "line 2.*has 4 cells; the header has 3"),  # was TypeError in sorted
    ("0.0,100\n", "line 2.*has 2 cells"),
    ("0.0,100,5\n0.5,100,5,9\n", "line 3.*has 4 cells"),
    ("0.0,1_0,5\n", "line 2 prompt_tokens"),
    ("0.0,１０,5\n", "line 2 prompt_tokens"),
    ("0.0,١٠,5\n", "line 2 prompt_tokens"),
    ("0.0,10,5\n1e308,10,5\n", "line 3 arrival_s.*at most 1e\\+09 s"),  # energy/token was inf
    ("1e3,10,5\n", None),  # e notation: arrival_s is a float
])
def test_a_trace_row_that_does_not_fit_its_header_is_named(tmp_path, rows, says):
    path = tmp_path / "trace.csv"
    path.write_text(TRACE_HEADER + rows, encoding="utf-8")
    if says is None:
        read_requests(path, 4096)
        return
    with pytest.raises(ConfigError, match=says) as err:
        read_requests(path, 4096)
    assert str(path) in str(err.value)


def test_a_trace_that_is_a_fifo_or_dev_zero_is_refused_at_once(tmp_path):
    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    err = within(10, read_requests, fifo, 4096)
    assert isinstance(err, DataFileError) and "not a regular file" in str(err)
    err = within(10, read_requests, "/dev/zero", 4096)  # read until memory ran out
    assert isinstance(err, DataFileError) and "not a regular file" in str(err)
