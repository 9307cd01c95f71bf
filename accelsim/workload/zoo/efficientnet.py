"""EfficientNet-B0 (Tan & Le 2019, "EfficientNet: Rethinking Model Scaling for Convolutional
Neural Networks", arXiv:1905.11946, Table 1), in torchvision's layout (`efficientnet_b0`,
ported from timm's weights): MBConv blocks (1x1 expansion, a 3x3 or 5x5 depthwise conv,
squeeze-excitation to a quarter of the block's input channels with SiLU and a sigmoid gate, a
linear 1x1 projection, a skip where shapes allow), SiLU everywhere, batchnorm eps 1e-5, a
1x1 conv to 1280 channels before the classifier.

Published: 5,288,548 params and 0.39 G multiply-adds at 224x224 (torchvision); 5.3 M params
and 0.39 B FLOPs (multiply-adds) in the paper, Table 2.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.mobilenet import make_divisible, mbconv, squeeze_excitation
from accelsim.workload.zoo.resnet import conv_bn

# Table 1 (torchvision's bneck_conf at width and depth 1.0): expansion, kernel, first stride,
# input channels, output channels, layers.
_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
       (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))
_LAST = 1280


def _mbconv(g: GraphBuilder, x: str, expand: int, k: int, stride: int, out: int) -> str:
    cin = g.shape(x)[0]

    def excite(g: GraphBuilder, y: str) -> str:  # to a quarter of the block's input channels
        return squeeze_excitation(g, y, max(1, cin // 4), act="silu", gate="sigmoid")

    return mbconv(g, x, make_divisible(cin * expand), out, k, stride, "silu", excite,
                  scope="block")


@model("efficientnet_b0")
def efficientnet_b0(image_size: int = 224, classes: int = 1000) -> Graph:
    g = GraphBuilder("efficientnet_b0", family="efficientnet")
    x = g.input("image", (3, image_size, image_size))
    with g.scope("features.0"):
        x = conv_bn(g, x, _B0[0][3], 3, 2, name="conv", act="silu")
    for stage, (expand, k, stride, _, out, layers) in enumerate(_B0, start=1):
        for j in range(layers):
            with g.scope(f"features.{stage}.{j}"):
                x = _mbconv(g, x, expand, k, stride if j == 0 else 1, out)
    with g.scope(f"features.{len(_B0) + 1}"):
        x = conv_bn(g, x, _LAST, 1, name="conv", act="silu")
    x = g.global_avgpool(x, name="avgpool")
    # NB: dropout (p = 0.2, classifier.0) is an identity at inference and left out.
    g.linear(x, out_features=classes, name="classifier.1")
    return g.build()
