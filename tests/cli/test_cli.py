"""The command line, run as a user runs it: exit codes, JSON keys, one-line errors."""

import json
import subprocess
import sys

import pytest

from tests.helpers.cli import run_cli


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
    (("describe", "/no/such/file.toml"), "no such file"),
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
    from accelsim.profiles.devices import builtin_profile_names

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
                             "--mode", "train", "--precision", "bf16", "--steps", "4", "--json")
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
    # On the device, a training step counts forward, backward and the optimizer update.
    assert set(obj["time_by_phase_s"]) == {"forward", "backward", "optimizer"}
    device = obj["device_only"]
    assert device["latency_s"] == pytest.approx(sum(obj["time_by_phase_s"].values()))
    assert device["throughput_samples_per_s"] == pytest.approx(64 / device["latency_s"])
    # The pipeline can only add to the device's step time.
    assert obj["latency_s"] >= device["latency_s"] * (1 - 1e-9)
    for key in ("utilization", "stalls", "accelerator_utilization", "energy_breakdown_j"):
        assert key in obj


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


def test_serve_json_and_trace(capsys, tmp_path):
    trace = tmp_path / "serve.json"
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "t4", "--mode", "serve",
                             "--precision", "fp16", "--rate", "200", "--max-batch", "8",
                             "--max-wait-ms", "2", "--requests", "2000", "--trace", str(trace),
                             "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["workload"]["mode"] == "serve" and obj["hardware"]["name"] == "t4"
    assert obj["latency_p50_s"] <= obj["latency_p95_s"] <= obj["latency_p99_s"]
    assert obj["throughput_samples_per_s"] == pytest.approx(200, rel=0.1)  # below capacity
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)


def test_train_on_a_system_reports_pipeline(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet50-train", "--hw", "dgx-a100",
                             "--steps", "6", "--devices", "2", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["devices"] == 2 and obj["global_batch"] == 2 * 256
    assert obj["hardware"]["system"] == "dgx-a100"
    assert 0 <= obj["accelerator_utilization"] <= 1
    assert set(obj["stalls"]) == {"fetch", "prep", "transfer", "slowest_device",
                                  "communication"}


@pytest.mark.parametrize("args,needle", [
    (("--devices", "9"), "devices"),
    (("--prefetch", "-1"), "prefetch"),
    (("--prep-workers", "0"), "prep_workers"),
    (("--gpudirect", "--storage", "sata-ssd"), "gpudirect"),
])
def test_impossible_pipeline_settings_are_one_line(capsys, args, needle):
    code, _, err = run_cli(capsys, "simulate", "resnet50-train", "--hw", "dgx-a100",
                           "--steps", "2", *args)
    assert code == 2 and needle in err and "Traceback" not in err
