"""MobileNetV4 Conv-Small, Conv-Medium and Conv-Large (Qin et al. 2024, "MobileNetV4 -
Universal Models for the Mobile Ecosystem", arXiv:2404.10518, its architecture tables), in
the layout of the TF model garden's `official/vision/modeling/backbones/mobilenet.py`
(`MNV4ConvSmall_BLOCK_SPECS`, `_mnv4_conv_medium_block_specs`, `MNV4ConvLarge_BLOCK_SPECS`;
timm's `mobilenetv4_conv_*` are the same). Conv-Large is MLPerf Mobile's image-classification
model from v4.0 on (github.com/mlcommons/mobile_open `vision/mobilenetV4/README.md`).

Blocks, batchnorm (eps 1e-3) and ReLU after every conv but the linear ones:

- "convbn": a full k x k conv;
- "fused_ib": a k x k full conv to 4x the input channels at the block's stride, then a
  linear 1x1 projection;
- "uib", the Universal Inverted Bottleneck: an optional depthwise conv on the input
  (`start` kernel, batchnorm, no activation), a 1x1 expansion to
  make_divisible(expansion x input channels), an optional depthwise conv on the expanded
  tensor (`middle` kernel; it carries the block's stride), a linear 1x1 projection, and a
  skip where shapes allow. Start only is the ConvNext-like block, middle only the inverted
  bottleneck, both the ExtraDW block, neither the FFN;
- head: 1x1 conv to 960, global average pool, 1x1 conv (batchnorm, ReLU) to 1280, and a
  linear classifier to 1000 classes.

Published: Conv-S 3.8 M params and 0.2 G MACs at 224x224 (the paper's ImageNet results, and
timm's model card `timm/mobilenetv4_conv_small.e2400_r224_in1k` on huggingface.co); Conv-M
9.7 M params and 1.1 G MACs at 256x256, its training size and the default here (the card
`timm/mobilenetv4_conv_medium.e500_r256_in1k`); Conv-L 32.59 M params (the results table of
the card `timm/mobilenetv4_conv_large.e600_r384_in1k`) and 6.4 G MACs at 384x384, its
training size and the default here (that card).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.mobilenet import make_divisible
from accelsim.workload.zoo.resnet import conv_bn

_EPS = 1e-3  # the model garden's norm_epsilon
_HEAD, _LAST = 960, 1280

# Rows: ("convbn", kernel, stride, out), ("fused_ib", kernel, stride, out) or
# ("uib", start kernel, middle kernel, stride, out, expansion); 0 means no such conv.
Row = tuple[str, int, int, int] | tuple[str, int, int, int, int, float]
CONV_SMALL: tuple[Row, ...] = (
    ("convbn", 3, 2, 32), ("convbn", 3, 2, 32), ("convbn", 1, 1, 32),
    ("convbn", 3, 2, 96), ("convbn", 1, 1, 64),
    ("uib", 5, 5, 2, 96, 3.0), ("uib", 0, 3, 1, 96, 2.0), ("uib", 0, 3, 1, 96, 2.0),
    ("uib", 0, 3, 1, 96, 2.0), ("uib", 0, 3, 1, 96, 2.0), ("uib", 3, 0, 1, 96, 4.0),
    ("uib", 3, 3, 2, 128, 6.0), ("uib", 5, 5, 1, 128, 4.0), ("uib", 0, 5, 1, 128, 4.0),
    ("uib", 0, 5, 1, 128, 3.0), ("uib", 0, 3, 1, 128, 4.0), ("uib", 0, 3, 1, 128, 4.0),
)
CONV_MEDIUM: tuple[Row, ...] = (
    ("convbn", 3, 2, 32), ("fused_ib", 3, 2, 48),
    ("uib", 3, 5, 2, 80, 4.0), ("uib", 3, 3, 1, 80, 2.0),
    ("uib", 3, 5, 2, 160, 6.0), ("uib", 3, 3, 1, 160, 4.0), ("uib", 3, 3, 1, 160, 4.0),
    ("uib", 3, 5, 1, 160, 4.0), ("uib", 3, 3, 1, 160, 4.0), ("uib", 3, 0, 1, 160, 4.0),
    ("uib", 0, 0, 1, 160, 2.0), ("uib", 3, 0, 1, 160, 4.0),
    ("uib", 5, 5, 2, 256, 6.0), ("uib", 5, 5, 1, 256, 4.0), ("uib", 3, 5, 1, 256, 4.0),
    ("uib", 3, 5, 1, 256, 4.0), ("uib", 0, 0, 1, 256, 4.0), ("uib", 3, 0, 1, 256, 4.0),
    ("uib", 3, 5, 1, 256, 2.0), ("uib", 5, 5, 1, 256, 4.0), ("uib", 0, 0, 1, 256, 4.0),
    ("uib", 0, 0, 1, 256, 4.0), ("uib", 5, 0, 1, 256, 2.0),
)
CONV_LARGE: tuple[Row, ...] = (
    ("convbn", 3, 2, 24), ("fused_ib", 3, 2, 48),
    ("uib", 3, 5, 2, 96, 4.0), ("uib", 3, 3, 1, 96, 4.0),
    ("uib", 3, 5, 2, 192, 4.0), *(("uib", 3, 3, 1, 192, 4.0),) * 3, ("uib", 3, 5, 1, 192, 4.0),
    *(("uib", 5, 3, 1, 192, 4.0),) * 5, ("uib", 3, 0, 1, 192, 4.0),
    ("uib", 5, 5, 2, 512, 4.0), *(("uib", 5, 5, 1, 512, 4.0),) * 3, ("uib", 5, 0, 1, 512, 4.0),
    ("uib", 5, 3, 1, 512, 4.0), *(("uib", 5, 0, 1, 512, 4.0),) * 2, ("uib", 5, 3, 1, 512, 4.0),
    ("uib", 5, 5, 1, 512, 4.0), *(("uib", 5, 0, 1, 512, 4.0),) * 3,
)


def uib(g: GraphBuilder, x: str, start: int, middle: int, stride: int, out: int,
        expand: float) -> str:
    """The Universal Inverted Bottleneck (see the module docstring)."""
    cin = g.shape(x)[0]
    y = x
    if start:
        # NB: the stride moves to the start conv only when there is no middle one.
        y = conv_bn(g, y, cin, start, 1 if middle else stride, relu=False, groups=cin,
                    name="start_dw", eps=_EPS)
    hidden = make_divisible(cin * expand)
    y = conv_bn(g, y, hidden, 1, name="expand", eps=_EPS)
    if middle:
        y = conv_bn(g, y, hidden, middle, stride, groups=hidden, name="middle_dw", eps=_EPS)
    y = conv_bn(g, y, out, 1, relu=False, name="project", eps=_EPS)
    if stride == 1 and cin == out:
        y = g.add(x, y, name="add")
    return y


def _row(g: GraphBuilder, x: str, row: Row) -> str:
    if row[0] == "convbn":
        _, k, s, out = row
        return conv_bn(g, x, out, k, s, name="conv", eps=_EPS)
    if row[0] == "fused_ib":
        _, k, s, out = row
        y = conv_bn(g, x, 4 * g.shape(x)[0], k, s, name="fused", eps=_EPS)
        return conv_bn(g, y, out, 1, relu=False, name="project", eps=_EPS)
    _, start, middle, s, out, expand = row
    return uib(g, x, start, middle, s, out, expand)


def _mnv4(name: str, rows: tuple[Row, ...], image_size: int, classes: int) -> Graph:
    g = GraphBuilder(name, family="mobilenet")
    x = g.input("image", (3, image_size, image_size))
    for i, row in enumerate(rows):
        with g.scope(f"blocks.{i}"):
            x = _row(g, x, row)
    x = conv_bn(g, x, _HEAD, 1, name="conv_head", eps=_EPS)
    x = g.global_avgpool(x, name="global_pool")
    x = g.reshape(x, shape=(_HEAD, 1, 1), name="view")
    x = conv_bn(g, x, _LAST, 1, name="conv_last", eps=_EPS)
    x = g.reshape(x, shape=(_LAST,), name="flatten")
    g.linear(x, out_features=classes, name="classifier")
    return g.build()


@model("mobilenet_v4_conv_small")
def mobilenet_v4_conv_small(image_size: int = 224, classes: int = 1000) -> Graph:
    return _mnv4("mobilenet_v4_conv_small", CONV_SMALL, image_size, classes)


@model("mobilenet_v4_conv_medium")
def mobilenet_v4_conv_medium(image_size: int = 256, classes: int = 1000) -> Graph:
    return _mnv4("mobilenet_v4_conv_medium", CONV_MEDIUM, image_size, classes)


@model("mobilenet_v4_conv_large")
def mobilenet_v4_conv_large(image_size: int = 384, classes: int = 1000) -> Graph:
    return _mnv4("mobilenet_v4_conv_large", CONV_LARGE, image_size, classes)
