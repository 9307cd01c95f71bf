"""SSD-MobileNetV2 at 300x300 in its SSDLite form: `ssdlite_mobilenet_v2_coco` of the
TensorFlow Object Detection API (samples/configs/ssdlite_mobilenet_v2_coco.config, feature
extractor models/ssd_mobilenet_v2_feature_extractor.py), the SSDLite of Sandler et al. 2018,
"MobileNetV2: Inverted Residuals and Linear Bottlenecks", arXiv:1801.04381, section 6.2 and
Table 6 (its "SSD-MobileNet-v2" for mobile benchmarks).

- backbone: MobileNetV2 at width 1.0 without its classifier (TF-slim layers 1-19: the same
  layout as torchvision's, batchnorm eps 1e-3); TF's "SAME" padding at stride 2 gives the
  same map sizes as symmetric padding at 300x300: 150, 75, 38, 19, 10;
- six feature maps: layer_15/expansion_output (576 channels at 19x19, before the first
  160-channel block's stride), layer_19 (1280 at 10x10), then four extra layers of 512, 256,
  256, 128 channels at 5, 3, 2, 1: each a 1x1 conv to half the depth, then a depthwise 3x3 at
  stride 2 and a 1x1 conv to the depth (SSDLite: `use_depthwise`), all batchnorm + ReLU6;
- box predictor (`use_depthwise`, kernel 3): on each map, for the box codes and for the class
  scores, a depthwise 3x3 (batchnorm + ReLU6) then a 1x1 conv with bias to anchors x 4 box
  codes and anchors x 91 classes (90 COCO classes and background); 3 anchors on the first
  map (`reduce_boxes_in_lowest_layer`), 6 on the others: 1,917 anchors in all.

The graph's outputs are the raw box codes (1917, 4) and class logits (1917, 91).
Published: 4.3 M params and 0.8 G multiply-adds in the paper (Table 6); 4.475 M params and
1.525 GFLOPs for this TF model in OpenVINO's Open Model Zoo (ssdlite_mobilenet_v2, whose
converted graph folds each batchnorm into its conv: weight + bias). MLPerf Inference v0.5's
SSD-MobileNet is v1 (ssd_mobilenet_v1_coco), not this model.
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.mobilenet import V2_LAST, V2_SETTINGS, V2_STEM, inverted_residual
from accelsim.workload.zoo.resnet import conv_bn

_EPS = 1e-3  # TF-slim batch_norm epsilon in the config's conv_hyperparams
_TAP = 15  # layer_15/expansion_output (TF-slim counts the stem conv as layer_1)
_EXTRA_DEPTHS = (512, 256, 256, 128)
_ANCHORS = (3, 6, 6, 6, 6, 6)
_BOX_CODE = 4


def _backbone(g: GraphBuilder, x: str) -> list[str]:
    """MobileNetV2's layers 1-19; returns [layer_15/expansion_output, layer_19]."""
    taps: list[str] = []
    with g.scope("layer_1"):
        x = conv_bn(g, x, V2_STEM, 3, 2, name="conv", act="relu6", eps=_EPS)
    i = 2
    for t, c, n, s in V2_SETTINGS:
        for r in range(n):
            with g.scope(f"layer_{i}"):
                x = inverted_residual(g, x, c, s if r == 0 else 1, t, eps=_EPS,
                                      taps=taps if i == _TAP else None)
            i += 1
    with g.scope(f"layer_{i}"):
        x = conv_bn(g, x, V2_LAST, 1, name="conv", act="relu6", eps=_EPS)
    return [*taps, x]


def ssdlite_extra(g: GraphBuilder, x: str, depth: int) -> str:
    y = conv_bn(g, x, depth // 2, 1, name="conv1x1", act="relu6", eps=_EPS)
    y = conv_bn(g, y, depth // 2, 3, 2, groups=depth // 2, name="dw", act="relu6", eps=_EPS)
    return conv_bn(g, y, depth, 1, name="pw", act="relu6", eps=_EPS)


def ssdlite_predict(g: GraphBuilder, x: str, outputs: int, width: int, name: str) -> str:
    """Depthwise 3x3 (batchnorm, ReLU6), 1x1 conv with bias; flattened to (H*W*anchors,
    `width`) in TF's anchor order (position-major)."""
    c = g.shape(x)[0]
    with g.scope(name):
        y = conv_bn(g, x, c, 3, groups=c, name="dw", act="relu6", eps=_EPS)
        y = g.conv2d(y, out_channels=outputs, kernel=1, name="conv")
        # NB: TF computes in NHWC, where this reshape is a view; in our (C, H, W) layout the
        # predictions move once to channels-last (as PyTorch ports of SSD do).
        y = g.transpose(y, perm=(1, 2, 0), name="to_nhwc")
        return g.reshape(y, shape=(-1, width), name="flatten")


def ssdlite_head(g: GraphBuilder, maps: list, extras_scope: str, classes: int,
                 scores_name: str) -> tuple:
    """SSDLite's head on a backbone's feature maps (TF Object Detection API): four extra
    layers of `_EXTRA_DEPTHS` (scopes `extras_scope`_2..5), then on each of the six maps a
    box predictor (`_ANCHORS` x 4 box codes) and a class predictor (x `classes`), each
    concatenated; (boxes, scores)."""
    maps = list(maps)
    for j, depth in enumerate(_EXTRA_DEPTHS, start=2):
        with g.scope(f"{extras_scope}_{j}"):
            maps.append(ssdlite_extra(g, maps[-1], depth))
    boxes, scores = [], []
    for j, (fmap, anchors) in enumerate(zip(maps, _ANCHORS, strict=True)):
        with g.scope(f"BoxPredictor_{j}"):
            boxes.append(ssdlite_predict(g, fmap, anchors * _BOX_CODE, _BOX_CODE,
                                         "BoxEncodingPredictor"))
            scores.append(ssdlite_predict(g, fmap, anchors * classes, classes,
                                          "ClassPredictor"))
    return (g.concat(*boxes, axis=0, name="box_encodings"),
            g.concat(*scores, axis=0, name=scores_name))


@model("ssd_mobilenet_v2")
def ssd_mobilenet_v2(image_size: int = 300, classes: int = 90) -> Graph:
    """`classes` excludes the background class the predictor adds."""
    g = GraphBuilder("ssd_mobilenet_v2", family="ssd")
    x = g.input("image", (3, image_size, image_size))
    box, cls = ssdlite_head(g, _backbone(g, x), "layer_19", classes + 1,
                            "class_predictions_with_background")
    # NB: post-processing (box decoding against the anchors, sigmoid scores, non-max
    # suppression) is left out: it runs on the host in the TF graph's Postprocessor.
    return g.build(outputs=(box, cls))
