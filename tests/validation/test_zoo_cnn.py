"""Validation of the CNN zoo models against published parameter and multiply-add counts.

MACs are compared as the sum of the conv / linear rows of `counts_table` (matmul-like ops)
divided by 2, which is what published MAC figures count; pooling, normalisation and
elementwise FLOPs, which `totals()` also includes, are checked separately to be small.
"""

from __future__ import annotations

import time

import pytest

from accelsim.errors import ShapeError
from accelsim.workload.ops import MATMUL_KINDS
from accelsim.workload.tables import counts_table, totals, unsupported_ops
from accelsim.workload.zoo import MODELS, build_model, model_knobs, model_names

MATMUL_NAMES = {k.value for k in MATMUL_KINDS}


def matmul_macs(name: str, **knobs: int) -> float:
    c = counts_table(build_model(name, **knobs))
    return float(c.loc[c["op"].isin(MATMUL_NAMES), "fwd_flops"].sum()) / 2


# name -> (published params, exact?, published MACs); sources in the comments
PUBLISHED = {
    # torchvision mobilenet_v2 weights table: 3,504,872 params, 0.30 GFLOPS (= G MACs);
    # Sandler et al. 2018, Table 4: 300 M multiply-adds.
    "mobilenet_v2": (3_504_872, True, 300e6),
    # torchvision vgg16: 138,357,544 params, 15.47 G MACs; Simonyan & Zisserman Table 2: 138 M.
    "vgg16": (138_357_544, True, 15.5e9),
    # torchvision googlenet (aux_logits=False): 6,624,904 params, 1.50 G MACs.
    "inception_v1": (6_624_904, True, 1.5e9),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_match_published(name: str) -> None:
    params, exact, _ = PUBLISHED[name]
    got = build_model(name).params
    if exact:
        assert got == params
    else:
        assert got == pytest.approx(params, rel=0.02)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_macs_match_published(name: str) -> None:
    _, _, macs = PUBLISHED[name]
    assert matmul_macs(name) == pytest.approx(macs, rel=0.05)
    # Everything else (pooling, batchnorm, activations, adds) is a few percent on top.
    total = totals(build_model(name))["flops_per_sample"] / 2
    assert matmul_macs(name) <= total <= 1.10 * matmul_macs(name)


def unet3d_params_closed_form(filters: tuple[int, ...] = (32, 64, 128, 256, 320),
                              in_ch: int = 1, classes: int = 3) -> int:
    """Count the MLPerf 3D U-Net's parameters from its layer list, independently of the zoo.

    conv block (c -> o): 27*c*o weights (no bias) + 2*o instancenorm affine params.
    """
    def block(c: int, o: int) -> int:
        return 27 * c * o + 2 * o

    total = block(in_ch, filters[0]) + block(filters[0], filters[0])  # input block
    encoder = [*zip(filters[:-1], filters[1:], strict=True), (filters[-1], filters[-1])]
    total += sum(block(c, o) + block(o, o) for c, o in encoder)  # downsample + bottleneck
    decoder = [(filters[-1], filters[-1]),
               *zip(filters[:0:-1], filters[-2::-1], strict=True)]
    for c, o in decoder:  # transposed conv 2x2x2 with bias, then conv blocks on 2*o and o
        total += 8 * c * o + o + block(2 * o, o) + block(o, o)
    return total + filters[0] * classes + classes  # 1x1x1 output conv with bias


def test_unet3d_params_from_layer_list() -> None:
    expected = unet3d_params_closed_form()
    assert expected == 31_190_243
    assert build_model("unet3d").params == expected


def test_unet3d_macs_closed_form() -> None:
    # Per level: two 3x3x3 conv blocks at that level's resolution; decoders add the transposed
    # conv (8 MACs per input voxel per in*out pair). Computed here from the voxel counts.
    v, f = 128, (32, 64, 128, 256, 320, 320)
    vox = [(v // 2**i) ** 3 for i in range(6)]
    enc = 27 * vox[0] * (1 * f[0] + f[0] * f[0])
    enc += sum(27 * vox[i] * (f[i - 1] * f[i] + f[i] * f[i]) for i in range(1, 6))
    dec = sum(8 * vox[i + 1] * f[i + 1] * f[i] + 27 * vox[i] * (2 * f[i] * f[i] + f[i] * f[i])
              for i in range(5))
    out = vox[0] * f[0] * 3
    assert matmul_macs("unet3d") == enc + dec + out


@pytest.mark.parametrize(("name", "out"), [
    ("mobilenet_v2", (1000,)), ("vgg16", (1000,)), ("inception_v1", (1000,)),
    ("unet3d", (3, 128, 128, 128)),
])
def test_output_shapes(name: str, out: tuple[int, ...]) -> None:
    g = build_model(name)
    assert g.shapes[g.outputs[0]] == out
    assert unsupported_ops(g) == []


@pytest.mark.parametrize("name", ["mobilenet_v2", "vgg16", "inception_v1", "unet3d"])
def test_builds_fast(name: str) -> None:
    start = time.perf_counter()
    MODELS[name]()  # uncached
    assert time.perf_counter() - start < 0.25


def test_knob_defaults() -> None:
    assert {"mobilenet_v2", "vgg16", "inception_v1", "unet3d"} <= set(model_names())
    for name in ("mobilenet_v2", "vgg16", "inception_v1"):
        assert model_knobs(name)["image_size"] == 224
    assert model_knobs("unet3d")["volume_size"] == 128


@pytest.mark.parametrize(("name", "size"), [
    ("mobilenet_v2", 160), ("vgg16", 448), ("inception_v1", 299),
])
def test_image_size_knob(name: str, size: int) -> None:
    """Weights do not depend on the input size; MACs scale about with the pixel count."""
    g = build_model(name, image_size=size)
    assert g.inputs["image"][0] == (3, size, size)
    assert g.shapes[g.outputs[0]] == (1000,)
    assert g.params == build_model(name).params
    ratio = matmul_macs(name, image_size=size) / matmul_macs(name)
    assert ratio == pytest.approx((size / 224) ** 2, rel=0.15)


def test_vgg16_exact_at_multiple_of_7() -> None:
    # At 448 the 14x14 map is average-pooled 2x2 to 7x7, as the adaptive pool does; convs
    # cost exactly 4x, the classifier the same.
    fc = 25088 * 4096 + 4096 * 4096 + 4096 * 1000
    conv = matmul_macs("vgg16") - fc
    assert matmul_macs("vgg16", image_size=448) == 4 * conv + fc
    with pytest.raises(ShapeError, match="image_size >= 224"):
        build_model("vgg16", image_size=128)


def test_unet3d_volume_knob() -> None:
    g = build_model("unet3d", volume_size=64)
    assert g.inputs["volume"][0] == (1, 64, 64, 64)
    assert g.shapes[g.outputs[0]] == (3, 64, 64, 64)
    assert g.params == build_model("unet3d").params
    assert matmul_macs("unet3d", volume_size=64) * 8 == matmul_macs("unet3d")
    with pytest.raises(ShapeError, match="multiple of 32"):
        build_model("unet3d", volume_size=100)


def test_names_are_readable() -> None:
    mb = build_model("mobilenet_v2")
    assert mb.op("features.3.conv.dw").attrs["groups"] == 144
    assert mb.op("features.3.conv.dw.relu6").kind.value == "relu6"
    assert mb.op("features.3.add").output_shape == (24, 56, 56)
    assert build_model("vgg16").op("classifier.0").param_shapes["weight"] == (4096, 25088)
    inc = build_model("inception_v1")
    assert inc.op("inception3a.concat").output_shape == (256, 28, 28)
    assert inc.op("inception5b.concat").output_shape == (1024, 7, 7)
    un = build_model("unet3d")
    assert un.op("bottleneck.conv2").output_shape == (320, 4, 4, 4)
    assert un.op("upsample.4.concat").output_shape == (64, 128, 128, 128)
