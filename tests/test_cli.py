"""The command line, run as a user runs it: exit codes, JSON keys, one-line errors."""

import json
import subprocess
import sys

import pytest

from accelsim.cli import main


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_json_keys(capsys):
    code, out, _ = run_cli(capsys, "describe", "resnet18", "--batch", "4", "--json")
    assert code == 0
    obj = json.loads(out)
    assert obj["name"] == "resnet18" and obj["params"] == 11_689_512
    layer = obj["layers"][0]
    assert set(layer) >= {"name", "op", "output_shape", "params", "flops", "bytes"}
    assert sum(row["flops"] for row in obj["layers"]) == pytest.approx(
        4 * obj["flops_per_sample"])


def test_describe_table(capsys):
    code, out, _ = run_cli(capsys, "describe", "resnet18", "--image-size", "64")
    assert code == 0 and "layer4.1.conv2" in out and "11.69M params" in out


@pytest.mark.parametrize("args,needle", [
    (("describe", "nosuchmodel"), "unknown workload"),
    (("describe", "/no/such/file.toml"), "no such scenario file"),
    (("describe", "resnet18", "--seq-len", "8"), "input.seq_len"),
])
def test_bad_input_is_one_line(capsys, args, needle):
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_console_script_from_another_directory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "accelsim.cli", "describe", "resnet18",
                           "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["name"] == "resnet18"


def test_list_json_has_every_builtin(capsys):
    from accelsim.devices.profile import builtin_profile_names

    code, out, _ = run_cli(capsys, "list", "--json")
    assert code == 0
    obj = json.loads(out)
    names = {p["name"] for p in obj["profiles"]}
    assert names == set(builtin_profile_names())
    assert {"a100", "tpu-v1", "alveo-u250", "edge-tpu", "xeon-8480"} <= names
    assert {p["class"] for p in obj["profiles"]} == {"cpu", "gpu", "tpu", "fpga", "npu"}
    assert "resnet50" in obj["workloads"] and "resnet50-train" in obj["workloads"]


def test_simulate_json_has_issue_keys(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "a100", "--batch", "64",
                             "--mode", "train", "--precision", "bf16", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert set(obj["workload"]) >= {"name", "mode", "batch_size", "precision", "params",
                                    "flops_per_sample"}
    assert obj["hardware"]["class"] == "gpu" and obj["hardware"]["name"] == "a100"
    for key in ("throughput_samples_per_s", "latency_s", "energy_j_per_sample",
                "average_power_w", "bottleneck", "unsupported_ops"):
        assert key in obj
    assert set(obj["memory"]) >= {"required_bytes", "capacity_bytes", "fits"}
    layer = obj["layers"][0]
    assert set(layer) >= {"name", "op", "flops", "bytes", "time_s", "energy_j", "bound",
                          "cycles"}
    # Training time counts forward, backward and the optimizer update.
    assert set(obj["time_by_phase_s"]) == {"forward", "backward", "optimizer"}
    assert obj["latency_s"] == pytest.approx(sum(obj["time_by_phase_s"].values()))
    assert obj["throughput_samples_per_s"] == pytest.approx(64 / obj["latency_s"])


@pytest.mark.parametrize("hw,precision", [("v100", "bf16"), ("tpu-v1", "bf16")])
def test_precision_the_device_cannot_run_is_one_line(capsys, hw, precision):
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", hw, "--precision", precision)
    assert code == 2 and precision in err and "Traceback" not in err


def test_simulate_every_class(capsys):
    for hw, precision in (("xeon-8480", "bf16"), ("tpu-v3", "bf16"), ("alveo-u250", "int8"),
                          ("edge-tpu", "int8")):
        code, out, err = run_cli(capsys, "simulate", "mobilenet_v2", "--hw", hw,
                                 "--precision", precision, "--json")
        assert code == 0, err
        obj = json.loads(out)
        assert obj["throughput_samples_per_s"] > 0 and obj["average_power_w"] > 0
