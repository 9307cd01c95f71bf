"""YOLOv3 at 416x416, 80 classes (Redmon & Farhadi 2018, "YOLOv3: An Incremental Improvement",
arXiv:1804.02767), layer by layer as Darknet's cfg/yolov3.cfg (github.com/pjreddie/darknet):

- Darknet-53 backbone (the paper's Table 1): a 3x3 conv of 32, then five stages, each a 3x3
  stride-2 conv (64, 128, 256, 512, 1024 channels) and 1, 2, 8, 8, 4 residual blocks of a 1x1
  conv to half the channels and a 3x3 conv back, added to the block's input;
- three detection heads, at strides 32, 16 and 8 (13x13, 26x26, 52x52): five alternating
  1x1 / 3x3 convs, a 3x3 conv, and a 1x1 conv with bias to 3 anchors x (4 box + 1 objectness +
  80 classes) = 255 channels; the fifth conv's output also feeds a 1x1 conv, a 2x nearest
  upsample and a concat with the backbone's map of the next stride (Darknet's route layers).

Every conv but the three output convs is conv (no bias) -> batchnorm -> leaky ReLU (slope
0.1). Op names: `darknet.stageK.down`, `darknet.stageK.R.conv1` and `head1.conv1`, with the
route layers as `head1.route` (1x1 conv, upsample, concat).
Published: 61,949,149 params (the Darknet weights as converted to Keras or PyTorch); 65.86
G FLOPs (32.9 G multiply-adds) for YOLOv3-416 on the Darknet site (pjreddie.com/darknet/yolo).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model
from accelsim.workload.zoo.resnet import conv_bn

_SLOPE = 0.1  # Darknet's "leaky" activation
_STAGES = ((64, 1), (128, 2), (256, 8), (512, 8), (1024, 4))  # channels, residual blocks
_ANCHORS_PER_SCALE = 3
_BOX = 5  # x, y, w, h, objectness


def _conv(g: GraphBuilder, x: str, out: int, k: int, stride: int = 1,
          name: str = "conv") -> str:
    return conv_bn(g, x, out, k, stride, name=name, act="leaky_relu", negative_slope=_SLOPE)


def _darknet53(g: GraphBuilder, x: str) -> list[str]:
    """The backbone; returns the outputs of stages 3, 4 and 5 (strides 8, 16, 32)."""
    outs = []
    with g.scope("darknet"):
        x = _conv(g, x, 32, 3, name="conv0")
        for s, (ch, blocks) in enumerate(_STAGES, start=1):
            with g.scope(f"stage{s}"):
                x = _conv(g, x, ch, 3, 2, name="down")
                for r in range(blocks):
                    with g.scope(str(r)):
                        y = _conv(g, _conv(g, x, ch // 2, 1, name="conv1"), ch, 3, name="conv2")
                        x = g.add(x, y, name="add")
            outs.append(x)
    return outs[2:]


def _head(g: GraphBuilder, x: str, width: int, outputs: int) -> tuple[str, str]:
    """Five alternating 1x1 / 3x3 convs (the route's branch), a 3x3 conv, the output conv."""
    for j in range(5):
        x = _conv(g, x, width if j % 2 == 0 else 2 * width, 1 if j % 2 == 0 else 3,
                  name=f"conv{j + 1}")
    y = _conv(g, x, 2 * width, 3, name="conv6")
    return x, g.conv2d(y, out_channels=outputs, kernel=1, name="output")


@model("yolov3")
def yolov3(image_size: int = 416, classes: int = 80) -> Graph:
    g = GraphBuilder("yolov3", family="yolo")
    x = g.input("image", (3, image_size, image_size))
    skips = _darknet53(g, x)  # strides 8, 16, 32
    outputs = _ANCHORS_PER_SCALE * (_BOX + classes)
    x, maps = skips.pop(), []
    for k, width in enumerate((512, 256, 128), start=1):
        with g.scope(f"head{k}"):
            branch, out = _head(g, x, width, outputs)
            maps.append(out)
            if skips:
                with g.scope("route"):
                    y = _conv(g, branch, width // 2, 1, name="conv")
                    y = g.upsample(y, scale_factor=2, name="upsample")
                    x = g.concat(y, skips.pop(), axis=0, name="concat")
    # NB: the YOLO layers' decoding (sigmoid of x, y, objectness and classes, exp of w, h
    # against the anchors) and non-max suppression are left out: the outputs are raw maps.
    return g.build(outputs=tuple(maps))
