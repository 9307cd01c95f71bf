"""DenseNet-121 (Huang et al. 2017, "Densely Connected Convolutional Networks",
arXiv:1608.06993, Table 1: DenseNet-BC, growth rate 32, blocks of 6, 12, 24 and 16 layers), in
torchvision's layout (`densenet121`): pre-activation layers (batchnorm -> ReLU -> conv, convs
without bias), each a 1x1 bottleneck to 4 x 32 channels then a 3x3 conv to 32, its output
concatenated to its block's running features; transitions halve the channels (1x1 conv) and
the map (2x2 average pool); a final batchnorm and ReLU before the classifier.

Published: 7,978,856 params and 2.83 G multiply-adds at 224x224 (torchvision).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model

_GROWTH, _BN_SIZE, _INIT = 32, 4, 64
_BLOCKS_121 = (6, 12, 24, 16)


def _bn_relu_conv(g: GraphBuilder, x: str, out: int, k: int, i: int) -> str:
    y = g.relu(g.batchnorm(x, name=f"norm{i}"), name=f"relu{i}")
    return g.conv2d(y, out_channels=out, kernel=k, padding=k // 2, bias=False, name=f"conv{i}")


def _dense_block(g: GraphBuilder, x: str, layers: int) -> str:
    for j in range(1, layers + 1):
        with g.scope(f"denselayer{j}"):
            y = _bn_relu_conv(g, x, _BN_SIZE * _GROWTH, 1, 1)
            y = _bn_relu_conv(g, y, _GROWTH, 3, 2)
            # NB: torchvision concatenates all earlier outputs before each layer (and once more
            # for the block's output); one concat of the running features with the new ones
            # per layer moves the same elements but one copy of the block's input.
            x = g.concat(x, y, axis=0, name="concat")
    return x


def _densenet(name: str, blocks: tuple[int, ...], image_size: int, classes: int) -> Graph:
    g = GraphBuilder(name, family="densenet")
    x = g.input("image", (3, image_size, image_size))
    with g.scope("features"):
        x = g.conv2d(x, out_channels=_INIT, kernel=7, stride=2, padding=3, bias=False,
                     name="conv0")
        x = g.relu(g.batchnorm(x, name="norm0"), name="relu0")
        x = g.maxpool2d(x, kernel=3, stride=2, padding=1, name="pool0")
        for b, layers in enumerate(blocks, start=1):
            with g.scope(f"denseblock{b}"):
                x = _dense_block(g, x, layers)
            if b < len(blocks):
                with g.scope(f"transition{b}"):
                    x = g.relu(g.batchnorm(x, name="norm"), name="relu")
                    x = g.conv2d(x, out_channels=g.shape(x)[0] // 2, kernel=1, bias=False,
                                 name="conv")
                    x = g.avgpool2d(x, kernel=2, stride=2, name="pool")
        x = g.batchnorm(x, name="norm5")
    x = g.relu(x, name="relu")
    x = g.global_avgpool(x, name="avgpool")
    g.linear(x, out_features=classes, name="classifier")
    return g.build()


@model("densenet121")
def densenet121(image_size: int = 224, classes: int = 1000) -> Graph:
    return _densenet("densenet121", _BLOCKS_121, image_size, classes)
