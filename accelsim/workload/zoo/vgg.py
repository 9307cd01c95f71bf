"""VGG-16 and VGG-19, configurations D and E without batchnorm (Simonyan & Zisserman 2015,
"Very Deep Convolutional Networks for Large-Scale Image Recognition", arXiv:1409.1556,
Table 1), in torchvision's layout (`vgg16`, `vgg19`): 13 (D) or 16 (E) 3x3 convs with bias and
ReLU, five 2x2 max-pools, a 7x7x512 feature map flattened into FC-4096, FC-4096, FC-1000.

Op names follow torchvision's module indices (`features.0` is the first conv, `features.4`
the first max-pool, `classifier.6` the last FC), so they line up with its state dict.
Published: vgg16 138,357,544 params (torchvision), 15.5 G multiply-adds at 224x224; vgg19
143,667,240 params, 19.63 G multiply-adds (torchvision).
"""

from __future__ import annotations

from accelsim.errors import ShapeError
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model

# Configuration D: output channels of each 3x3 conv, "M" for a 2x2 stride-2 max-pool.
_CFG_D: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                                 512, 512, 512, "M", 512, 512, 512, "M")
# Configuration E: four convs in each of the last three stages.
_CFG_E: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
                                 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")
_POOLED = 7  # torchvision's AdaptiveAvgPool2d((7, 7)) before the classifier


def _features(g: GraphBuilder, x: str, cfg: tuple[int | str, ...]) -> str:
    i = 0
    for v in cfg:
        if v == "M":
            x = g.maxpool2d(x, kernel=2, stride=2, name=f"features.{i}")
            i += 1
        else:
            x = g.conv2d(x, out_channels=v, kernel=3, padding=1, name=f"features.{i}")
            x = g.relu(x, name=f"features.{i + 1}")
            i += 2
    return x


def _adaptive_pool(g: GraphBuilder, x: str, image_size: int) -> str:
    """torchvision's adaptive average pool to 7x7, as a plain average pool."""
    size = g.shape(x)[1]
    if size == _POOLED:
        return x  # NB: the adaptive pool is an identity at 224x224; no op is added.
    if size < _POOLED:
        raise ShapeError(f"{g.name} needs image_size >= 224 (a 7x7 map before the classifier); "
                         f"image_size {image_size} leaves {size}x{size}")
    stride = size // _POOLED
    # NB: exact when size is a multiple of 7 (uniform windows); otherwise adaptive pooling
    # uses windows of varying width and this fixed window approximates its cost.
    return g.avgpool2d(x, kernel=size - (_POOLED - 1) * stride, stride=stride, name="avgpool")


def _vgg(name: str, cfg: tuple[int | str, ...], image_size: int, classes: int) -> Graph:
    g = GraphBuilder(name, family="vgg")
    x = g.input("image", (3, image_size, image_size))
    x = _features(g, x, cfg)
    x = _adaptive_pool(g, x, image_size)
    x = g.reshape(x, shape=(-1,), name="flatten")
    # NB: dropout after each hidden FC (classifier.2, classifier.5) is left out (inference).
    x = g.relu(g.linear(x, out_features=4096, name="classifier.0"), name="classifier.1")
    x = g.relu(g.linear(x, out_features=4096, name="classifier.3"), name="classifier.4")
    g.linear(x, out_features=classes, name="classifier.6")
    return g.build()


@model("vgg16")
def vgg16(image_size: int = 224, classes: int = 1000) -> Graph:
    return _vgg("vgg16", _CFG_D, image_size, classes)


@model("vgg19")
def vgg19(image_size: int = 224, classes: int = 1000) -> Graph:
    return _vgg("vgg19", _CFG_E, image_size, classes)
