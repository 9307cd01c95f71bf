"""Inception v1 / GoogLeNet (Szegedy et al. 2015, "Going Deeper with Convolutions",
arXiv:1409.4842, Table 1), in torchvision's layout (`googlenet`, `aux_logits=False`).

Differences from the paper, all torchvision's, which we follow so the counts match its
published 6,624,904 params:

- every conv is conv (no bias) -> batchnorm (eps 1e-3) -> ReLU (`BasicConv2d`); the paper
  predates batchnorm and has no local response normalisation here either;
- the "5x5" branch uses a 3x3 conv (padding 1): a known quirk of torchvision's port,
  kept for weight compatibility (see the comment in torchvision's googlenet.py, which points
  to pytorch/vision issue 906). A true 5x5 conv would give 7,005,832 params;
- max-pools use `ceil_mode=True`; the auxiliary classifiers (training only) are left out.

Published: 6,624,904 params (torchvision, no aux), about 1.5 G multiply-adds at 224x224.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.resnet import conv_bn

_BN_EPS = 1e-3  # torchvision's BasicConv2d

# Table 1: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj; maxpool marks a pool.
_BLOCKS: tuple[tuple[str, tuple[int, int, int, int, int, int]] | str, ...] = (
    ("inception3a", (64, 96, 128, 16, 32, 32)),
    ("inception3b", (128, 128, 192, 32, 96, 64)),
    "maxpool3",
    ("inception4a", (192, 96, 208, 16, 48, 64)),
    ("inception4b", (160, 112, 224, 24, 64, 64)),
    ("inception4c", (128, 128, 256, 24, 64, 64)),
    ("inception4d", (112, 144, 288, 32, 64, 64)),
    ("inception4e", (256, 160, 320, 32, 128, 128)),
    "maxpool4",
    ("inception5a", (256, 160, 320, 32, 128, 128)),
    ("inception5b", (384, 192, 384, 48, 128, 128)),
)


def _conv(g: GraphBuilder, x: str, out: int, k: int, stride: int = 1, name: str = "conv") -> str:
    return conv_bn(g, x, out, k, stride, name=name, eps=_BN_EPS)


def _inception(g: GraphBuilder, x: str, ch: tuple[int, int, int, int, int, int]) -> str:
    c1, c3r, c3, c5r, c5, pool_proj = ch
    b1 = _conv(g, x, c1, 1, name="branch1")
    b2 = _conv(g, _conv(g, x, c3r, 1, name="branch2.0"), c3, 3, name="branch2.1")
    # NB: torchvision's "5x5" branch is a 3x3 conv (see module docstring).
    b3 = _conv(g, _conv(g, x, c5r, 1, name="branch3.0"), c5, 3, name="branch3.1")
    b4 = g.maxpool2d(x, kernel=3, stride=1, padding=1, ceil_mode=True, name="branch4.0")
    b4 = _conv(g, b4, pool_proj, 1, name="branch4.1")
    return g.concat(b1, b2, b3, b4, axis=0, name="concat")


@model("inception_v1")
def inception_v1(image_size: int = 224, classes: int = 1000) -> Graph:
    g = GraphBuilder("inception_v1", family="inception")
    x = g.input("image", (3, image_size, image_size))
    x = _conv(g, x, 64, 7, 2, name="conv1")
    x = g.maxpool2d(x, kernel=3, stride=2, ceil_mode=True, name="maxpool1")
    x = _conv(g, x, 64, 1, name="conv2")
    x = _conv(g, x, 192, 3, name="conv3")
    x = g.maxpool2d(x, kernel=3, stride=2, ceil_mode=True, name="maxpool2")
    for block in _BLOCKS:
        if block == "maxpool3":
            x = g.maxpool2d(x, kernel=3, stride=2, ceil_mode=True, name=block)
        elif block == "maxpool4":
            x = g.maxpool2d(x, kernel=2, stride=2, ceil_mode=True, name=block)
        else:
            name, channels = block
            with g.scope(name):
                x = _inception(g, x, channels)
    x = g.global_avgpool(x, name="avgpool")
    # NB: dropout (p = 0.2) before the classifier is an identity at inference and left out.
    g.linear(x, out_features=classes, name="fc")
    return g.build()
