"""ResNet-18 and ResNet-50 v1.5 (He et al. 2016; v1.5 puts the stride-2 on the 3x3 conv of
the bottleneck, as torchvision and NVIDIA's MLPerf reference do)."""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model


def conv_bn(g: GraphBuilder, x: str, out: int, k: int, stride: int = 1, relu: bool = True,
            name: str = "conv", groups: int = 1, act: str = "relu", eps: float = 1e-5) -> str:
    """conv (no bias) -> batchnorm -> optional activation; the common CNN unit."""
    y = g.conv2d(x, out_channels=out, kernel=k, stride=stride, padding=k // 2, groups=groups,
                 bias=False, name=name)
    y = g.batchnorm(y, eps=eps, name=f"{name}.bn")
    return g.node(act, y, name=f"{name}.{act}") if relu else y


def _basic(g: GraphBuilder, x: str, width: int, stride: int) -> str:
    y = conv_bn(g, x, width, 3, stride, name="conv1")
    y = conv_bn(g, y, width, 3, 1, relu=False, name="conv2")
    return _residual(g, x, y, width, stride)


def _bottleneck(g: GraphBuilder, x: str, width: int, stride: int) -> str:
    y = conv_bn(g, x, width, 1, name="conv1")
    y = conv_bn(g, y, width, 3, stride, name="conv2")  # v1.5: stride on the 3x3
    y = conv_bn(g, y, width * 4, 1, relu=False, name="conv3")
    return _residual(g, x, y, width * 4, stride)


def _residual(g: GraphBuilder, x: str, y: str, out: int, stride: int) -> str:
    if stride != 1 or g.shape(x)[0] != out:
        x = conv_bn(g, x, out, 1, stride, relu=False, name="downsample")
    return g.relu(g.add(x, y, name="add"), name="relu")


def _resnet(name: str, block, layers: tuple[int, ...], image_size: int, classes: int) -> Graph:
    g = GraphBuilder(name, family="resnet")
    x = g.input("image", (3, image_size, image_size))
    x = conv_bn(g, x, 64, 7, 2, name="conv1")
    x = g.maxpool2d(x, kernel=3, stride=2, padding=1, name="maxpool")
    widths = (64, 128, 256, 512)
    for stage, (n_blocks, width) in enumerate(zip(layers, widths, strict=True), start=1):
        for b in range(n_blocks):
            with g.scope(f"layer{stage}.{b}"):
                x = block(g, x, width, 2 if (b == 0 and stage > 1) else 1)
    x = g.global_avgpool(x, name="avgpool")
    g.linear(x, out_features=classes, name="fc")
    return g.build()


@model("resnet18")
def resnet18(image_size: int = 224, classes: int = 1000) -> Graph:
    return _resnet("resnet18", _basic, (2, 2, 2, 2), image_size, classes)


@model("resnet50")
def resnet50(image_size: int = 224, classes: int = 1000) -> Graph:
    return _resnet("resnet50", _bottleneck, (3, 4, 6, 3), image_size, classes)
