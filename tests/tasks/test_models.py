"""Network definitions (tasks/models): shapes, exact parameter counts, TF/Caffe/MXNet layer semantics, init."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from commbench.tasks.models import AlexNetBN, CifarNet, GoogLeNetBN, NiN, resnet20, resnet50, vgg11
from commbench.tasks.models._tf import BatchNormNoScale, SamePad2d, conv_same, max_pool_same, same_padding, tf_lrn
from commbench.tasks.models.resnet_cifar import VARIANTS

MODELS_DIR = Path(__file__).resolve().parents[2] / "tasks" / "models"


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def shapes_seen(model: nn.Module, x: torch.Tensor, kinds: tuple[type, ...]) -> list[tuple[int, ...]]:
    """Output shapes of every module of the given kinds, in call order, for one eval forward."""
    seen: list[tuple[int, ...]] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: seen.append(tuple(out.shape)))
             for m in model.modules() if isinstance(m, kinds)]
    model.eval()
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def assert_eval_deterministic(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        a, b = model(x), model(x)
    assert torch.equal(a, b)
    assert torch.isfinite(a).all()
    return a


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------- TF layer semantics (tasks/models/_tf.py)

@pytest.mark.parametrize("size,kernel,stride,expected", [
    (24, 3, 2, (0, 1)),    # CifarNet pool1: 24 -> 12, the extra row at the bottom
    (12, 3, 2, (0, 1)),    # CifarNet pool2: 12 -> 6
    (224, 11, 4, (3, 4)),  # AlexNet conv1: 224 -> 56
    (224, 7, 2, (2, 3)),   # GoogLeNet Conv2d_1a: 224 -> 112
    (112, 3, 2, (0, 1)),   # GoogLeNet MaxPool_2a
    (14, 2, 2, (0, 0)),    # GoogLeNet MaxPool_5a_2x2
    (13, 3, 1, (1, 1)),
])
def test_tf_same_padding_amounts(size, kernel, stride, expected):
    assert same_padding(size, kernel, stride) == expected


def test_tf_same_max_pool_windows_are_anchored_top_left():
    x = torch.arange(24 * 24, dtype=torch.float32).view(1, 1, 24, 24)  # increasing: a window's max is its corner
    out = max_pool_same(3, 2)(x)
    assert out.shape == (1, 1, 12, 12)
    assert out[0, 0, 0, 0] == x[0, 0, 2, 2]  # window rows/cols 0..2 (symmetric padding would give x[1, 1])
    assert out[0, 0, 11, 11] == x[0, 0, 23, 23]  # rows/cols 22..23 + one -inf pad
    neg = -x  # max now at a window's top-left corner: padding must be -inf, not 0
    assert max_pool_same(3, 2)(neg)[0, 0, 11, 11] == neg[0, 0, 22, 22]


def test_tf_same_strided_conv_alignment():
    # 7x7/2 SAME on 224 pads 2 before and 3 after, so a centre-tap kernel samples the odd pixels.
    conv = conv_same(1, 1, 7, stride=2, bias=False)
    assert isinstance(conv[0], SamePad2d)
    with torch.no_grad():
        conv[1].weight.zero_()
        conv[1].weight[0, 0, 3, 3] = 1.0
    x = torch.randn(1, 1, 224, 224)
    assert torch.equal(conv(x), x[:, :, 1::2, 1::2])


@pytest.mark.parametrize("radius,bias,alpha,beta", [
    (4, 1.0, 0.001 / 9, 0.75),  # CifarNet
    (2, 2.0, 1e-4, 0.75),  # AlexNet (old slim ops.lrn defaults)
    (2, 1.0, 0.3, 0.75),  # a large alpha, so a size-scaling mistake cannot hide in rounding
])
def test_tf_lrn_matches_tf_formula(radius, bias, alpha, beta):
    x = torch.randn(2, 16, 3, 3)
    sq = x.pow(2)
    sqr_sum = torch.stack([sq[:, max(0, d - radius):d + radius + 1].sum(1) for d in range(16)], 1)
    expected = x / (bias + alpha * sqr_sum) ** beta
    torch.testing.assert_close(tf_lrn(radius, bias, alpha, beta)(x), expected, rtol=1e-5, atol=1e-6)


def test_batch_norm_no_scale():
    bn = BatchNormNoScale(4)
    assert bn.weight is None and isinstance(bn.bias, nn.Parameter) and bn.bias.shape == (4,)
    assert [n for n, _ in bn.named_parameters()] == ["bias"]
    assert bn.momentum == pytest.approx(1 - 0.9997) and bn.eps == 1e-3
    x = torch.randn(8, 4, 5, 5) * 3 + 2
    bn.train()
    bn(x)
    torch.testing.assert_close(bn.running_mean, 3e-4 * x.mean((0, 2, 3)))
    with torch.no_grad():
        bn.bias.fill_(0.5)
    bn.eval()
    expected = (x - bn.running_mean.view(1, 4, 1, 1)) / torch.sqrt(bn.running_var.view(1, 4, 1, 1) + 1e-3) + 0.5
    torch.testing.assert_close(bn(x), expected)


# ---------------------------------------------------------------- CifarNet

def test_cifarnet_shapes_and_count():
    model = CifarNet()
    # conv1 5*5*3*64+64 + conv2 5*5*64*64+64 + local3 (6*6*64)*384+384 + local4 384*192+192 + logits 192*10+10
    assert n_params(model) == 4_864 + 102_464 + 885_120 + 73_920 + 1_930 == 1_068_298
    x = torch.randn(2, 3, 24, 24)
    assert shapes_seen(model, x, (nn.MaxPool2d,)) == [(2, 64, 12, 12), (2, 64, 6, 6)]
    assert assert_eval_deterministic(model, x).shape == (2, 10)
    assert CifarNet(num_classes=7)(x).shape == (2, 7)


def test_cifarnet_layers_and_init():
    model = CifarNet()
    lrns = [m for m in model.modules() if isinstance(m, nn.LocalResponseNorm)]
    assert len(lrns) == 2
    for lrn in lrns:  # tf depth_radius 4, bias 1, alpha 0.001/9, beta 0.75
        assert (lrn.size, lrn.k, lrn.beta) == (9, 1.0, 0.75) and lrn.alpha == pytest.approx(0.001)
    layers = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    for layer, std, bias in zip(layers, (0.05, 0.05, 0.04, 0.04, 1 / 192), (0.0, 0.1, 0.1, 0.1, 0.0)):
        assert layer.weight.abs().max() <= 2 * std + 1e-7  # truncated at 2 std
        assert layer.weight.std().item() == pytest.approx(0.88 * std, rel=0.1)  # truncation shrinks std to 0.88
        assert torch.all(layer.bias == bias)
    params = dict(model.named_parameters())
    assert {tuple(params[n].shape) for n in model.decayed_weights} == {(384, 2304), (192, 384)}  # local3, local4
    # -inf pool padding must not leak into gradients.
    model.train()
    model(torch.randn(2, 3, 24, 24)).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


# ---------------------------------------------------------------- AlexNet-BN (TernGrad)

# Per conv: k*k*cin*cout weights + cout BN betas (no gamma, no bias), two towers each.
ALEXNET_CONVS = 2 * (11 * 11 * 3 * 48 + 48) \
    + 2 * (5 * 5 * 48 * 128 + 128) \
    + 2 * (3 * 3 * 256 * 192 + 192) \
    + 2 * (3 * 3 * 192 * 192 + 192) \
    + 2 * (3 * 3 * 192 * 128 + 128)
ALEXNET_FC = (6 * 6 * 256) * 4096 + 4096 + 4096 * 4096 + 4096  # fc6, fc7


@pytest.fixture(scope="module")
def alexnet() -> AlexNetBN:
    torch.manual_seed(0)
    return AlexNetBN()  # 61M parameters: built once


def test_alexnet_count_shapes_and_layout(alexnet):
    model = alexnet
    assert ALEXNET_CONVS == 2_334_080
    assert n_params(model) == ALEXNET_CONVS + ALEXNET_FC + 4096 * 1000 + 1000 == 60_965_224
    assert len(list(model.parameters())) == 10 * 2 + 3 * 2  # TF: one weights + one beta per conv, w + b per fc
    x = torch.randn(1, 3, 224, 224)
    pools = shapes_seen(model, x, (nn.MaxPool2d,))
    assert pools == [(1, 48, 27, 27)] * 2 + [(1, 128, 13, 13)] * 2 + [(1, 128, 6, 6)] * 2
    convs = shapes_seen(model, x, (nn.Conv2d,))
    assert convs[:2] == [(1, 48, 56, 56)] * 2  # 11x11/4 SAME: ceil(224/4)
    assert assert_eval_deterministic(model, x).shape == (1, 1000)
    with torch.device("meta"):
        assert n_params(AlexNetBN(num_classes=1001)) == 60_965_224 + 4097  # TernGrad's 1001 classes


def test_alexnet_bn_lrn_dropout_init(alexnet):
    model = alexnet
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert len(bns) == 10 and all(isinstance(m, BatchNormNoScale) for m in bns)
    assert all(m.momentum == pytest.approx(3e-4) and m.eps == 1e-3 and m.weight is None for m in bns)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 10 and all(c.bias is None for c in convs)
    assert all(c.weight.abs().max() <= 0.02 + 1e-7 for c in convs)  # truncated normal std 0.01
    lrns = [m for m in model.modules() if isinstance(m, nn.LocalResponseNorm)]
    assert len(lrns) == 4  # after conv1 and conv2 of each tower
    assert all((m.size, m.k, m.beta) == (5, 2.0, 0.75) and m.alpha == pytest.approx(5e-4) for m in lrns)
    fcs = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [fc.bias.detach().unique().tolist() for fc in fcs] == [[pytest.approx(0.1)]] * 2 + [[0.0]]
    for fc, std in zip(fcs, (0.005, 0.005, 0.01)):
        assert fc.weight.abs().max() <= 2 * std + 1e-7
        assert fc.weight.std().item() == pytest.approx(0.88 * std, rel=0.05)
    assert [m.p for m in model.modules() if isinstance(m, nn.Dropout)] == [0.5, 0.5]
    with torch.device("meta"):
        assert [m.p for m in AlexNetBN(dropout=0.2).modules() if isinstance(m, nn.Dropout)] == [0.2, 0.2]


# ---------------------------------------------------------------- GoogLeNet-BN (TF-slim Inception-v1)

def _bn_conv(k: int, cin: int, cout: int) -> int:
    return k * k * cin * cout + cout  # weights + BN beta


GOOGLENET_STEM = _bn_conv(7, 3, 64) + _bn_conv(1, 64, 64) + _bn_conv(3, 64, 192)  # 9472 + 4160 + 110784
# Each Mixed block: Branch_0 1x1 | Branch_1 1x1 -> 3x3 | Branch_2 1x1 -> 3x3 | Branch_3 pool -> 1x1 (+ betas)
GOOGLENET_MIXED = {
    "Mixed_3b": 192*64+64 + 192*96+96 + 9*96*128+128 + 192*16+16 + 9*16*32+32 + 192*32+32,            # 155,504
    "Mixed_3c": 256*128+128 + 256*128+128 + 9*128*192+192 + 256*32+32 + 9*32*96+96 + 256*64+64,       # 339,584
    "Mixed_4b": 480*192+192 + 480*96+96 + 9*96*208+208 + 480*16+16 + 9*16*48+48 + 480*64+64,          # 363,888
    "Mixed_4c": 512*160+160 + 512*112+112 + 9*112*224+224 + 512*24+24 + 9*24*64+64 + 512*64+64,       # 424,584
    "Mixed_4d": 512*128+128 + 512*128+128 + 9*128*256+256 + 512*24+24 + 9*24*64+64 + 512*64+64,       # 485,528
    "Mixed_4e": 512*112+112 + 512*144+144 + 9*144*288+288 + 512*32+32 + 9*32*64+64 + 512*64+64,       # 572,608
    "Mixed_4f": 528*256+256 + 528*160+160 + 9*160*320+320 + 528*32+32 + 9*32*128+128 + 528*128+128,   # 802,816
    "Mixed_5b": 832*256+256 + 832*160+160 + 9*160*320+320 + 832*32+32 + 9*32*128+128 + 832*128+128,   # 977,920
    "Mixed_5c": 832*384+384 + 832*192+192 + 9*192*384+384 + 832*48+48 + 9*48*128+128 + 832*128+128,   # 1,345,776
}


def test_googlenet_count_and_shapes():
    model = GoogLeNetBN()
    assert GOOGLENET_STEM == 124_416
    assert GOOGLENET_STEM + sum(GOOGLENET_MIXED.values()) == 5_592_624
    # + logits 1x1 conv 1024 -> 1000 with bias
    assert n_params(model) == 5_592_624 + 1024 * 1000 + 1000 == 6_617_624
    assert len(list(model.parameters())) == (3 + 9 * 6) * 2 + 2
    x = torch.randn(1, 3, 224, 224)
    model.eval()
    sizes, h = [], x
    with torch.no_grad():
        for layer in model.features:
            h = layer(h)
            sizes.append(tuple(h.shape[1:]))
    assert sizes == [
        (64, 112, 112), (64, 56, 56), (64, 56, 56), (192, 56, 56), (192, 28, 28),  # stem, SAME 7x7/2 and pools
        (256, 28, 28), (480, 28, 28), (480, 14, 14),  # 3b, 3c, MaxPool_4a
        (512, 14, 14), (512, 14, 14), (512, 14, 14), (528, 14, 14), (832, 14, 14), (832, 7, 7),  # 4b-4f, 5a 2x2
        (832, 7, 7), (1024, 7, 7), (1024, 1, 1),  # 5b, 5c, AvgPool 7x7 VALID
    ]
    with torch.no_grad():
        out = model(x)  # eval mode: same as the layer-by-layer pass above
    assert out.shape == (1, 1000) and torch.equal(out, model.logits(h).flatten(1))
    with torch.device("meta"):
        assert GoogLeNetBN(num_classes=1001)(x.to("meta")).shape == (1, 1001)


def test_googlenet_bn_no_lrn_no_aux_init_dropout():
    model = GoogLeNetBN(dropout=0.08)
    assert not any(isinstance(m, nn.LocalResponseNorm) for m in model.modules())
    assert not any("aux" in name.lower() for name, _ in model.named_modules())
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert len(bns) == 57 and all(isinstance(m, BatchNormNoScale) for m in bns)
    assert all(m.momentum == pytest.approx(3e-4) and m.eps == 1e-3 for m in bns)
    convs = [m for m in model.features.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 57 and all(c.bias is None for c in convs)
    assert all(c.weight.abs().max() <= 0.02 + 1e-7 for c in convs)  # inception_v1_base: trunc_normal(0.01)
    std = math.sqrt(1.3 * 2 / 1024)  # logits: slim variance_scaling_initializer(), factor 2, FAN_IN, truncated
    assert model.logits.weight.abs().max() <= 2 * std + 1e-7
    assert model.logits.weight.std().item() == pytest.approx(0.88 * std, rel=0.05)
    assert torch.all(model.logits.bias == 0)
    assert [m.p for m in model.modules() if isinstance(m, nn.Dropout)] == [0.08]
    with torch.device("meta"):
        assert [m.p for m in GoogLeNetBN().modules() if isinstance(m, nn.Dropout)] == [0.2]


# ---------------------------------------------------------------- NiN (Caffe model zoo)

NIN_1000 = (11 * 11 * 3 * 96 + 96) + 2 * (96 * 96 + 96) \
    + (5 * 5 * 96 * 256 + 256) + 2 * (256 * 256 + 256) \
    + (3 * 3 * 256 * 384 + 384) + 2 * (384 * 384 + 384) \
    + (3 * 3 * 384 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 1000 + 1000)  # conv4, cccp7, cccp8


def test_nin_count_and_shapes():
    model = NiN()
    assert n_params(model) == NIN_1000 == 7_595_176
    x = torch.randn(1, 3, 224, 224)
    pools = shapes_seen(model, x, (nn.MaxPool2d, nn.AvgPool2d))
    # conv1 11x11/4: 54; Caffe's ceil-mode pools: 54 -> 27 -> 13 -> 6; the 6x6 average pool is global.
    assert pools == [(1, 96, 27, 27), (1, 256, 13, 13), (1, 384, 6, 6), (1, 1000, 1, 1)]
    assert shapes_seen(model, x, (nn.Conv2d,))[-1] == (1, 1000, 6, 6)
    assert assert_eval_deterministic(model, x).shape == (1, 1000)
    small = NiN(num_classes=10)
    assert n_params(small) == NIN_1000 - 990 * 1025
    out = assert_eval_deterministic(small, x)
    assert out.shape == (1, 10) and (out >= 0).all()  # ReLU after cccp8, as in the prototxt


def test_nin_relu_dropout_init():
    model = NiN(dropout=0.3)
    layers = list(model.features)
    convs = [m for m in layers if isinstance(m, nn.Conv2d)]
    assert len(convs) == 12
    assert all(isinstance(layers[layers.index(c) + 1], nn.ReLU) for c in convs)  # cccp8 included
    drops = [m for m in layers if isinstance(m, nn.Dropout)]
    assert [d.p for d in drops] == [0.3]
    assert isinstance(layers[layers.index(drops[0]) - 1], nn.MaxPool2d)  # after pool3
    assert isinstance(layers[layers.index(drops[0]) + 1], nn.Conv2d)  # before conv4-1024
    assert all(m.ceil_mode for m in layers if isinstance(m, nn.MaxPool2d))
    stds = [0.01, 0.05, 0.05, 0.05, 0.05, 0.05, 0.01, 0.05, 0.05, 0.05, 0.05, 0.01]
    for conv, std in zip(convs, stds):
        assert conv.weight.std().item() == pytest.approx(std, rel=0.1)  # plain gaussian, not truncated
        assert torch.all(conv.bias == 0)
    with torch.device("meta"):
        assert [m.p for m in NiN().modules() if isinstance(m, nn.Dropout)] == [0.5]


# ---------------------------------------------------------------- ResNet-20

# Per 3x3 conv k*k*cin*cout (no bias) and per BN 2*channels (gamma + beta).
RESNET20_A = (3 * 3 * 3 * 16 + 2 * 16) \
    + 3 * 2 * (3 * 3 * 16 * 16 + 2 * 16) \
    + (3 * 3 * 16 * 32 + 2 * 32) + 5 * (3 * 3 * 32 * 32 + 2 * 32) \
    + (3 * 3 * 32 * 64 + 2 * 64) + 5 * (3 * 3 * 64 * 64 + 2 * 64) \
    + 64 * 10 + 10
# Pre-activation unit: bn1(cin) conv1(cin->cout) bn2(cout) conv2(cout->cout) [+ 1x1 projection cin->cout].
RESNET20_PREACT = 3 + 3 * 3 * 3 * 16 \
    + (2 * 16 + 9 * 16 * 16 + 2 * 16 + 9 * 16 * 16 + 16 * 16) + 2 * (2 * 16 + 9 * 16 * 16 + 2 * 16 + 9 * 16 * 16) \
    + (2 * 16 + 9 * 16 * 32 + 2 * 32 + 9 * 32 * 32 + 16 * 32) + 2 * (2 * 32 + 9 * 32 * 32 + 2 * 32 + 9 * 32 * 32) \
    + (2 * 32 + 9 * 32 * 64 + 2 * 64 + 9 * 64 * 64 + 32 * 64) + 2 * (2 * 64 + 9 * 64 * 64 + 2 * 64 + 9 * 64 * 64) \
    + 2 * 64 + 64 * 10 + 10  # bn_data beta (3), conv0, 9 units, final BN, FC


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("side", [32, 28])
def test_resnet20_shapes(variant, side):
    x = torch.randn(2, 3, side, side)
    assert assert_eval_deterministic(resnet20(variant), x).shape == (2, 10)
    assert resnet20(variant, num_classes=100)(x).shape == (2, 100)


def test_resnet20_option_a():
    assert VARIANTS == ("option-a", "preact-projection", "preact-option-a")
    model = resnet20("option-a")
    assert n_params(model) == RESNET20_A == 269_722
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 19 and all(c.kernel_size == (3, 3) for c in convs)  # no 1x1 projections anywhere
    assert not any("shortcut" in n or ".sc" in n for n, _ in model.named_parameters())
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert all(m.momentum == 0.1 and m.eps == 1e-5 for m in bns)  # torch defaults, as akamaster
    # Zero-pad shortcut: subsample by 2, then planes//4 = 8 zero channels on each side.
    block = model.stages[3]
    x = torch.randn(2, 16, 8, 8)
    sc = block.shortcut(x)
    assert sc.shape == (2, 32, 4, 4)
    assert torch.equal(sc[:, 8:24], x[:, :, ::2, ::2]) and not sc[:, :8].any() and not sc[:, 24:].any()
    assert torch.equal(model.stages[1].shortcut(x), x)


def test_resnet20_preact_projection():
    model = resnet20("preact-projection")
    assert n_params(model) == RESNET20_PREACT == 272_541
    assert len(list(model.parameters())) == 63  # MXNet's 64 arrays less bn_data's fixed gamma
    units = list(model.stages)
    assert [u.sc is not None for u in units] == [True, False, False] * 3  # stage 1's first unit too
    assert units[0].sc.kernel_size == (1, 1) and units[0].sc.stride == (1, 1) and units[0].sc.in_channels == 16
    assert units[3].sc.stride == (2, 2) and (units[3].sc.in_channels, units[3].sc.out_channels) == (16, 32)
    assert units[6].sc.stride == (2, 2) and (units[6].sc.in_channels, units[6].sc.out_channels) == (32, 64)
    bn_data = model.stem[0]
    assert isinstance(bn_data, BatchNormNoScale) and bn_data.weight is None and bn_data.num_features == 3
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert len(bns) == 1 + 9 * 2 + 1
    assert all(m.momentum == pytest.approx(0.1) and m.eps == 2e-5 for m in bns)  # MXNet momentum 0.9
    assert torch.all(model.fc.bias == 0)
    with pytest.raises(ValueError):
        resnet20("option-b")


RESNET20_TF_V2 = (9 * 3 * 16 + 2 * 16                                          # stem conv, BN (gamma, beta)
                  + 3 * (16 + 2 * 9 * 16 * 16 + 2 * 16)                       # stage 1: BN beta, 2 convs, BN
                  + (16 + 9 * 16 * 32 + 9 * 32 * 32 + 2 * 32) + 2 * (32 + 2 * 9 * 32 * 32 + 2 * 32)
                  + (32 + 9 * 32 * 64 + 9 * 64 * 64 + 2 * 64) + 2 * (64 + 2 * 9 * 64 * 64 + 2 * 64)
                  + 64 + 64 * 10 + 10)                                         # final BN beta, FC


def test_resnet20_tf_v2_is_tf_cnn_benchmarks_resnet20_v2():
    """GRACE's model: pre-activation units with scale-free BN (eps 1e-3, decay 0.999) before each unit and at the
    end, BN with gamma (eps 1e-5, decay 0.9) inside, option-A shortcuts from the un-normalised input, TF 'SAME'
    strided convs (the extra padding row and column at the bottom and right), no projection anywhere."""
    model = resnet20("preact-option-a")
    assert n_params(model) == RESNET20_TF_V2 == 269_402
    assert not any(".sc" in n or "shortcut" in n for n, _ in model.named_parameters())
    units = list(model.stages)
    plain = [u.bn1 for u in units] + [model.head[0]]
    assert all(isinstance(b, BatchNormNoScale) and b.eps == 1e-3 and b.momentum == pytest.approx(1e-3)
               for b in plain)
    inner = [u.bn2 for u in units] + [model.stem[1]]
    assert all(type(b) is nn.BatchNorm2d and b.weight is not None and b.eps == 1e-5 and b.momentum == 0.1
               for b in inner)
    x = torch.randn(2, 16, 8, 8)
    sc = units[3].shortcut(x)  # 16 -> 32, stride 2: every other pixel, 8 zero channels each side
    assert sc.shape == (2, 32, 4, 4)
    assert torch.equal(sc[:, 8:24], x[:, :, ::2, ::2]) and not sc[:, :8].any() and not sc[:, 24:].any()
    assert torch.equal(units[1].shortcut(x), x)
    # the strided conv pads like TF's SAME, at the bottom and right only: output row 0's window starts at input
    # row 0 (torch's symmetric padding=1 would start it at the padding row -1)
    strided = units[3].conv1
    probe = torch.zeros(1, 16, 16, 16)
    probe[..., 0, :] = 1.0
    with torch.no_grad():
        strided[1].weight.zero_()
        strided[1].weight[:, :, 0, :] = 1.0  # each window's top row only
        out = strided(probe)
    assert out.shape == (1, 32, 8, 8) and out[0, 0, 0].min() > 0 and out[0, 0, 1:].abs().sum() == 0
    # init: conv kernels with std sqrt(1 / fan in) (TF's truncated variance scaling), FC std 1/8, zero biases
    conv = resnet20("preact-option-a").stages[8].conv2.weight
    assert conv.std().item() == pytest.approx((1 / (9 * 64)) ** 0.5, rel=0.05)
    assert conv.abs().max().item() <= 2 * (1 / (9 * 64)) ** 0.5 / 0.87962566103423978 + 1e-6
    assert torch.all(model.fc.bias == 0) and model.fc.weight.abs().max() <= 2 / 8 + 1e-6


# ---------------------------------------------------------------- torchvision ResNet-50 / VGG-11

def test_imagenet_zoo_counts():
    with torch.device("meta"):  # counting needs no memory or init time
        assert n_params(resnet50()) == 25_557_032
        assert n_params(vgg11()) == 132_863_336
        assert n_params(resnet50(num_classes=10)) == 25_557_032 - 990 * 2049  # fc 2048*k + k
        assert not any(isinstance(m, nn.BatchNorm2d) for m in vgg11().modules())  # MXNet batch_norm=False


def test_ssdsgd_resnet50_v2_is_mxnets_network_through_timm():
    """timm's resnetv2_50 (25,549,352) plus MXNet's input BN (6) and stem BN (128): MXNet's 25,549,486, with
    pre-activation bottlenecks 3-4-6-3 and a final BN before pooling."""
    from commbench.tasks.models.timm_models import mxnet_resnet50_v2

    model = mxnet_resnet50_v2(1000)
    assert n_params(model) == 25_549_486
    assert [len(stage.blocks) for stage in model.stages] == [3, 4, 6, 3]
    assert isinstance(model.stem.bn_data, nn.BatchNorm2d) and model.stem.bn0.num_features == 64
    assert type(model.stages[0].blocks[0]).__name__ == "PreActBottleneck"
    assert model(torch.randn(2, 3, 224, 224)).shape == (2, 1000)


@pytest.mark.parametrize("ctor", [resnet50, vgg11])
def test_imagenet_zoo_forward(ctor):
    x = torch.randn(1, 3, 224, 224)
    assert assert_eval_deterministic(ctor(num_classes=10), x).shape == (1, 10)


def test_models_do_not_import_torchvision_at_module_level():
    for path in MODELS_DIR.glob("*.py"):
        for node in ast.parse(path.read_text()).body:  # top-level statements only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "torchvision" for n in names), path.name


@pytest.mark.parametrize("slice_size", [None, 4])
def test_a_batchnorm_without_gamma_computes_bit_for_bit_what_torch_computes_with_gamma_none(slice_size):
    """BatchNormNoScale passes CUDA a gamma of ones (CUDA's backward mishandles None); on the CPU that must be
    the very arithmetic of torch's BatchNorm with no gamma: outputs, both gradients and the running statistics."""
    import torch.nn.functional as F

    from commbench.tasks.models.sliced_bn import slice_batch_norm

    torch.manual_seed(0)
    bn = BatchNormNoScale(6, eps=1e-3, momentum=0.1)
    if slice_size:
        slice_batch_norm(bn, slice_size)
    assert [name for name, _ in bn.named_parameters()] == ["bias"]
    with torch.no_grad():
        bn.bias.normal_()
    x0 = torch.randn(8, 6, 5, 5) * 3 + 1
    weights = torch.linspace(-1, 1, x0.numel()).view(x0.shape)
    for training in (True, False):
        bn.train(training)
        mean0, var0 = bn.running_mean.clone(), bn.running_var.clone()
        x, ref_x = x0.clone().requires_grad_(), x0.clone().requires_grad_()
        ref_bias = bn.bias.detach().clone().requires_grad_()
        bn.bias.grad = None
        y = bn(x)
        (y * weights).sum().backward()
        if slice_size and training:  # each slice normalised alone, gamma None
            ref = torch.cat([F.batch_norm(s, None, None, None, ref_bias, True, 0.0, 1e-3) for s in ref_x.split(4)])
        else:
            ref = F.batch_norm(ref_x, mean0.clone(), var0.clone(), None, ref_bias, training, 0.1, 1e-3)
        (ref * weights).sum().backward()
        assert torch.equal(y, ref) and torch.equal(x.grad, ref_x.grad) and torch.equal(bn.bias.grad, ref_bias.grad)
        if training and not slice_size:
            expected_mean, expected_var = mean0.clone(), var0.clone()
            F.batch_norm(x0, expected_mean, expected_var, None, None, True, 0.1, 1e-3)
            assert torch.equal(bn.running_mean, expected_mean) and torch.equal(bn.running_var, expected_var)
