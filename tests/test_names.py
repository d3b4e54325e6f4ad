"""Names people already use (issue 42 §3): the names of other libraries and papers stand for
calibkit's methods, spelled with any case, `-`, `_` or spaces, and read canonically (one run
for two spellings); an unknown name gets the nearest ones."""

from __future__ import annotations

import re

import pytest

from calibkit import losses, posthoc
from calibkit._registry import SpecError


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("temperature", "ts"),
        ("TemperatureScaling", "ts"),
        ("temperature_scaling", "ts"),
        ("histogram", "hist-binning"),
        ("HistogramBinning", "hist-binning"),
        ("dirichlet", "dir-odir"),
        ("vector-scaling", "vector"),
        ("MatrixScaling", "matrix"),
        ("isotonic-regression", "isotonic"),
        ("NeuralClamping", "neural-clamping"),
    ],
)
def test_common_names_stand_for_calibkit_methods(given, canonical):
    spec = posthoc.REGISTRY.check(f"{given}")
    assert spec.name == canonical and posthoc.create(given).name == canonical
    assert str(posthoc.REGISTRY.check(f"{given}:seed=1" if canonical == "dir-odir" else given))


def test_an_alias_with_settings_is_the_same_run_as_the_name():
    assert str(posthoc.REGISTRY.check("Temperature_Scaling:t_max=50")) == "ts:t_max=50"
    assert "temperature" in posthoc.REGISTRY.aliases("ts")


@pytest.mark.parametrize(
    ("registry", "typo", "suggested"),
    [
        (posthoc.REGISTRY, "temprature", "did you mean ts"),
        (posthoc.REGISTRY, "isotnic", "did you mean isotonic"),
        (losses.REGISTRY, "focl", "did you mean focal"),
    ],
)
def test_a_typo_gets_the_nearest_names(registry, typo, suggested):
    with pytest.raises(SpecError, match=suggested):
        registry.check(typo)


def test_a_name_far_from_every_method_lists_them_all():
    every = re.escape(", ".join(posthoc.names()))  # every registered name, in order
    with pytest.raises(
        SpecError, match=rf"unknown calibrator 'conformal' \(choose one of: {every}\)"
    ):
        posthoc.REGISTRY.check("conformal")
    assert posthoc.REGISTRY.check("sigmoid").name == "platt"  # scikit-learn's name
