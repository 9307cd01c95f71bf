"""Scenario files: every built-in loads; bad files name file, field and value."""

import pytest

from accelsim.errors import AccelsimError, ConfigError
from accelsim.workload.scenario import load_scenario_file, resolve_workload, scenario_names

GOOD = """
model = "resnet18"
mode = "train"
batch_size = 32
precision = "bf16"
[input]
image_size = 64
[pipeline]
prefetch_batches = 0
"""


def test_builtin_scenarios_load():
    names = scenario_names()
    assert "resnet50-train" in names
    for name in names:
        sc = resolve_workload(name)
        assert sc.graph().ops


def test_good_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(GOOD)
    sc = load_scenario_file(f)
    assert (sc.name, sc.batch_size, sc.input, sc.pipeline.prefetch_batches) == (
        "mine", 32, {"image_size": 64}, 0)
    assert sc.graph().shapes["image"] == (3, 64, 64)


@pytest.mark.parametrize(
    "edit,field,value",
    [
        (("batch_size = 32", "batch_size = 0"), "batch_size", "0"),
        (("batch_size = 32", "batch_size = -4"), "batch_size", "-4"),
        (("batch_size = 32", 'batch_size = "32"'), "batch_size", "'32'"),
        (("batch_size = 32", "batch_size = true"), "batch_size", "True"),
        (('mode = "train"', 'mode = "fly"'), "mode", "'fly'"),
        (('precision = "bf16"', 'precision = "fp6"'), "precision", "'fp6'"),
        (("image_size = 64", "image_size = -1"), "input.image_size", "-1"),
        (("image_size = 64", "seq_len = 64"), "input.seq_len", "64"),
        (("prefetch_batches = 0", "prefetch_batches = -1"), "pipeline.prefetch_batches", "-1"),
        (("prefetch_batches = 0", "prefetch_workers = 1"), "pipeline.prefetch_workers", "1"),
        (('mode = "train"', 'mode = "train"\nbatchsize = 3'), "batchsize", "3"),
        (('model = "resnet18"\n', ""), "model", "None"),
    ],
)
def test_bad_files_name_file_field_and_value(tmp_path, edit, field, value):
    f = tmp_path / "bad.toml"
    f.write_text(GOOD.replace(*edit))
    with pytest.raises(ConfigError) as err:
        load_scenario_file(f)
    msg = str(err.value)
    assert str(f) in msg and f"'{field}'" in msg and value in msg


def test_unknown_workload_and_broken_toml(tmp_path):
    with pytest.raises(AccelsimError, match="unknown workload"):
        resolve_workload("resnet51")
    f = tmp_path / "broken.toml"
    f.write_text("model = ")
    with pytest.raises(AccelsimError, match="not valid TOML"):
        load_scenario_file(f)
