"""SqueezeNet 1.1 (Iandola et al. 2016, "SqueezeNet: AlexNet-level accuracy with 50x fewer
parameters and <0.5MB model size", arXiv:1602.07360; version 1.1 from the authors' repository,
github.com/forresti/SqueezeNet, SqueezeNet_v1.1), in torchvision's layout (`squeezenet1_1`):
convs with bias and ReLU, max-pools with ceil_mode, eight Fire modules (a 1x1 squeeze conv,
then 1x1 and 3x3 expand convs concatenated), and a 1x1 conv classifier averaged over the map.

Op names follow torchvision's module indices (`features.3.squeeze`, `classifier.1`).
Published: 1,235,496 params and 0.35 G multiply-adds at 224x224 (torchvision).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model

# torchvision's features list: squeeze, expand1x1, expand3x3 channels of each Fire; "M" a
# 3x3 stride-2 max-pool (ceil_mode).
_LAYOUT: tuple[tuple[int, int, int] | str, ...] = (
    "M", (16, 64, 64), (16, 64, 64), "M", (32, 128, 128), (32, 128, 128), "M",
    (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256),
)


def _conv_relu(g: GraphBuilder, x: str, out: int, k: int, name: str, act: str,
               stride: int = 1, padding: int = 0) -> str:
    y = g.conv2d(x, out_channels=out, kernel=k, stride=stride, padding=padding, name=name)
    return g.relu(y, name=act)


def _fire(g: GraphBuilder, x: str, squeeze: int, e1: int, e3: int) -> str:
    s = _conv_relu(g, x, squeeze, 1, "squeeze", "squeeze_activation")
    a = _conv_relu(g, s, e1, 1, "expand1x1", "expand1x1_activation")
    b = _conv_relu(g, s, e3, 3, "expand3x3", "expand3x3_activation", padding=1)
    return g.concat(a, b, axis=0, name="concat")


@model("squeezenet1_1")
def squeezenet1_1(image_size: int = 224, classes: int = 1000) -> Graph:
    g = GraphBuilder("squeezenet1_1", family="squeezenet")
    x = g.input("image", (3, image_size, image_size))
    x = _conv_relu(g, x, 64, 3, "features.0", "features.1", stride=2)
    for i, item in enumerate(_LAYOUT, start=2):
        if item == "M":
            x = g.maxpool2d(x, kernel=3, stride=2, ceil_mode=True, name=f"features.{i}")
        else:
            with g.scope(f"features.{i}"):
                x = _fire(g, x, *item)
    # NB: dropout (p = 0.5) before the classifier conv is an identity at inference.
    x = _conv_relu(g, x, classes, 1, "classifier.1", "classifier.2")
    g.global_avgpool(x, name="classifier.3")
    return g.build()
