"""MobileNetV2 and MobileNetV3-Large at width 1.0, in torchvision's layout.

MobileNetV2 (Sandler et al. 2018, "MobileNetV2: Inverted Residuals and Linear Bottlenecks",
arXiv:1801.04381, Table 2; torchvision `mobilenet_v2`): conv bias off, batchnorm after every
conv, ReLU6, no activation after the projecting 1x1 conv. Published: 3.4 M params and 300 M
multiply-adds at 224x224 in the paper (Table 4); 3,504,872 params and 0.30 G multiply-adds in
torchvision.

MobileNetV3-Large (Howard et al. 2019, "Searching for MobileNetV3", arXiv:1905.02244,
Table 1; torchvision `mobilenet_v3_large`): the same inverted residuals with 3x3 or 5x5
depthwise convs, ReLU or hard-swish, squeeze-excitation (ReLU, then a hard-sigmoid gate) in
some blocks, batchnorm eps 1e-3, and a 960 -> 1280 hard-swish linear layer before the
classifier. Published: 5,483,032 params and 0.22 G multiply-adds at 224x224 (torchvision);
5.4 M params and 219 M multiply-adds (the paper, Table 3).
"""

from __future__ import annotations

from collections.abc import Callable

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.resnet import conv_bn

# Table 2 of the paper: expansion t, output channels c, repeats n, first stride s.
V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1))
V2_STEM, V2_LAST = 32, 1280


def mbconv(g: GraphBuilder, x: str, hidden: int, out: int, k: int = 3, stride: int = 1,
           act: str = "relu6", se: Callable[[GraphBuilder, str], str] | None = None,
           eps: float = 1e-5, scope: str = "conv", taps: list[str] | None = None) -> str:
    """The inverted residual of MobileNetV2 / V3 and EfficientNet's MBConv: a 1x1 expansion to
    `hidden` channels (skipped when that is the input's), a k x k depthwise conv, `se` (a
    squeeze-excitation on the expanded tensor, or none), a 1x1 linear projection, and a skip
    where shapes allow. With `taps`, the expansion's output is appended to it (SSD's
    layer_15/expansion_output)."""
    cin = g.shape(x)[0]
    with g.scope(scope):
        y = x
        if hidden != cin:
            y = conv_bn(g, y, hidden, 1, name="expand", act=act, eps=eps)
        if taps is not None:
            taps.append(y)
        y = conv_bn(g, y, hidden, k, stride, groups=hidden, name="dw", act=act, eps=eps)
        if se is not None:
            y = se(g, y)
        y = conv_bn(g, y, out, 1, relu=False, name="project", eps=eps)  # linear bottleneck
    if stride == 1 and cin == out:
        # NB: EfficientNet's stochastic depth on the branch is an identity at inference.
        y = g.add(x, y, name="add")
    return y


def inverted_residual(g: GraphBuilder, x: str, out: int, stride: int, expand: int,
                      eps: float = 1e-5, taps: list[str] | None = None) -> str:
    """MobileNetV2's block: expansion `expand` x the input's channels, 3x3, ReLU6."""
    return mbconv(g, x, g.shape(x)[0] * expand, out, 3, stride, "relu6", None, eps, "conv",
                  taps)


@model("mobilenet_v2")
def mobilenet_v2(image_size: int = 224, classes: int = 1000) -> Graph:
    g = GraphBuilder("mobilenet_v2", family="mobilenet")
    x = g.input("image", (3, image_size, image_size))
    with g.scope("features.0"):
        x = conv_bn(g, x, V2_STEM, 3, 2, name="conv", act="relu6")
    i = 1
    for t, c, n, s in V2_SETTINGS:
        for r in range(n):
            with g.scope(f"features.{i}"):
                x = inverted_residual(g, x, c, s if r == 0 else 1, t)
            i += 1
    with g.scope(f"features.{i}"):
        x = conv_bn(g, x, V2_LAST, 1, name="conv", act="relu6")
    x = g.global_avgpool(x, name="avgpool")
    # NB: dropout (p = 0.2) before the classifier is an identity at inference and left out.
    g.linear(x, out_features=classes, name="classifier")
    return g.build()


# ---- MobileNetV3-Large ---------------------------------------------------------------------


def make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's `_make_divisible` (from the TensorFlow models): the nearest multiple of
    `divisor` at least `divisor`, never more than 10% below `v`."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def squeeze_excitation(g: GraphBuilder, x: str, squeeze: int, act: str = "relu",
                       gate: str = "sigmoid", name: str = "se") -> str:
    """Hu et al. 2018's squeeze-excitation, as torchvision's `SqueezeExcitation`: global
    average pool, 1x1 conv (bias) to `squeeze`, `act`, 1x1 conv (bias) back, `gate`, and the
    input scaled per channel (a broadcast multiply)."""
    c = g.shape(x)[0]
    with g.scope(name):
        s = g.global_avgpool(x, name="avgpool")
        s = g.reshape(s, shape=(c, 1, 1), name="view")  # adaptive_avg_pool2d keeps 1x1 dims
        s = g.node(act, g.conv2d(s, out_channels=squeeze, kernel=1, name="fc1"), name=act)
        s = g.node(gate, g.conv2d(s, out_channels=c, kernel=1, name="fc2"), name=gate)
        return g.mul(x, s, name="scale")


# torchvision's bneck_conf rows (Table 1 of the paper): kernel, expanded channels, output
# channels, squeeze-excitation, activation ("RE" ReLU, "HS" hard-swish), stride.
_V3_LARGE = ((3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2),
             (3, 72, 24, False, "RE", 1), (5, 72, 40, True, "RE", 2),
             (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
             (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1),
             (3, 184, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
             (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
             (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1),
             (5, 960, 160, True, "HS", 1))
_V3_EPS = 1e-3  # torchvision: BatchNorm2d(eps=0.001, momentum=0.01)


def _v3_block(g: GraphBuilder, x: str, k: int, hidden: int, out: int, se: bool, nl: str,
              stride: int) -> str:
    def excite(g: GraphBuilder, y: str) -> str:
        return squeeze_excitation(g, y, make_divisible(hidden // 4), gate="hardsigmoid")

    return mbconv(g, x, hidden, out, k, stride, "hardswish" if nl == "HS" else "relu",
                  excite if se else None, _V3_EPS, "block")


@model("mobilenet_v3_large")
def mobilenet_v3_large(image_size: int = 224, classes: int = 1000) -> Graph:
    g = GraphBuilder("mobilenet_v3_large", family="mobilenet")
    x = g.input("image", (3, image_size, image_size))
    with g.scope("features.0"):
        x = conv_bn(g, x, 16, 3, 2, name="conv", act="hardswish", eps=_V3_EPS)
    for i, row in enumerate(_V3_LARGE, start=1):
        with g.scope(f"features.{i}"):
            x = _v3_block(g, x, *row)
    with g.scope(f"features.{len(_V3_LARGE) + 1}"):
        x = conv_bn(g, x, 6 * g.shape(x)[0], 1, name="conv", act="hardswish", eps=_V3_EPS)
    x = g.global_avgpool(x, name="avgpool")
    x = g.hardswish(g.linear(x, out_features=1280, name="classifier.0"), name="classifier.1")
    # NB: dropout (p = 0.2, classifier.2) is an identity at inference and left out.
    g.linear(x, out_features=classes, name="classifier.3")
    return g.build()
