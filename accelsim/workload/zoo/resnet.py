"""ResNet-18, -50, -101 and -152 v1.5 (He et al. 2016, "Deep Residual Learning for Image
Recognition", arXiv:1512.03385, Table 1; v1.5 puts the stride-2 on the 3x3 conv of the
bottleneck, as torchvision and NVIDIA's MLPerf reference do), in torchvision's layout.

Published (torchvision weights tables): resnet101 44,549,160 params, 7.80 G multiply-adds;
resnet152 60,192,808 params, 11.51 G multiply-adds, at 224x224.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model

Kernel = int | tuple[int, int]  # a conv kernel or padding: one size, or (height, width)


def conv_bn(g: GraphBuilder, x: str, out: int, k: Kernel, stride: int = 1, relu: bool = True,
            name: str = "conv", groups: int = 1, act: str = "relu", eps: float = 1e-5,
            padding: Kernel | None = None, **act_attrs: float) -> str:
    """conv (no bias) -> batchnorm -> optional activation; the common CNN unit. `k` is a size
    or an (h, w) pair; `padding` defaults to half the kernel ("same" at stride 1)."""
    if padding is None:
        padding = k // 2 if isinstance(k, int) else (k[0] // 2, k[1] // 2)
    y = g.conv2d(x, out_channels=out, kernel=k, stride=stride, padding=padding, groups=groups,
                 bias=False, name=name)
    y = g.batchnorm(y, eps=eps, name=f"{name}.bn")
    return g.node(act, y, name=f"{name}.{act}", **act_attrs) if relu else y


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


@model("resnet101")
def resnet101(image_size: int = 224, classes: int = 1000) -> Graph:
    return _resnet("resnet101", _bottleneck, (3, 4, 23, 3), image_size, classes)


@model("resnet152")
def resnet152(image_size: int = 224, classes: int = 1000) -> Graph:
    return _resnet("resnet152", _bottleneck, (3, 8, 36, 3), image_size, classes)
