"""EDSR f32b5 at scale 2, the super-resolution model of MLPerf Mobile (v3.0 on): EDSR (Lim et
al. 2017, "Enhanced Deep Residual Networks for Single Image Super-Resolution", CVPR
Workshops) cut to 32 channels and 5 residual blocks for phones, in the layout that
github.com/mlcommons/mobile_open `vision/edsr/models_and_checkpoints/checkpoints/f32b5/
model.txt` prints (its Keras summary), for a 960x540 input and a 1920x1080 output (MLPerf
Mobile's SNU SR set: mobile_app_open `flutter/cpp/datasets/README.md`).

- head: 3x3 conv (bias) 3 -> 32;
- body: 5 residual blocks (3x3 conv, ReLU, 3x3 conv, add; no batchnorm and, at this width,
  no residual scaling), a 3x3 conv, and a skip from the head's output;
- tail: 3x3 conv 32 -> 12 (3 colours x 2 x 2) and a depth-to-space (pixel shuffle) by 2.

Published: 106,092 parameters (the Keras summary's "Total params"). The paper's figures are
for its 64-channel and 256-channel models, not this one.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model

FEATURES, BLOCKS, SCALE, COLOURS = 32, 5, 2, 3


def _conv(g: GraphBuilder, x: str, out: int, name: str) -> str:
    return g.conv2d(x, out_channels=out, kernel=3, padding=1, name=name)


def pixel_shuffle(g: GraphBuilder, x: str, r: int, name: str = "depth_to_space") -> str:
    """(C*r*r, H, W) -> (C, H*r, W*r), as TF's depth_to_space / PyTorch's PixelShuffle.
    NB: TF orders the r*r sub-pixels before the colour within a channel group; the moved
    bytes (one reshape, one transpose) are the same either way."""
    c, h, w = g.shape(x)
    with g.scope(name):
        y = g.reshape(x, shape=(c // (r * r), r, r, h, w), name="split")
        y = g.transpose(y, perm=(0, 3, 1, 4, 2), name="interleave")
        return g.reshape(y, shape=(c // (r * r), h * r, w * r), name="merge")


@model("edsr_f32b5")
def edsr_f32b5(height: int = 540, width: int = 960) -> Graph:
    """`height` x `width` is the low-resolution input; the output is twice each."""
    g = GraphBuilder("edsr_f32b5", family="edsr")
    x = g.input("image", (COLOURS, height, width))
    head = _conv(g, x, FEATURES, "conv2d")
    y = head
    for i in range(BLOCKS):
        with g.scope(f"block_{i}"):
            # NB: the summary shows no activation layers; ReLU sits inside the first conv
            # of each block (EDSR's block), costed here as its own op.
            r = g.relu(_conv(g, y, FEATURES, "conv1"), name="relu")
            y = g.add(y, _conv(g, r, FEATURES, "conv2"), name="add")
    y = g.add(head, _conv(g, y, FEATURES, "conv_body"), name="skip")
    y = _conv(g, y, COLOURS * SCALE * SCALE, "conv_scale_2")
    # NB: the summary's first Lambda (12 channels, no weights) is an elementwise step before
    # the shuffle; it is left out (12 values a pixel, <0.1% of the convs' work).
    return g.build(outputs=(pixel_shuffle(g, y, SCALE),))
