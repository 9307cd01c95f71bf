"""3D U-Net of the MLPerf Training image-segmentation benchmark (KiTS19), after the reference
implementation `image_segmentation/pytorch/model/unet3d.py` and `model/layers.py` in
github.com/mlcommons/training (itself the nnU-Net 3D full-resolution layout, Isensee et al.
2021, on the U-Net of Cicek et al. 2016, arXiv:1606.06650).

Layout (filters 32, 64, 128, 256, 320 and a 320 bottleneck; input 1 x 128^3 patches):

- `input_block`: two conv blocks 1 -> 32 at full resolution;
- `downsample.0..3`: 32 -> 64 -> 128 -> 256 -> 320, each a stride-2 conv block then a
  stride-1 one; `bottleneck`: the same, 320 -> 320 (128^3 -> 4^3 after five halvings);
- `upsample.0..4`: 320 -> 320 -> 256 -> 128 -> 64 -> 32, each a 2x2x2 stride-2 transposed
  conv, a concat with the encoder output of the same size, then two conv blocks;
- `output`: a 1x1x1 conv (with bias) to 3 classes.

A conv block is conv3d 3x3x3 (padding 1, no bias) -> instancenorm (affine) -> ReLU.

Parameters, counted layer by layer: 31,190,243 (31.18 M conv weights;
`tests/validation/test_zoo_cnn.py` counts them again in closed form). A "19 M" figure is
sometimes quoted for this benchmark; it
does not follow from these layers (five levels without the 320 bottleneck give 16.5 M, so
it does not fit a shallower variant either) and is not used here. 477 G multiply-adds per
128^3 patch.
"""

from __future__ import annotations

from accelsim.errors import ShapeError
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model

FILTERS = (32, 64, 128, 256, 320)
CLASSES = 3


def _conv_block(g: GraphBuilder, x: str, out: int, stride: int = 1, name: str = "conv") -> str:
    """conv3d 3x3x3 (no bias) -> instancenorm (affine) -> ReLU."""
    y = g.conv3d(x, out_channels=out, kernel=3, stride=stride, padding=1, bias=False, name=name)
    y = g.instancenorm(y, affine=True, name=f"{name}.norm")
    return g.relu(y, name=f"{name}.relu")


def _down(g: GraphBuilder, x: str, out: int, stride: int) -> str:
    return _conv_block(g, _conv_block(g, x, out, stride, name="conv1"), out, name="conv2")


def _up(g: GraphBuilder, x: str, skip: str, out: int) -> str:
    # NB: the transposed conv keeps its bias (normalization "none" in the reference).
    y = g.conv_transpose3d(x, out_channels=out, kernel=2, stride=2, name="upsample_conv")
    y = g.concat(y, skip, axis=0, name="concat")
    return _down(g, y, out, 1)


@model("unet3d")
def unet3d(volume_size: int = 128, in_channels: int = 1, classes: int = CLASSES) -> Graph:
    halvings = len(FILTERS)  # four downsample blocks and the bottleneck
    if volume_size % 2**halvings:
        raise ShapeError(f"unet3d: volume_size {volume_size} must be a multiple of "
                         f"{2**halvings} (it is halved {halvings} times and doubled back)")
    g = GraphBuilder("unet3d", family="unet3d")
    x = g.input("volume", (in_channels, volume_size, volume_size, volume_size))
    with g.scope("input_block"):
        x = _down(g, x, FILTERS[0], 1)
    skips = [x]
    for i, out in enumerate(FILTERS[1:]):
        with g.scope(f"downsample.{i}"):
            x = _down(g, x, out, 2)
        skips.append(x)
    with g.scope("bottleneck"):
        x = _down(g, x, FILTERS[-1], 2)
    for i, (skip, out) in enumerate(zip(reversed(skips), reversed(FILTERS), strict=True)):
        with g.scope(f"upsample.{i}"):
            x = _up(g, x, skip, out)
    g.conv3d(x, out_channels=classes, kernel=1, name="output.conv")
    return g.build()
