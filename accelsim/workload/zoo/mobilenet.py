"""MobileNetV2 at width 1.0 (Sandler et al. 2018, "MobileNetV2: Inverted Residuals and Linear
Bottlenecks", arXiv:1801.04381, Table 2), in torchvision's layout (`mobilenet_v2`: conv bias
off, batchnorm after every conv, ReLU6, no activation after the projecting 1x1 conv).

Published: 3.4 M params and 300 M multiply-adds at 224x224 in the paper (Table 4);
3,504,872 params and 0.30 G multiply-adds in torchvision.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.resnet import conv_bn

# Table 2 of the paper: expansion t, output channels c, repeats n, first stride s.
_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1))
_STEM, _LAST = 32, 1280


def _inverted_residual(g: GraphBuilder, x: str, out: int, stride: int, expand: int) -> str:
    """1x1 expand (skipped when t = 1) -> 3x3 depthwise -> 1x1 linear projection (+ skip)."""
    cin = g.shape(x)[0]
    hidden = cin * expand
    with g.scope("conv"):
        y = x
        if expand != 1:
            y = conv_bn(g, y, hidden, 1, name="expand", act="relu6")
        y = conv_bn(g, y, hidden, 3, stride, groups=hidden, name="dw", act="relu6")
        y = conv_bn(g, y, out, 1, relu=False, name="project")  # linear bottleneck
    if stride == 1 and cin == out:
        y = g.add(x, y, name="add")
    return y


@model("mobilenet_v2")
def mobilenet_v2(image_size: int = 224, classes: int = 1000) -> Graph:
    g = GraphBuilder("mobilenet_v2", family="mobilenet")
    x = g.input("image", (3, image_size, image_size))
    with g.scope("features.0"):
        x = conv_bn(g, x, _STEM, 3, 2, name="conv", act="relu6")
    i = 1
    for t, c, n, s in _SETTINGS:
        for r in range(n):
            with g.scope(f"features.{i}"):
                x = _inverted_residual(g, x, c, s if r == 0 else 1, t)
            i += 1
    with g.scope(f"features.{i}"):
        x = conv_bn(g, x, _LAST, 1, name="conv", act="relu6")
    x = g.global_avgpool(x, name="avgpool")
    # NB: dropout (p = 0.2) before the classifier is an identity at inference and left out.
    g.linear(x, out_features=classes, name="classifier")
    return g.build()
