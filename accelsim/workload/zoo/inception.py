"""Inception v1 / GoogLeNet, v3 and v4 (the v3 and v4 sections below say their sources).

Inception v1 (Szegedy et al. 2015, "Going Deeper with Convolutions", arXiv:1409.4842,
Table 1), in torchvision's layout (`googlenet`, `aux_logits=False`). Differences from the
paper, all torchvision's, which we follow so the counts match its published 6,624,904 params:

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


# ---- Inception v3 --------------------------------------------------------------------------
# Szegedy et al. 2016, "Rethinking the Inception Architecture for Computer Vision",
# arXiv:1512.00567, in torchvision's layout (`inception_v3`, aux_logits=False, 299x299): every
# conv is BasicConv2d (conv without bias -> batchnorm eps 1e-3 -> ReLU), unpadded unless given.
# Published: 27,161,264 params with the auxiliary classifier (torchvision), so 23,834,568
# without it; 5.71 G multiply-adds at 299x299.

Conv = tuple[int, int | tuple[int, int], int, int | tuple[int, int]]  # out, kernel, stride, pad
_1x7, _7x1, _1x3, _3x1 = (1, 7), (7, 1), (1, 3), (3, 1)
_P1x7, _P7x1, _P1x3, _P3x1 = (0, 3), (3, 0), (0, 1), (1, 0)


def _chain(g: GraphBuilder, x: str, name: str, convs: tuple[Conv, ...],
           names: tuple[str, ...] | None = None) -> str:
    """BasicConv2d units one after another, named `name_1`, `name_2`, ... (or `names`)."""
    for i, (out, k, stride, pad) in enumerate(convs):
        label = names[i] if names else f"{name}_{i + 1}"
        x = conv_bn(g, x, out, k, stride, name=label, eps=_BN_EPS, padding=pad)
    return x


def _pool_branch(g: GraphBuilder, x: str, out: int, name: str = "branch_pool") -> str:
    # NB: torchvision pools with count_include_pad=True, timm's v4 with False: same cost.
    y = g.avgpool2d(x, kernel=3, stride=1, padding=1, name=f"{name}.avgpool")
    return conv_bn(g, y, out, 1, name=name, eps=_BN_EPS)


def _v3_a(g: GraphBuilder, x: str, pool_features: int) -> str:
    b1 = _chain(g, x, "branch1x1", ((64, 1, 1, 0),), ("branch1x1",))
    b5 = _chain(g, x, "branch5x5", ((48, 1, 1, 0), (64, 5, 1, 2)))
    b3 = _chain(g, x, "branch3x3dbl", ((64, 1, 1, 0), (96, 3, 1, 1), (96, 3, 1, 1)))
    return g.concat(b1, b5, b3, _pool_branch(g, x, pool_features), axis=0, name="concat")


def _v3_b(g: GraphBuilder, x: str) -> str:
    b3 = _chain(g, x, "branch3x3", ((384, 3, 2, 0),), ("branch3x3",))
    bd = _chain(g, x, "branch3x3dbl", ((64, 1, 1, 0), (96, 3, 1, 1), (96, 3, 2, 0)))
    pool = g.maxpool2d(x, kernel=3, stride=2, name="branch_pool")
    return g.concat(b3, bd, pool, axis=0, name="concat")


def _v3_c(g: GraphBuilder, x: str, c7: int) -> str:
    b1 = _chain(g, x, "branch1x1", ((192, 1, 1, 0),), ("branch1x1",))
    b7 = _chain(g, x, "branch7x7", ((c7, 1, 1, 0), (c7, _1x7, 1, _P1x7), (192, _7x1, 1, _P7x1)))
    bd = _chain(g, x, "branch7x7dbl", ((c7, 1, 1, 0), (c7, _7x1, 1, _P7x1),
                                       (c7, _1x7, 1, _P1x7), (c7, _7x1, 1, _P7x1),
                                       (192, _1x7, 1, _P1x7)))
    return g.concat(b1, b7, bd, _pool_branch(g, x, 192), axis=0, name="concat")


def _v3_d(g: GraphBuilder, x: str) -> str:
    b3 = _chain(g, x, "branch3x3", ((192, 1, 1, 0), (320, 3, 2, 0)))
    b7 = _chain(g, x, "branch7x7x3", ((192, 1, 1, 0), (192, _1x7, 1, _P1x7),
                                      (192, _7x1, 1, _P7x1), (192, 3, 2, 0)))
    pool = g.maxpool2d(x, kernel=3, stride=2, name="branch_pool")
    return g.concat(b3, b7, pool, axis=0, name="concat")


def _split(g: GraphBuilder, x: str, name: str, out: int) -> str:
    """The (1, 3) and (3, 1) pair on one input, concatenated (InceptionE, InceptionC of v4)."""
    a = conv_bn(g, x, out, _1x3, name=f"{name}a", eps=_BN_EPS, padding=_P1x3)
    b = conv_bn(g, x, out, _3x1, name=f"{name}b", eps=_BN_EPS, padding=_P3x1)
    return g.concat(a, b, axis=0, name=f"{name}.concat")


def _v3_e(g: GraphBuilder, x: str) -> str:
    b1 = _chain(g, x, "branch1x1", ((320, 1, 1, 0),), ("branch1x1",))
    b3 = _split(g, _chain(g, x, "", ((384, 1, 1, 0),), ("branch3x3_1",)), "branch3x3_2", 384)
    bd = _chain(g, x, "branch3x3dbl", ((448, 1, 1, 0), (384, 3, 1, 1)))
    bd = _split(g, bd, "branch3x3dbl_3", 384)
    return g.concat(b1, b3, bd, _pool_branch(g, x, 192), axis=0, name="concat")


_V3_MIXED = (("Mixed_5b", _v3_a, (32,)), ("Mixed_5c", _v3_a, (64,)), ("Mixed_5d", _v3_a, (64,)),
             ("Mixed_6a", _v3_b, ()), ("Mixed_6b", _v3_c, (128,)), ("Mixed_6c", _v3_c, (160,)),
             ("Mixed_6d", _v3_c, (160,)), ("Mixed_6e", _v3_c, (192,)), ("Mixed_7a", _v3_d, ()),
             ("Mixed_7b", _v3_e, ()), ("Mixed_7c", _v3_e, ()))


@model("inception_v3")
def inception_v3(image_size: int = 299, classes: int = 1000) -> Graph:
    g = GraphBuilder("inception_v3", family="inception")
    x = g.input("image", (3, image_size, image_size))
    # NB: transform_input (a per-channel affine of the image, on with the pretrained weights)
    # is left out: two FLOPs per input element, no parameters.
    x = _chain(g, x, "", ((32, 3, 2, 0), (32, 3, 1, 0), (64, 3, 1, 1)),
               ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3"))
    x = g.maxpool2d(x, kernel=3, stride=2, name="maxpool1")
    x = _chain(g, x, "", ((80, 1, 1, 0), (192, 3, 1, 0)), ("Conv2d_3b_1x1", "Conv2d_4a_3x3"))
    x = g.maxpool2d(x, kernel=3, stride=2, name="maxpool2")
    for name, block, args in _V3_MIXED:
        with g.scope(name):
            x = block(g, x, *args)
    # NB: the auxiliary classifier after Mixed_6e runs only in training and is left out
    # (aux_logits=False); so is dropout (p = 0.5), an identity at inference.
    x = g.global_avgpool(x, name="avgpool")
    g.linear(x, out_features=classes, name="fc")
    return g.build()


# ---- Inception v4 --------------------------------------------------------------------------
# Szegedy, Ioffe, Vanhoucke & Alemi 2017, "Inception-v4, Inception-ResNet and the Impact of
# Residual Connections on Learning", arXiv:1602.07261, Figures 3-9, in timm's layout
# (`inception_v4`, ported from the TensorFlow-slim weights; 299x299): conv (no bias) ->
# batchnorm eps 1e-3 -> ReLU, unpadded unless given. Module names follow timm's
# (`features.N.branchK.M`). Published (timm results tables): 42.68 M params, 12.28 G
# multiply-adds at 299x299.


def _seq(g: GraphBuilder, x: str, name: str, convs: tuple[Conv, ...]) -> str:
    """An nn.Sequential of convs named `name.0`, `name.1`, ..."""
    return _chain(g, x, name, convs, tuple(f"{name}.{i}" for i in range(len(convs))))


def _v4_stem(g: GraphBuilder, x: str) -> str:
    x = _seq(g, x, "features", ((32, 3, 2, 0), (32, 3, 1, 0), (64, 3, 1, 1)))
    with g.scope("features.3"):  # Mixed3a
        x = g.concat(g.maxpool2d(x, kernel=3, stride=2, name="maxpool"),
                     _chain(g, x, "", ((96, 3, 2, 0),), ("conv",)), axis=0, name="concat")
    with g.scope("features.4"):  # Mixed4a
        b0 = _seq(g, x, "branch0", ((64, 1, 1, 0), (96, 3, 1, 0)))
        b1 = _seq(g, x, "branch1", ((64, 1, 1, 0), (64, _1x7, 1, _P1x7), (64, _7x1, 1, _P7x1),
                                    (96, 3, 1, 0)))
        x = g.concat(b0, b1, axis=0, name="concat")
    with g.scope("features.5"):  # Mixed5a
        x = g.concat(_chain(g, x, "", ((192, 3, 2, 0),), ("conv",)),
                     g.maxpool2d(x, kernel=3, stride=2, name="maxpool"), axis=0, name="concat")
    return x


def _v4_a(g: GraphBuilder, x: str) -> str:
    b0 = _chain(g, x, "", ((96, 1, 1, 0),), ("branch0",))
    b1 = _seq(g, x, "branch1", ((64, 1, 1, 0), (96, 3, 1, 1)))
    b2 = _seq(g, x, "branch2", ((64, 1, 1, 0), (96, 3, 1, 1), (96, 3, 1, 1)))
    return g.concat(b0, b1, b2, _pool_branch(g, x, 96, "branch3"), axis=0, name="concat")


def _v4_reduction_a(g: GraphBuilder, x: str) -> str:
    b0 = _chain(g, x, "", ((384, 3, 2, 0),), ("branch0",))
    b1 = _seq(g, x, "branch1", ((192, 1, 1, 0), (224, 3, 1, 1), (256, 3, 2, 0)))
    pool = g.maxpool2d(x, kernel=3, stride=2, name="branch2")
    return g.concat(b0, b1, pool, axis=0, name="concat")


def _v4_b(g: GraphBuilder, x: str) -> str:
    b0 = _chain(g, x, "", ((384, 1, 1, 0),), ("branch0",))
    b1 = _seq(g, x, "branch1", ((192, 1, 1, 0), (224, _1x7, 1, _P1x7), (256, _7x1, 1, _P7x1)))
    b2 = _seq(g, x, "branch2", ((192, 1, 1, 0), (192, _7x1, 1, _P7x1), (224, _1x7, 1, _P1x7),
                                (224, _7x1, 1, _P7x1), (256, _1x7, 1, _P1x7)))
    return g.concat(b0, b1, b2, _pool_branch(g, x, 128, "branch3"), axis=0, name="concat")


def _v4_reduction_b(g: GraphBuilder, x: str) -> str:
    b0 = _seq(g, x, "branch0", ((192, 1, 1, 0), (192, 3, 2, 0)))
    b1 = _seq(g, x, "branch1", ((256, 1, 1, 0), (256, _1x7, 1, _P1x7), (320, _7x1, 1, _P7x1),
                                (320, 3, 2, 0)))
    pool = g.maxpool2d(x, kernel=3, stride=2, name="branch2")
    return g.concat(b0, b1, pool, axis=0, name="concat")


def _v4_c(g: GraphBuilder, x: str) -> str:
    b0 = _chain(g, x, "", ((256, 1, 1, 0),), ("branch0",))
    b1 = _split(g, _chain(g, x, "", ((384, 1, 1, 0),), ("branch1_0",)), "branch1_1", 256)
    b2 = _chain(g, x, "", ((384, 1, 1, 0), (448, _3x1, 1, _P3x1), (512, _1x3, 1, _P1x3)),
                ("branch2_0", "branch2_1", "branch2_2"))
    b2 = _split(g, b2, "branch2_3", 256)
    return g.concat(b0, b1, b2, _pool_branch(g, x, 256, "branch3"), axis=0, name="concat")


@model("inception_v4")
def inception_v4(image_size: int = 299, classes: int = 1000) -> Graph:
    g = GraphBuilder("inception_v4", family="inception")
    x = _v4_stem(g, g.input("image", (3, image_size, image_size)))
    blocks = ((_v4_a,) * 4 + (_v4_reduction_a,) + (_v4_b,) * 7 + (_v4_reduction_b,)
              + (_v4_c,) * 3)
    for i, block in enumerate(blocks, start=6):
        with g.scope(f"features.{i}"):
            x = block(g, x)
    x = g.global_avgpool(x, name="global_pool")
    # NB: dropout before the classifier (drop_rate 0 by default) is left out.
    g.linear(x, out_features=classes, name="last_linear")
    return g.build()
