"""`accelsim simulate ... --storage-system` and `accelsim size-storage`: MLPerf Storage on a
storage system from its parts, as a user types it; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.profiles.emulation import load_emulation
from accelsim.profiles.storage_systems import load_storage_system
from accelsim.sim.storage_system.sizing import closed_form
from tests.helpers.cli import one_line_error, run_cli

LOCAL = "Micron_9400_Gen4_Performance_NVMe"


def test_max_accelerators_on_a_storage_system(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "simulate", "unet3d", "--storage-system", LOCAL,
                             "--emulate-accelerators", "h100", "--max-accelerators", "--json")
    assert code == 0, err
    rec = json.loads(out)
    cf = closed_form(load_emulation("h100", "unet3d"), load_storage_system(LOCAL))
    # The simulated count sits within one of the closed form's continuous count.
    assert abs(rec["max_accelerators"] - cf["accelerators"]) <= 1.5
    assert rec["accelerator_utilization"] >= rec["au_target"]
    assert {p["part"] for p in rec["next_parts"]} >= {"local drives"}


def test_one_run_names_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "simulate", "unet3d", "--storage-system", LOCAL,
                             "--emulate-accelerators", "h100", "--devices", "6")
    assert code == 0, err
    assert "misses the target" in out and "saturated" in out
    assert max(len(line) for line in out.splitlines()) <= 160


def test_size_storage_and_its_next_step(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "size-storage", "unet3d", "--accelerators", "3",
                             "--emulate-accelerators", "h100", "--family", LOCAL,
                             "--closed-form", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["units"] >= 1 and rec["accelerators_at_size"] >= 3
    assert rec["accelerators_one_unit_up"] > rec["accelerators_at_size"]


@pytest.mark.parametrize("args", [
    ("--storage-system", LOCAL, "--hw", "dgx-a100", "--emulate-accelerators", "h100"),
    ("--storage-system", LOCAL),
    ("--storage-system", LOCAL, "--emulate-accelerators", "h100", "--clients", "0"),
    ("--storage-system", "no-such-system", "--emulate-accelerators", "h100"),
    ("--clients", "4", "--hw", "dgx-a100"),
    ("--storage-system", LOCAL, "--emulate-accelerators", "h100", "--batch-size", "4"),
])
def test_bad_combinations_are_one_line(capsys: pytest.CaptureFixture[str],
                                       args: tuple[str, ...]) -> None:
    one_line_error(capsys, "simulate", "unet3d", *args)


def test_a_bad_system_file_names_file_field_and_value(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    src = Path(load_storage_system(LOCAL).name + ".toml")
    from accelsim.datafiles import builtin_files

    text = builtin_files("hw_profiles", "storage_systems/*.toml")[src.stem].read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("drives = 1", "drives = -3"))
    err = one_line_error(capsys, "simulate", "unet3d", "--storage-system", str(bad),
                         "--emulate-accelerators", "h100")
    assert str(bad) in err and "clients.drives" in err and "-3" in err


def test_training_reads_the_nodes_share(capsys: pytest.CaptureFixture[str]) -> None:
    """One of 16 DGX A100 nodes on a Lustre system: the medium's bandwidth is the least of
    the node's own parts and 1/16 of the servers' (arithmetic on the parts here)."""
    from accelsim.profiles.systems import load_system
    from accelsim.sim.storage_system.parts import parts_of

    name = "Cray_C500_4xHDR200_1host"
    code, out, err = run_cli(capsys, "simulate", "resnet50-train", "--hw", "dgx-a100",
                             "--storage-system", name, "--clients", "16", "--steps", "6",
                             "--json")
    assert code == 0, err
    rec = json.loads(out)
    node = load_system("dgx-a100")
    s = load_storage_system(name)
    fs, srv = s.fs, s.servers
    # The node's requests in flight over its own NICs (its cores are the pipeline's) ...
    nic = node.nic_count * node.network.bandwidth_bytes_per_s * fs.protocol_efficiency
    rpc_s = fs.request_latency_s + fs.request_bytes / nic
    requests = fs.requests_in_flight * srv.count * fs.request_bytes / rpc_s
    # ... and 1/16 of the servers' least part.
    shared = parts_of(s, 1e6, 1e6, 1e8).shared_cap_bytes_per_s / 16
    want = min(requests, shared)
    note = next(n for n in rec["notes"] if f"{name} (lustre) read by 16 client node(s)" in n)
    assert f"share {want / 1e9:.2f} GB/s" in note


DECODER_TRAIN = ("simulate", "llama-3.1-8b", "--hw", "dgx-h100", "--mode", "train", "--batch",
                 "1", "--seq-len", "4096", "--zero", "1", "--recompute", "--precision", "bf16")


def test_a_decoders_checkpoints_on_a_storage_system(capsys: pytest.CaptureFixture[str]) -> None:
    """--storage-system on a decoder's training holds its checkpoints (issue 21 item 5)."""
    system = "Cray_ClusterStor_E1000_10xHDR200_1host"
    code, out, err = run_cli(capsys, *DECODER_TRAIN, "--checkpoint-every", "100",
                             "--storage-system", system, "--json")
    assert code == 0, err
    ckpt = json.loads(out)["checkpoint"]
    assert system in ckpt["destination"] and ckpt["write_limited_by"] in ckpt[
        "write_parts_bytes_per_s"]
    code, out, err = run_cli(capsys, *DECODER_TRAIN, "--checkpoint-every", "100",
                             "--storage-system", system)
    assert code == 0, err
    assert "  checkpoint " in out and "limited by" in out
    assert "--checkpoint-every" in one_line_error(capsys, *DECODER_TRAIN, "--storage-system",
                                                  system)
    assert "--clients" in one_line_error(capsys, *DECODER_TRAIN, "--checkpoint-every", "9",
                                         "--storage-system", system, "--clients", "2")
