"""Every registered model follows the features/head contract; parameter counts equal the
published architectures'."""

from __future__ import annotations

import pytest
import torch

from calibkit import models

SMALL_INPUT = {"mlp": (64,), "cnn": (1, 8, 8)}


def count(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("name", models.names())
def test_features_head_contract(name):
    shape = SMALL_INPUT.get(name, (3, 32, 32))
    torch.manual_seed(0)
    m = models.create(name, num_classes=7, input_shape=shape).eval()
    x = torch.randn(2, *shape)
    with torch.no_grad():
        f = m.forward_features(x)
        assert f.shape == (2, m.num_features)
        assert torch.equal(m.forward_head(f, pre_logits=True), f)
        logits = m(x)
        assert logits.shape == (2, 7) and torch.equal(logits, m.forward_head(f))
        assert torch.equal(m.head(f), logits)
    m.reset_classifier(3)
    assert m.num_classes == 3 and m(x).shape == (2, 3)
    assert isinstance(m.head, torch.nn.Linear) and m.head.in_features == m.num_features


# Sources (docs/training.md): exact counts of torchvision's ImageNet models, whose bodies the
# CIFAR variants share (a 3x3 stem of 1,728 weights instead of a 7x7 one of 9,408, and no
# stem batch norm for DenseNet), and of the reference CIFAR ResNets (akamaster's
# pytorch_resnet_cifar10 prints 464,154 and 1,727,962, and its published ResNet-20/44/56
# checkpoints hold 269,722, 658,586 and 853,018 parameters; He et al. 2016 give 0.27M … 1.7M),
# and Zagoruyko & Komodakis 2016 (WRN-28-10 36.5M, WRN-40-10 55.8M).
PUBLISHED = {
    "resnet20": (10, 269_722),
    "resnet32": (10, 464_154),
    "resnet44": (10, 658_586),
    "resnet56": (10, 853_018),
    "resnet110": (10, 1_727_962),
    "resnet50": (1000, 25_557_032 - 7_680),  # torchvision resnet50
    "densenet121": (1000, 7_978_856 - 7_680 - 128),  # torchvision densenet121
    "vgg16": (10, 14_723_136 + 5_130),  # torchvision vgg16_bn's features + one 512x10 layer
    "wrn-40-10": (10, 55_800_000),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published_within_one_percent(name):
    k, published = PUBLISHED[name]
    n = count(models.create(name, num_classes=k))
    assert abs(n - published) <= 0.01 * published, (n, published)


def test_wide_resnets_follow_the_width_and_depth_formula():
    from calibkit.models._resnet import wrn

    assert abs(count(wrn(28, 10)) - 36_500_000) <= 0.01 * 36_500_000  # the WRN paper's 36.5M
    assert count(models.create("wrn-26-10")) == count(wrn(22, 10))  # n = (26 - 4) // 6 = 3


def test_bad_model_specs_fail_clearly():
    with pytest.raises(ValueError, match=r"unknown model 'resnet18'.*choose one of"):
        models.create("resnet18")
    with pytest.raises(ValueError, match=r"input_shape: expected \(C, H, W\)"):
        models.create("cnn", input_shape=(64,))
    with pytest.raises(ValueError, match="has no parameter 'width'; valid: num_classes"):
        models.create("resnet32:width=2")
    with pytest.raises(ValueError, match=r"hidden: expected an integer in 1..1,000,000, got 0"):
        models.create("mlp:hidden=0")


def test_a_model_beyond_memory_is_one_line():
    """10 million inputs × 1 million hidden units: 4e13 bytes, refused by the allocator."""
    with pytest.raises(ValueError, match="cannot be built in this machine's memory"):
        models.create("mlp:hidden=1000000", input_shape=(10_000_000,))
