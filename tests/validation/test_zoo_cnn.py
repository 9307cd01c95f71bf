"""Validation of the CNN zoo models against published parameter and multiply-add counts.

MACs are compared as the sum of the conv / linear rows of `counts_table` (matmul-like ops)
divided by 2, which is what published MAC figures count; pooling, normalisation and
elementwise FLOPs, which `totals()` also includes, are checked separately to be small.
"""

from __future__ import annotations

import json
import time

import pytest

from accelsim.errors import ShapeError
from accelsim.workload.ops import MATMUL_KINDS
from accelsim.workload.tables import counts_table, totals, unsupported_ops
from accelsim.workload.zoo import MODELS, build_model, model_knobs, model_names
from tests.helpers.cli import run_cli

MATMUL_NAMES = {k.value for k in MATMUL_KINDS}


def matmul_macs(name: str, **knobs: int) -> float:
    c = counts_table(build_model(name, **knobs))
    return float(c.loc[c["op"].isin(MATMUL_NAMES), "fwd_flops"].sum()) / 2


# torchvision's InceptionAux (training only, left out of inception_v3): a 1x1 conv 768 -> 128
# and a 5x5 conv 128 -> 768, each without bias and with batchnorm, then an FC 768 -> 1000.
INCEPTION_V3_AUX = 768 * 128 + 2 * 128 + 128 * 768 * 25 + 2 * 768 + 768 * 1000 + 1000

# name -> (published params, tolerance of that figure, published MACs); sources in the
# comments. Tolerance 0: the figure is exact; otherwise half its last published digit.
PUBLISHED = {
    # torchvision mobilenet_v2 weights table: 3,504,872 params, 0.30 GFLOPS (= G MACs);
    # Sandler et al. 2018, Table 4: 300 M multiply-adds.
    "mobilenet_v2": (3_504_872, 0, 300e6),
    # torchvision vgg16: 138,357,544 params, 15.47 G MACs; Simonyan & Zisserman Table 2: 138 M.
    "vgg16": (138_357_544, 0, 15.5e9),
    # torchvision googlenet (aux_logits=False): 6,624,904 params, 1.50 G MACs.
    "inception_v1": (6_624_904, 0, 1.5e9),
    # torchvision ResNet101_Weights: num_params 44,549,160, GFLOPS 7.80 (= G MACs).
    "resnet101": (44_549_160, 0, 7.80e9),
    # torchvision ResNet152_Weights: num_params 60,192,808, GFLOPS 11.51.
    "resnet152": (60_192_808, 0, 11.51e9),
    # torchvision VGG19_Weights: num_params 143,667,240, GFLOPS 19.63.
    "vgg19": (143_667_240, 0, 19.63e9),
    # torchvision Inception_V3_Weights: num_params 27,161,264 (with the auxiliary classifier),
    # GFLOPS 5.71 at 299x299 (the auxiliary classifier does not run at inference).
    "inception_v3": (27_161_264 - INCEPTION_V3_AUX, 0, 5.71e9),
    # timm results (results/benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv, inception_v4 at
    # 299): param_count 42.68 (M), infer_gmacs 12.28.
    "inception_v4": (42_680_000, 5_000, 12.28e9),
    # torchvision SqueezeNet1_1_Weights: num_params 1,235,496, GFLOPS 0.35.
    "squeezenet1_1": (1_235_496, 0, 0.35e9),
    # torchvision DenseNet121_Weights: num_params 7,978,856, GFLOPS 2.83.
    "densenet121": (7_978_856, 0, 2.83e9),
    # torchvision EfficientNet_B0_Weights: num_params 5,288,548, GFLOPS 0.39; Tan & Le 2019,
    # Table 2: 5.3 M params, 0.39 B FLOPs (multiply-adds).
    "efficientnet_b0": (5_288_548, 0, 0.39e9),
    # torchvision MobileNet_V3_Large_Weights: num_params 5,483,032, GFLOPS 0.22; Howard et al.
    # 2019, Table 3: 5.4 M params, 219 M MAdds (the figure checked here).
    "mobilenet_v3_large": (5_483_032, 0, 0.219e9),
    # OpenVINO Open Model Zoo, ssdlite_mobilenet_v2 (the TF OD API ssdlite_mobilenet_v2_coco,
    # 300x300): MParams 4.475, GFLOPs 1.525 (2 FLOPs a multiply-add). Its converted graph
    # folds each batchnorm into its conv (gamma, beta -> one bias): see FOLDED_BN. Sandler
    # et al. 2018, Table 6, give 4.3 M params and 0.8 B MAdds for SSDLite, 6% above.
    "ssd_mobilenet_v2": (4_475_000, 500, 1.525e9 / 2),
    # YOLOv3-416: the Darknet yolov3.weights as a Keras model ("Trainable params: 61,949,149")
    # and ultralytics/yolov3's model summary (61949149 parameters); pjreddie.com/darknet/yolo:
    # 65.86 Bn FLOPS (Darknet counts 2 per multiply-add).
    "yolov3": (61_949_149, 0, 65.86e9 / 2),
}
FOLDED_BN = {"ssd_mobilenet_v2"}  # published with batchnorm folded: one param per channel
NEW_MODELS = ("resnet101", "resnet152", "vgg19", "inception_v3", "inception_v4",
              "squeezenet1_1", "densenet121", "efficientnet_b0", "mobilenet_v3_large",
              "ssd_mobilenet_v2", "yolov3")


def bn_channels(graph) -> int:
    return sum(op.output_shape[0] for op in graph.ops if op.kind.value == "batchnorm")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_match_published(name: str) -> None:
    params, tol, _ = PUBLISHED[name]
    g = build_model(name)
    got = g.params - (bn_channels(g) if name in FOLDED_BN else 0)
    if tol == 0:
        assert got == params
    else:
        assert abs(got - params) <= tol


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
    *((name, (1000,)) for name in NEW_MODELS[:-2]),
])
def test_output_shapes(name: str, out: tuple[int, ...]) -> None:
    g = build_model(name)
    assert g.shapes[g.outputs[0]] == out
    assert unsupported_ops(g) == []


def test_detector_outputs() -> None:
    # SSD300 on MobileNetV2: 19x19x3 + (10x10 + 5x5 + 3x3 + 2x2 + 1x1) x 6 = 1,917 anchors, each
    # with 4 box codes and 90 COCO classes + background.
    ssd = build_model("ssd_mobilenet_v2")
    assert [ssd.shapes[o] for o in ssd.outputs] == [(1917, 4), (1917, 91)]
    assert ssd.op("layer_15.conv.expand.relu6").output_shape == (576, 19, 19)
    # YOLOv3-416: 3 anchors x (4 + 1 + 80) channels at strides 32, 16, 8.
    yolo = build_model("yolov3")
    assert [yolo.shapes[o] for o in yolo.outputs] == [(255, 13, 13), (255, 26, 26),
                                                      (255, 52, 52)]
    assert yolo.op("head2.route.concat").output_shape == (384, 52, 52)
    for g in (ssd, yolo):
        assert unsupported_ops(g) == []


@pytest.mark.parametrize("name", NEW_MODELS)
def test_new_models_simulate(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, err = run_cli(capsys, "simulate", name, "--hw", "a100", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["unsupported_ops"] == []
    assert res["throughput_samples_per_s"] > 0


@pytest.mark.parametrize("name", ["mobilenet_v2", "vgg16", "inception_v1", "unet3d",
                                  *NEW_MODELS])
def test_builds_fast(name: str) -> None:
    """A guard against a pathological (quadratic) build, not a speed figure: 2 s is ten times
    the slowest build on a loaded 2-core machine (benchmarks/speed/ measures speed)."""
    start = time.perf_counter()
    MODELS[name]()  # uncached
    assert time.perf_counter() - start < 2.0


def test_knob_defaults() -> None:
    assert {"mobilenet_v2", "vgg16", "inception_v1", "unet3d", *NEW_MODELS} <= set(model_names())
    for name in ("mobilenet_v2", "vgg16", "inception_v1", "resnet152", "densenet121",
                 "efficientnet_b0", "mobilenet_v3_large", "squeezenet1_1"):
        assert model_knobs(name)["image_size"] == 224
    assert model_knobs("unet3d")["volume_size"] == 128
    sizes = {"inception_v3": 299, "inception_v4": 299, "ssd_mobilenet_v2": 300, "yolov3": 416}
    for name, size in sizes.items():
        assert model_knobs(name)["image_size"] == size


@pytest.mark.parametrize(("name", "size"), [
    ("mobilenet_v2", 160), ("vgg16", 448), ("inception_v1", 299), ("resnet101", 288),
    ("efficientnet_b0", 256), ("mobilenet_v3_large", 192), ("densenet121", 256),
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
    v3 = build_model("mobilenet_v3_large")
    assert v3.op("features.4.block.se.fc1").param_shapes["weight"] == (24, 72, 1, 1)
    assert v3.op("features.4.block.se.scale").output_shape == (72, 28, 28)
    assert v3.op("features.16.conv.hardswish").output_shape == (960, 7, 7)
    eff = build_model("efficientnet_b0")
    assert eff.op("features.6.3.block.se.fc1").param_shapes["weight"] == (48, 1152, 1, 1)
    dn = build_model("densenet121")
    assert dn.op("features.denseblock4.denselayer16.concat").output_shape == (1024, 7, 7)
    v3i = build_model("inception_v3")
    assert v3i.op("Mixed_7c.concat").output_shape == (2048, 8, 8)
    assert build_model("inception_v4").op("features.21.concat").output_shape == (1536, 8, 8)
    assert build_model("squeezenet1_1").op("features.12.concat").output_shape == (512, 13, 13)
