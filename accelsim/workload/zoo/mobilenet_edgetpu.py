"""MobileNetEdgeTPU (Gupta & Tan 2019, "Introducing the Next Generation of On-Device Vision
Models: MobileNetV3 and MobileNetEdgeTPU", Google AI blog), the image-classification model of
MLPerf Mobile, at 224x224 and depth multiplier 1.0, in the layout of the TF model garden's
`official/projects/edgetpu/vision/modeling/mobilenet_edgetpu_v1_model_blocks.py` (its
`ModelConfig.blocks`; the same network as research/slim's `V3_EDGETPU`).

- stem: 3x3 conv, stride 2, 32 channels; batchnorm (eps 1e-3) and ReLU after every conv;
- 12 stacks of inverted bottlenecks of three kinds: "fused" (a k x k full conv to
  `expand` x the input channels at the block's stride), "no_depthwise" (a 3x3 full conv
  expansion at stride 1; none at expansion 1), and the usual depthwise one (1x1 expansion,
  k x k depthwise); each ends in a linear 1x1 projection, with a skip where shapes allow and
  the stack does not turn it off (`id_skip=False`); no squeeze-excitation, ReLU throughout;
- head: 1x1 conv to 1280, global average pool, a 1x1 conv with bias to 1001 classes (the
  checkpoint's background class included).

Published (tensorflow/models, research/slim/nets/mobilenet/README.md, "Edge TPU
checkpoints", MobilenetEdgeTPU dm=1): 990 M MACs and 4.0 M params at 224x224.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.resnet import conv_bn

_EPS = 1e-3  # ModelConfig.bn_epsilon
_STEM, _TOP, _CLASSES = 32, 1280, 1001
# ModelConfig.blocks: input channels, output channels, kernel, repeats, expansion, stride,
# kind ("fused", "no_depthwise" or "depthwise"), skip allowed (id_skip).
_BLOCKS = ((32, 16, 3, 1, 1, 1, "no_depthwise", True), (16, 32, 3, 1, 8, 2, "fused", True),
           (32, 32, 3, 3, 4, 1, "no_depthwise", True), (32, 48, 3, 1, 8, 2, "fused", True),
           (48, 48, 3, 3, 4, 1, "no_depthwise", True), (48, 96, 3, 1, 8, 2, "depthwise", True),
           (96, 96, 3, 3, 4, 1, "depthwise", True), (96, 96, 3, 1, 8, 1, "depthwise", False),
           (96, 96, 3, 3, 4, 1, "depthwise", True), (96, 160, 5, 1, 8, 2, "depthwise", True),
           (160, 160, 5, 3, 4, 1, "depthwise", True), (160, 192, 3, 1, 8, 1, "depthwise", True))


def _block(g: GraphBuilder, x: str, out: int, k: int, expand: int, stride: int, kind: str,
           skip: bool) -> str:
    cin = g.shape(x)[0]
    hidden = cin * expand
    y = x
    if kind == "fused":
        y = conv_bn(g, y, hidden, k, stride, name="fused", eps=_EPS)
    elif kind == "no_depthwise":
        if expand != 1:
            y = conv_bn(g, y, hidden, 3, name="expand", eps=_EPS)
    else:
        if expand != 1:
            y = conv_bn(g, y, hidden, 1, name="expand", eps=_EPS)
        y = conv_bn(g, y, hidden, k, stride, groups=hidden, name="depthwise", eps=_EPS)
    y = conv_bn(g, y, out, 1, relu=False, name="project", eps=_EPS)
    if skip and stride == 1 and cin == out:
        # NB: drop-connect on the branch is an identity at inference.
        y = g.add(x, y, name="add")
    return y


@model("mobilenet_edgetpu")
def mobilenet_edgetpu(image_size: int = 224, classes: int = _CLASSES) -> Graph:
    g = GraphBuilder("mobilenet_edgetpu", family="mobilenet")
    x = g.input("image", (3, image_size, image_size))
    x = conv_bn(g, x, _STEM, 3, 2, name="stem", eps=_EPS)
    for s, (_, out, k, repeats, expand, stride, kind, skip) in enumerate(_BLOCKS):
        for r in range(repeats):
            with g.scope(f"stack_{s}.block_{r}"):
                x = _block(g, x, out, k, expand, stride if r == 0 else 1, kind, skip)
    x = conv_bn(g, x, _TOP, 1, name="top", eps=_EPS)
    x = g.global_avgpool(x, name="top_pool")
    # NB: dropout (0.1) is an identity at inference; the 1x1 logits conv on the pooled 1x1
    # map is a linear layer (same weights and MACs).
    g.linear(x, out_features=classes, name="logits")
    return g.build()
