"""Op vocabulary: shape inference, its errors, and the cost table against closed forms."""

import math

import pytest

from accelsim.errors import ShapeError
from accelsim.workload.counts import FORMULAS, count_op
from accelsim.workload.graph import GraphBuilder
from accelsim.workload.ops import SPECS, OpKind, make_op
from accelsim.workload.tables import counts_table, layer_table, totals, unsupported_ops


def test_every_kind_has_shape_rule_and_formula():
    assert set(SPECS) == set(OpKind)
    assert set(FORMULAS) == set(OpKind) - {OpKind.UNMAPPED}  # reported, never costed


@pytest.mark.parametrize(
    "shape,attrs,expected",
    [
        ((3, 224, 224), dict(out_channels=64, kernel=7, stride=2, padding=3), (64, 112, 112)),
        ((32, 10, 12), dict(out_channels=32, kernel=3, padding=2, dilation=2, groups=32),
         (32, 10, 12)),
        ((8, 9, 9), dict(out_channels=4, kernel=(3, 1), stride=(2, 1)), (4, 4, 9)),
    ],
)
def test_conv2d_shapes(shape, attrs, expected):
    op = make_op("c", OpKind.CONV2D, ("x",), (shape,), attrs)
    assert op.output_shape == expected
    # Independent closed form: out = floor((H + 2p - d(k-1) - 1)/s) + 1.
    assert op.params == expected[0] * shape[0] // attrs.get("groups", 1) * math.prod(
        (attrs["kernel"],) * 2 if isinstance(attrs["kernel"], int) else attrs["kernel"]
    ) + expected[0]


def test_shape_errors_name_op_and_shapes():
    with pytest.raises(ShapeError, match=r"op 'bad' \(conv2d\).*\[\(6, 8, 8\)\].*groups"):
        make_op("bad", OpKind.CONV2D, ("x",), ((6, 8, 8),), dict(out_channels=4, kernel=3,
                                                                  groups=4))
    with pytest.raises(ShapeError, match=r"'mm'.*\(4, 5\), \(6, 7\)"):
        make_op("mm", OpKind.MATMUL, ("a", "b"), ((4, 5), (6, 7)), {})
    with pytest.raises(ShapeError, match="unknown attribute"):
        make_op("r", OpKind.RELU, ("x",), ((4,),), {"alpha": 1})
    with pytest.raises(ShapeError, match="missing attribute"):
        make_op("l", OpKind.LINEAR, ("x",), ((4,),), {})
    with pytest.raises(ShapeError, match="non-positive"):
        make_op("c", OpKind.CONV2D, ("x",), ((3, 2, 2),), dict(out_channels=4, kernel=5))
    with pytest.raises(ShapeError, match="do not broadcast"):
        make_op("a", OpKind.ADD, ("x", "y"), ((3, 4), (5, 4)), {})
    with pytest.raises(ShapeError, match="H divisible"):
        make_op("att", OpKind.ATTENTION, ("q", "k", "v"), ((6, 8, 4), (4, 8, 4), (4, 8, 4)), {})


def test_builder_rejects_unknown_tensor_and_duplicate_names():
    g = GraphBuilder("t")
    x = g.input("x", (4,))
    g.relu(x, name="r")
    with pytest.raises(ShapeError, match="unknown input"):
        g.relu("nope")
    with pytest.raises(ShapeError, match="used twice"):
        g.relu(x, name="r")


def test_conv_counts_match_naive_mac_count():
    # Count MACs with explicit loops over output positions and kernel taps.
    c, h, w, o, k, s, p, groups = 4, 7, 6, 6, 3, 2, 1, 2
    op = make_op("c", OpKind.CONV2D, ("x",), ((c, h, w),),
                 dict(out_channels=o, kernel=k, stride=s, padding=p, groups=groups, bias=False))
    _, oh, ow = op.output_shape
    macs = 0
    for _oc in range(o):
        for _y in range(oh):
            for _x in range(ow):
                macs += (c // groups) * k * k
    counts = count_op(op)
    assert counts.fwd_flops == 2 * macs
    assert counts.bwd_input_flops == 2 * macs and counts.bwd_weight_flops == 2 * macs
    assert counts.weight_elems == o * (c // groups) * k * k
    assert sum(gm.macs for gm in counts.gemms) == macs


def test_linear_and_attention_closed_forms():
    s, d, h, dh = 16, 32, 4, 8
    lin = count_op(make_op("l", OpKind.LINEAR, ("x",), ((s, d),), dict(out_features=3 * d)))
    assert lin.fwd_flops == 2 * s * d * 3 * d
    att = count_op(make_op("a", OpKind.ATTENTION, ("q", "k", "v"),
                           ((h, s, dh), (h, s, dh), (h, s, dh)), {}))
    # QK^T and PV: 2 * (2 * h * s * s * dh) plus the softmax on h*s*s scores.
    assert att.fwd_flops == 4 * h * s * s * dh + 5 * h * s * s


def test_layer_table_scales_with_batch_and_precision():
    g = GraphBuilder("t")
    x = g.input("x", (8,))
    g.linear(x, out_features=4, name="fc")
    graph = g.build()
    t1 = layer_table(graph, 1, "fp32").iloc[0]
    t8 = layer_table(graph, 8, "fp16").iloc[0]
    assert t8["flops"] == 8 * t1["flops"] == 8 * 2 * 8 * 4
    # bytes: (8 in + 4 out) per sample x batch + 36 weights, at 4 and 2 bytes.
    assert t1["bytes"] == (12 + 36) * 4
    assert t8["bytes"] == (12 * 8 + 36) * 2


def test_unsupported_kind_is_reported_not_free(monkeypatch):
    g = GraphBuilder("t")
    x = g.input("x", (8,))
    g.gelu(g.relu(x))
    graph = g.build()
    monkeypatch.delitem(FORMULAS, OpKind.GELU)
    from accelsim.workload import tables

    tables._tables.cache_clear()
    try:
        assert unsupported_ops(graph) == ["gelu0"]
        assert list(counts_table(graph)["name"]) == ["relu0"]
    finally:
        tables._tables.cache_clear()


def test_resnet_published_figures():
    from accelsim.workload.zoo import build_model

    r50 = totals(build_model("resnet50"))
    assert r50["params"] == 25_557_032  # torchvision resnet50
    assert r50["flops_per_sample"] / 2 == pytest.approx(4.1e9, rel=0.03)
    r18 = totals(build_model("resnet18"))
    assert r18["params"] == 11_689_512  # torchvision resnet18
    assert r18["flops_per_sample"] / 2 == pytest.approx(1.8e9, rel=0.03)


@pytest.mark.parametrize("size,k,s,p,expected", [
    (4, 1, 2, 0, 2),  # PyTorch: MaxPool2d(1, 2, ceil_mode=True) on 4x4 -> 2x2
    (5, 2, 3, 1, 2),  # the last window would start in the right padding: dropped
    (112, 3, 2, 0, 56),  # GoogLeNet's first pool
])
def test_pool_ceil_mode_matches_pytorch_rule(size, k, s, p, expected):
    op = make_op("p", OpKind.MAXPOOL2D, ("x",), ((1, size, size),),
                 dict(kernel=k, stride=s, padding=p, ceil_mode=True))
    assert op.output_shape == (1, expected, expected)


def test_new_activation_and_upsample_counts():
    # hardsigmoid: add, clamp (2), scale; hardswish one multiply more; leaky relu: scale, max.
    for kind, per in ((OpKind.HARDSIGMOID, 4), (OpKind.HARDSWISH, 5), (OpKind.LEAKY_RELU, 2)):
        c = count_op(make_op("a", kind, ("x",), ((8, 5, 5),), {}))
        assert c.fwd_flops == per * 200 and c.read_elems == c.write_elems == 200
    up = make_op("u", OpKind.UPSAMPLE, ("x",), ((8, 5, 6),), dict(scale_factor=2))
    assert up.output_shape == (8, 10, 12)
    c = count_op(up)
    # A copy: reads the input once, writes each element scale^2 times, no arithmetic.
    assert (c.fwd_flops, c.read_elems, c.write_elems) == (0.0, 240, 960)
    assert c.bwd_input_flops == 960 and c.weight_elems == 0


@pytest.mark.parametrize(("kind", "shape", "attrs", "match"), [
    (OpKind.LEAKY_RELU, (4,), dict(negative_slope=1.5), "negative_slope"),
    (OpKind.UPSAMPLE, (4, 2, 2), dict(scale_factor=1.5), "scale_factor"),
    (OpKind.UPSAMPLE, (4, 2, 2), dict(scale_factor=0), "scale_factor"),
    (OpKind.UPSAMPLE, (4,), {}, "spatial"),
])
def test_new_op_attribute_errors(kind, shape, attrs, match):
    with pytest.raises(ShapeError, match=match):
        make_op("o", kind, ("x",), (shape,), attrs)
