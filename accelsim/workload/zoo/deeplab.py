"""DeepLabv3+ on MobileNetV2 (Chen et al. 2018, "Encoder-Decoder with Atrous Separable
Convolution for Semantic Image Segmentation", arXiv:1802.02611), the segmentation model of
MLPerf Mobile v0.7 to v1.1 (ADE20K with 32 classes at 512x512: mlcommons/mobile_models
`v0_7/tflite/README.md`, whose model is TF DeepLab's `deeplabv3_mnv2_ade20k_train`, and
mobile_app_open `flutter/cpp/datasets/README.md` for the 512x512 inputs), in the layout of
github.com/tensorflow/models `research/deeplab` (`model.py`, `core/feature_extractor.py`)
with the MobileNetV2 settings of its ADE20K checkpoint (model_zoo.md: ASPP "N/A", decoder at
output stride 4):

- encoder: MobileNetV2 layers 1-18 (TF-slim numbering; no 1280 conv, no classifier) at
  output stride 16: layer 15 keeps stride 1 and layers 16-18 dilate their depthwise convs
  by 2; batchnorm + ReLU6 as in MobileNetV2;
- ASPP without atrous branches (none for MobileNetV2): an image-pooling branch (average
  pool, 1x1 conv to 256, batchnorm, ReLU, resized back) and a 1x1 conv to 256, concatenated
  and projected by a 1x1 conv to 256;
- decoder: layer_4's depthwise output (144 channels at stride 4) through a 1x1 conv to 48,
  concatenated with the ASPP output resized to stride 4, then two separable convs (3x3
  depthwise and 1x1 to 256, each with batchnorm and ReLU);
- logits: a 1x1 conv with bias to 32 classes at stride 4, resized to the input.

No parameter or multiply-add figure is published for this model (the ADE20K model zoo gives
mIoU and file size only). Its DeepLabv3 form (`decoder=False`, 21 PASCAL VOC classes,
513x513) is published: 2.75B multiply-adds at eval output stride 16 (research/deeplab
g3doc/model_zoo.md, mobilenetv2_coco_voc_trainaug) and 2.11 M params (Sandler et al. 2018,
arXiv:1801.04381, Table 7, MNet V2*); tests/validation/test_zoo_phone.py checks both and
counts the DeepLabv3+ form again in closed form.
"""

from __future__ import annotations

from accelsim.errors import ShapeError
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.mobilenet import V2_SETTINGS, V2_STEM
from accelsim.workload.zoo.resnet import conv_bn

_EPS = 1e-3  # TF-slim MobileNetV2 batchnorm epsilon
_OUTPUT_STRIDE, _DECODER_STRIDE = 16, 4
_TAP = 4  # layer_4/depthwise_output, the decoder's low-level feature
_ASPP, _LOW, _DECODER = 256, 48, 256


def _encoder(g: GraphBuilder, x: str) -> tuple[str, str]:
    """MobileNetV2 layers 1-18 at output stride 16; returns (layer_18, layer_4 depthwise)."""
    with g.scope("layer_1"):
        x = conv_bn(g, x, V2_STEM, 3, 2, name="conv", act="relu6", eps=_EPS)
    i, stride, rate, low = 2, 2, 1, ""
    for t, c, n, s in V2_SETTINGS:
        for r in range(n):
            layer_stride, layer_rate = (s if r == 0 else 1), rate
            if stride == _OUTPUT_STRIDE and layer_stride > 1:
                # slim's mobilenet: past the output stride a stride becomes a dilation of the
                # layers after it (this layer keeps rate 1, as in slim).
                rate *= layer_stride
                layer_stride = 1
            stride *= layer_stride
            cin = g.shape(x)[0]
            with g.scope(f"layer_{i}"):
                y = x
                if t != 1:
                    y = conv_bn(g, y, cin * t, 1, name="expand", act="relu6", eps=_EPS)
                y = g.conv2d(y, out_channels=cin * t, kernel=3, stride=layer_stride,
                             padding=layer_rate, dilation=layer_rate, groups=cin * t,
                             bias=False, name="depthwise")
                y = g.relu6(g.batchnorm(y, eps=_EPS, name="depthwise.bn"),
                            name="depthwise.relu6")
                if i == _TAP:
                    low = y
                y = conv_bn(g, y, c, 1, relu=False, name="project", eps=_EPS)
                if layer_stride == 1 and cin == c:
                    y = g.add(x, y, name="add")
            x = y
            i += 1
    return x, low


def _separable(g: GraphBuilder, x: str, out: int, name: str) -> str:
    c = g.shape(x)[0]
    with g.scope(name):
        y = conv_bn(g, x, c, 3, groups=c, name="depthwise")
        return conv_bn(g, y, out, 1, name="pointwise")


def resize(g: GraphBuilder, x: str, size: int, name: str) -> str:
    """Resize a (C, h, w) map to (C, size, size): upsample by ceil(size / h), then crop.
    NB: DeepLab resizes bilinearly; nearest-neighbour upsampling and a crop move the same
    bytes (the few interpolation FLOPs per output element are not counted)."""
    side = g.shape(x)[1]
    factor = -(-size // side)
    y = g.upsample(x, scale_factor=factor, name=name) if factor > 1 else x
    if side * factor != size:
        y = g.slice(y, axes=(1, 2), starts=(0, 0), ends=(size, size), name=f"{name}.crop")
    return y


@model("deeplabv3plus_mobilenet_v2")
def deeplabv3plus_mobilenet_v2(image_size: int = 512, classes: int = 32,
                               decoder: bool = True) -> Graph:
    """`decoder=False` is DeepLabv3 (no decoder: logits at output stride 16), the layout of
    TF DeepLab's PASCAL VOC MobileNetV2 checkpoints."""
    if image_size < _OUTPUT_STRIDE:
        raise ShapeError(f"deeplabv3plus_mobilenet_v2: image_size {image_size} is below its "
                         f"output stride {_OUTPUT_STRIDE}")
    g = GraphBuilder("deeplabv3plus_mobilenet_v2", family="deeplab")
    x = g.input("image", (3, image_size, image_size))
    feats, low = _encoder(g, x)
    with g.scope("aspp"):
        p = g.global_avgpool(feats, name="image_pooling.avgpool")
        p = g.reshape(p, shape=(g.shape(feats)[0], 1, 1), name="image_pooling.view")
        p = conv_bn(g, p, _ASPP, 1, name="image_pooling.conv")
        p = resize(g, p, g.shape(feats)[1], "image_pooling.resize")
        a = conv_bn(g, feats, _ASPP, 1, name="aspp0")
        y = conv_bn(g, g.concat(p, a, axis=0, name="concat"), _ASPP, 1,
                    name="concat_projection")
    if decoder:
        with g.scope("decoder"):
            low = conv_bn(g, low, _LOW, 1, name="feature_projection0")
            y = resize(g, y, g.shape(low)[1], "resize")
            y = g.concat(y, low, axis=0, name="concat")
            y = _separable(g, y, _DECODER, "decoder_conv0")
            y = _separable(g, y, _DECODER, "decoder_conv1")
    y = g.conv2d(y, out_channels=classes, kernel=1, name="logits")
    y = resize(g, y, image_size, "resize_logits")
    # NB: the argmax over classes that ends the TFLite graph is left out (no such op here;
    # one compare per logit).
    return g.build(outputs=(y,))
