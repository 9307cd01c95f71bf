"""ONNX import: models built with `onnx.helper` (tests/helpers/onnx_builders.py) and two exported by
PyTorch (tests/fixtures/) against the zoo's counts, closed forms and ONNX's own reference
evaluator; unsupported nodes, symbolic dimensions, bad files and the commands on a .onnx path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from accelsim.devices.estimate import estimate
from accelsim.errors import AccelsimError
from accelsim.kernels.execute import make_inputs, run_graph
from accelsim.profiles.devices import load_profile
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.importers.onnx import read_graph
from accelsim.workload.sources import model_graph
from accelsim.workload.tables import counts_table, layer_table, totals, unsupported_ops
from accelsim.workload.zoo import build_model
from accelsim.workload.zoo.resnet import conv_bn
from accelsim.workload.zoo.transformer import attention_block, gelu_mlp
from tests.helpers import onnx_builders as b
from tests.helpers.cli import run_cli
from tests.helpers.paths import FIXTURES


def save(tmp_path: Path, model: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, path)
    return path


def load(tmp_path: Path, model: onnx.ModelProto, **knobs: int) -> Graph:
    return read_graph(save(tmp_path, model), **knobs)


def zoo_part(model: str, prefix: str, **knobs: int) -> tuple[int, float]:
    """Parameters and forward FLOPs per sample of the zoo ops whose names start with prefix."""
    c = counts_table(build_model(model, **knobs))
    c = c[c["name"].str.startswith(prefix)]
    return int(c["params"].sum()), float(c["fwd_flops"].sum())


def counts(g: Graph) -> tuple[int, float]:
    t = totals(g)
    return t["params"], t["flops_per_sample"]


def kinds(g: Graph) -> list[str]:
    return [op.kind.value for op in g.ops]


def against_reference(g: Graph, model: onnx.ModelProto, rel: float, batch: int = 2) -> None:
    """Our numpy kernels with the file's initialisers vs onnx.reference on the same inputs."""
    ours = run_graph(g, batch, "fp32")[g.outputs[0]]
    ref = ReferenceEvaluator(model).run(None, make_inputs(g, batch))[0]
    assert ours.shape == ref.shape
    assert np.linalg.norm(ours - ref) <= rel * np.linalg.norm(ref)


# ---- the zoo's equivalents ---------------------------------------------------------------


@pytest.mark.parametrize(("c_in", "width", "stride", "prefix"), [
    (64, 64, 1, "layer1.0."), (64, 128, 2, "layer2.0.")])
def test_resnet_basic_block_matches_the_zoo(tmp_path, c_in, width, stride, prefix) -> None:
    g = load(tmp_path, b.basic_block(c_in, width, stride, hw=56))
    assert counts(g) == zoo_part("resnet18", prefix)
    if stride == 1:  # two 3x3 convs and two batchnorms: 2 (9 C^2) + 4 C
        assert g.params == 2 * 9 * width**2 + 4 * width
    assert unsupported_ops(g) == [] and g.ops[0].attrs["padding"] == (1, 1)


def test_mnist_mlp_matches_the_zoo(tmp_path) -> None:
    g = load(tmp_path, b.mnist_mlp())
    assert counts(g) == counts(build_model("mlp")) and g.params == 669_706
    assert kinds(g) == ["reshape", "linear", "relu", "linear", "relu", "linear"]


@pytest.mark.parametrize("erf_gelu", [True, False])
@pytest.mark.parametrize("seq_len", [None, 64])
def test_bert_layer_matches_the_zoo(tmp_path, erf_gelu, seq_len) -> None:
    knobs = {"seq_len": seq_len} if seq_len else {}
    g = load(tmp_path, b.bert_layer(erf_gelu=erf_gelu), **knobs)
    assert counts(g) == zoo_part("bert_base", "encoder.layer.0.", **knobs)
    assert g.inputs["hidden"][0] == (seq_len or 128, 768)
    # Q K^T, the scale, softmax and P V fold into one attention op; the GELU chain into gelu.
    assert kinds(g).count("attention") == 1 and kinds(g).count("gelu") == 1
    assert not {"matmul", "bmm", "softmax", "const_binary"} & set(kinds(g))
    assert kinds(g).count("transpose") == 4  # q, k, v into heads and back, as in the zoo


def test_bert_layer_with_a_padding_mask_folds_and_says_so(tmp_path) -> None:
    g = load(tmp_path, b.bert_layer(d=64, heads=4, padding_mask=True), seq_len=16)
    plain = load(tmp_path, b.bert_layer(d=64, heads=4), seq_len=16)
    assert kinds(g).count("attention") == 1 and "softmax" not in kinds(g)
    assert any("mask is not applied" in note for note in g.meta["notes"])
    # the mask's own ops (reshape, two constant operands on S elements) remain, costed
    assert g.params == plain.params
    assert totals(g)["flops_per_sample"] == totals(plain)["flops_per_sample"] + 2 * 16
    assert g.inputs["mask"] == ((16,), "index")


def test_gpt_block_is_causal_and_ties_the_lm_head(tmp_path) -> None:
    d, vocab, seq = 64, 100, 16
    g = load(tmp_path, b.gpt_block(d=d, heads=4, seq=seq, vocab=vocab))
    (att,) = [op for op in g.ops if op.kind.value == "attention"]
    head = g.ops[-1]
    assert att.attrs["causal"] is True
    assert head.kind.value == "linear" and head.attrs["tied_to"] == g.ops[0].name
    # the table once, q/k/v/o and the FFN with biases, three layernorms
    assert g.params == vocab * d + 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) \
        + 3 * 2 * d
    assert g.inputs["ids"] == ((seq,), "index")


def test_torch_bert_layer_matches_zoo_pieces() -> None:
    """A BertLayer exported by PyTorch (Shape/Gather/Concat reshapes, dynamic batch and
    sequence) maps onto the ops the zoo's BERT builds from the same pieces."""
    path = FIXTURES / "torch_bert_layer.onnx"
    g = read_graph(path, seq_len=16)
    z = GraphBuilder("zoo")
    x = z.input("hidden", (16, 32))
    x = z.layernorm(z.add(x, attention_block(z, x, 4)), eps=1e-12)
    z.layernorm(z.add(x, gelu_mlp(z, x, 128)), eps=1e-12)
    assert counts(g) == counts(z.build()) and unsupported_ops(g) == []
    assert g.params == 4 * (32 * 32 + 32) + 2 * 32 * 128 + 128 + 32 + 2 * 2 * 32
    against_reference(g, onnx.load(path), 2e-3)  # NB: erf GELU vs the kernels' tanh form


def test_torch_resnet_block_matches_zoo_pieces() -> None:
    path = FIXTURES / "torch_resnet_block.onnx"
    g = read_graph(path)
    z = GraphBuilder("zoo")
    x = z.relu(conv_bn(z, z.input("image", (3, 32, 32)), 16, 3, relu=False, name="stem"))
    y = conv_bn(z, conv_bn(z, x, 32, 3, 2, name="c1"), 32, 3, relu=False, name="c2")
    x = z.relu(z.add(y, conv_bn(z, x, 32, 1, 2, relu=False, name="down")))
    z.linear(z.global_avgpool(x), out_features=10)
    assert counts(g) == counts(z.build()) and unsupported_ops(g) == []
    against_reference(g, onnx.load(path), 1e-5)


def test_torch_export_when_torch_is_installed(tmp_path) -> None:
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("export", FIXTURES / "export_torch_onnx.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in ("torch_bert_layer.onnx", "torch_resnet_block.onnx"):
        assert counts(read_graph(tmp_path / name)) == counts(read_graph(FIXTURES / name))


# ---- weights, execution ------------------------------------------------------------------


@pytest.mark.parametrize(("build", "rel"), [
    (b.tiny_cnn, 1e-5), (b.mnist_mlp, 1e-5), (lambda: b.basic_block(8, 16, 2, 8), 1e-5),
    (lambda: b.bert_layer(d=32, heads=4, erf_gelu=False), 1e-5),
    (lambda: b.gpt_block(d=32, heads=4, seq=8, vocab=50), 2e-3)])  # erf GELU: NB tanh form
def test_execution_with_the_initialisers_matches_onnx_reference(tmp_path, build, rel) -> None:
    model = build()
    knobs = {"seq_len": 8} if "hidden" in [i.name for i in model.graph.input] else {}
    against_reference(load(tmp_path, model, **knobs), model, rel)


def test_zero_weights_give_zero_outputs(tmp_path, capsys) -> None:
    path = save(tmp_path, b.tiny_cnn(zero=True))
    (out,) = run_graph(read_graph(path), 4, "fp32").values()
    assert out.shape == (4, 10) and not out.any()
    code, text, err = run_cli(capsys, "describe", str(path), "--execute", "--batch", "2",
                              "--precision", "bf16", "--json")
    assert code == 0, err
    assert json.loads(text)["numerics"]["output_relative_error"] == 0.0


# ---- unsupported nodes, dimensions -------------------------------------------------------


def test_unmapped_nodes_are_listed_and_not_costed(tmp_path, capsys) -> None:
    path = save(tmp_path, b.with_unsupported())
    g = read_graph(path)
    listed = unsupported_ops(g)
    assert [n.split("[")[1] for n in listed] == ["LeakyRelu]", "NonMaxSuppression]"]
    assert g.meta["unmapped"] == {"LeakyRelu": 1, "NonMaxSuppression": 1}
    assert totals(g)["flops_per_sample"] == 10 * (1 + 4)  # relu and sigmoid only
    assert g.shapes[g.ops[2].name] == (1, 10)  # the graph goes on past LeakyRelu
    est = estimate(g, load_profile("a100"), batch=1, precision="fp32")
    assert est.unsupported_ops == listed and any("not costed" in n for n in est.notes)
    code, out, _ = run_cli(capsys, "describe", str(path))
    assert code == 0 and "unsupported ops (not costed)" in out and "NonMaxSuppression" in out
    code, _, err = run_cli(capsys, "describe", str(path), "--execute")
    assert code == 2 and "LeakyRelu" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("batch", ["N", 1, 4])
def test_symbolic_or_fixed_batch_gives_one_per_sample_graph(tmp_path, batch) -> None:
    g = load(tmp_path, b.tiny_cnn(batch=batch))
    assert g.inputs["image"] == ((3, 16, 16), "float")
    assert counts(g) == counts(load(tmp_path, b.tiny_cnn()))
    assert layer_table(g, 8, "fp32")["flops"].sum() == 8 * totals(g)["flops_per_sample"]


def test_symbolic_dimension_errors(tmp_path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "feat"])
    node = helper.make_node("Relu", ["x"], ["y"])
    model = helper.make_model(helper.make_graph([node], "g", [x], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, "feat"])]))
    with pytest.raises(AccelsimError, match="dimension 2 \\('feat'\\) is symbolic"):
        load(tmp_path, model)
    with pytest.raises(AccelsimError, match="seq_len given, but the model has no symbolic"):
        load(tmp_path, b.tiny_cnn(), seq_len=64)


def test_a_reshape_across_the_batch_is_refused(tmp_path) -> None:
    n = b.Net()
    y = n.op("Reshape", "hidden", n.init("s", np.array([-1, 768], np.int64)))
    inp = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["N", 16, 768])
    with pytest.raises(AccelsimError, match="across the batch"):
        load(tmp_path, n.model([inp], [y]))


# ---- bad files and the commands ----------------------------------------------------------


def _truncated(tmp_path: Path) -> Path:
    data = save(tmp_path, b.tiny_cnn(), "whole.onnx").read_bytes()
    (tmp_path / "m.onnx").write_bytes(data[: len(data) // 2])
    return tmp_path / "m.onnx"


@pytest.mark.parametrize(("make", "needle"), [
    (lambda p: (p / "m.onnx").write_text("not a model\n"), "not an ONNX model"),
    (lambda p: (p / "m.onnx").write_bytes(bytes(range(256)) * 8), "not an ONNX model"),
    (lambda p: (p / "m.onnx").write_bytes(b""), "not an ONNX model"),
    (_truncated, "not an ONNX model"),
    (lambda p: (p / "m.onnx").mkdir(), "is a directory"),
    (lambda p: None, "cannot read the model file"),
])
def test_bad_files_give_one_line(tmp_path, capsys, make, needle) -> None:
    make(tmp_path)
    code, _, err = run_cli(capsys, "simulate", str(tmp_path / "m.onnx"), "--hw", "a100")
    assert code == 2 and needle in err and "m.onnx" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_invalid_graph_gives_one_line(tmp_path, capsys) -> None:
    model = b.tiny_cnn()
    model.graph.node[0].input[0] = "nowhere"
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    code, _, err = run_cli(capsys, "describe", str(path))
    assert code == 2 and "invalid ONNX model" in err and len(err.strip().splitlines()) == 1


def test_simulate_compare_sweep_on_an_onnx_path(tmp_path, capsys) -> None:
    path = str(save(tmp_path, b.tiny_cnn()))
    code, out, err = run_cli(capsys, "simulate", path, "--hw", "a100", "--batch", "8", "--json")
    assert code == 0, err
    obj = json.loads(out)
    g = model_graph(path)
    assert obj["workload"]["params"] == g.params == 1586
    assert obj["workload"]["flops_per_sample"] == totals(g)["flops_per_sample"]
    assert obj["unsupported_ops"] == []
    code, out, err = run_cli(capsys, "compare", path, "--hw", "a100,t4", "--batch", "4")
    assert code == 0 and "a100" in out and "t4" in out, err
    code, out, err = run_cli(capsys, "sweep", path, "--hw", "a100", "--batch", "1,2,4")
    assert code == 0, err
    assert len([line for line in out.splitlines() if line.strip()[:1].isdigit()]) == 3
    report = tmp_path / "r.html"
    code, _, err = run_cli(capsys, "report", path, "--hw", "a100", "--out", str(report))
    assert code == 0 and "conv_2" in report.read_text(), err


def test_sequence_knob_sweeps(tmp_path, capsys) -> None:
    path = str(save(tmp_path, b.bert_layer(d=64, heads=4)))
    code, out, err = run_cli(capsys, "sweep", path, "--hw", "a100", "--set",
                             "seq_len=16,32", "--json")
    assert code == 0, err
    points = json.loads(out)["points"]
    assert [p["seq_len"] for p in points] == [16, 32]
    assert points[1]["required_bytes"] > points[0]["required_bytes"]
    f16, f32 = (totals(model_graph(path, seq_len=s))["flops_per_sample"] for s in (16, 32))
    assert f32 > 2 * f16  # linear layers scale with S, the attention scores with S^2


def test_execute_imports_the_file_once_per_modification(tmp_path, monkeypatch):
    # --execute reads the weights on every forward pass: one import must serve them all, and
    # an edited file must be imported again.
    import os

    from accelsim.kernels.execute import time_graph
    from accelsim.workload.importers import onnx as importer

    loads = []
    real_load = importer._load
    monkeypatch.setattr(importer, "_load", lambda path: loads.append(path) or real_load(path))
    importer._cached_import.cache_clear()
    path = save(tmp_path, b.mnist_mlp(hidden=32))
    graph = model_graph(str(path))
    time_graph(graph, 2, "fp32", repeats=3)
    assert len(loads) == 1
    weights = importer.read_weights(path)
    assert all(not a.flags.writeable for p in weights.values() for a in p.values())
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    importer.read_weights(path)
    assert len(loads) == 2
