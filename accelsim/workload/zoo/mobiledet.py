"""SSDLite MobileDet-EdgeTPU at 320x320 (Xiong et al. 2021, "MobileDets: Searching for Object
Detection Architectures for Mobile Accelerators", arXiv:2004.14525), the object-detection
model of MLPerf Mobile v1.0 on (`ssdlite_mobiledet_edgetpu_320x320_coco`: mlcommons/
mobile_models `v1_0/mobiledet/README.md`), in the layout of the TensorFlow Object Detection
API: backbone `mobiledet_edgetpu_backbone` in models/ssd_mobiledet_feature_extractor.py, head
and anchors in samples/configs/ssdlite_mobiledet_edgetpu_320x320_coco_sync_4x4.config.

- backbone (batchnorm eps 0.01, ReLU6; every block ends in a linear 1x1 projection): a 3x3
  stride-2 stem; a Tucker conv (1x1 to a quarter of the input, 3x3 to three quarters of the
  output, 1x1); "fused" blocks (a k x k full conv to `expansion` x the input, then the
  projection); inverted bottlenecks (1x1 expansion, k x k depthwise); skips where the
  extractor sets them (not on a block that changes shape);
- feature maps: C4 (96 channels, stride 16) and C5 (384, stride 32), then four extra layers
  of 512, 256, 256, 128 channels (SSDLite: 1x1 to half, depthwise 3x3 stride 2, 1x1), as
  `ssd_mobilenet_v2`'s;
- box predictor (`use_depthwise`, kernel 3, batchnorm eps 1e-3): on each map a depthwise
  3x3 then a 1x1 conv with bias to anchors x 4 box codes and anchors x 90 classes (the
  config encodes the background as zeros: no background logit); 3 anchors on the first map,
  6 on the others: 2,034 anchors at 320x320.

Published: "1.53B MulAdds, 4.20M Parameters" (the config's header comment).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.resnet import conv_bn
from accelsim.workload.zoo.ssd import ssdlite_head

_EPS = 0.01  # the backbone's batch_norm epsilon (extract_features' arg_scope)

# mobiledet_edgetpu_backbone, in order: (kind, output channels, expansion, kernel, stride,
# residual); kind "tucker", "fused" or "ibn". "C4" and "C5" mark the feature maps.
_BACKBONE = (
    ("tucker", 16, 0, 3, 1, False),
    ("fused", 16, 8, 3, 2, False), ("fused", 16, 4, 3, 1, True), ("fused", 16, 8, 3, 1, True),
    ("fused", 16, 4, 3, 1, True),
    ("fused", 40, 8, 5, 2, False), ("fused", 40, 4, 3, 1, True), ("fused", 40, 4, 3, 1, True),
    ("fused", 40, 4, 3, 1, True),
    ("ibn", 72, 8, 3, 2, False), ("ibn", 72, 8, 3, 1, True), ("fused", 72, 4, 3, 1, True),
    ("fused", 72, 4, 3, 1, True), ("ibn", 96, 8, 5, 1, False), ("ibn", 96, 8, 5, 1, True),
    ("ibn", 96, 8, 3, 1, True), ("ibn", 96, 8, 3, 1, True),
    "C4",
    ("ibn", 120, 8, 5, 2, False), ("ibn", 120, 8, 3, 1, True), ("ibn", 120, 4, 5, 1, True),
    ("ibn", 120, 8, 3, 1, True), ("ibn", 384, 8, 5, 1, False),
    "C5",
)


def scale_filters(filters: int, multiplier: float, base: int = 8) -> int:
    """The extractor's `_scale_filters`: filters x multiplier to a multiple of `base`,
    rounded half up, at least `base`."""
    return max(int(filters * multiplier / base + 0.5) * base, base)


def _block(g: GraphBuilder, x: str, kind: str, out: int, expansion: int, k: int, stride: int,
           residual: bool) -> str:
    cin = g.shape(x)[0]
    if kind == "tucker":
        y = conv_bn(g, x, scale_filters(cin, 0.25), 1, name="input_rank", act="relu6",
                    eps=_EPS)
        y = conv_bn(g, y, scale_filters(out, 0.75), k, stride, name="conv", act="relu6",
                    eps=_EPS)
    elif kind == "fused":
        y = conv_bn(g, x, cin * expansion, k, stride, name="fused", act="relu6", eps=_EPS)
    else:
        y = conv_bn(g, x, cin * expansion, 1, name="expand", act="relu6", eps=_EPS)
        y = conv_bn(g, y, cin * expansion, k, stride, groups=cin * expansion,
                    name="depthwise", act="relu6", eps=_EPS)
    y = conv_bn(g, y, out, 1, relu=False, name="project", eps=_EPS)
    return g.add(x, y, name="add") if residual else y


@model("ssdlite_mobiledet_edgetpu")
def ssdlite_mobiledet_edgetpu(image_size: int = 320, classes: int = 90) -> Graph:
    """`classes` is the class logits per anchor (the background is encoded as zeros)."""
    g = GraphBuilder("ssdlite_mobiledet_edgetpu", family="ssd")
    x = g.input("image", (3, image_size, image_size))
    x = conv_bn(g, x, 32, 3, 2, name="stem", act="relu6", eps=_EPS)
    maps: list[str] = []
    i = 0
    for row in _BACKBONE:
        if isinstance(row, str):
            maps.append(x)
            continue
        with g.scope(f"block_{i}"):
            x = _block(g, x, *row)
        i += 1
    box, cls = ssdlite_head(g, maps, "C5", classes, "class_predictions")
    # NB: post-processing (box decoding, sigmoid scores, non-max suppression) runs on the
    # host (TFLite_Detection_PostProcess), as for ssd_mobilenet_v2.
    return g.build(outputs=(box, cls))
