"""Every setting is declared once, on its parameter (calibkit._settings): every factory of
every registry declares every keyword setting, and the check, the docstring and the CLI's
listing all come from that declaration."""

from __future__ import annotations

import inspect
import math
from typing import Annotated

import numpy as np
import pytest
import torch

from calibkit import data, losses, metrics, models, posthoc
from calibkit._registry import CheckedSpec, parse_spec
from calibkit._settings import (
    Bounds,
    OneOf,
    Setting,
    check_declared,
    declarations,
    parameters_section,
)
from calibkit.metrics._binning import BinScheme
from calibkit.training import TrainConfig
from calibkit.training import _schedule as schedule
from tests.conftest import make_logits

REGISTRIES = {
    "dataset": data.REGISTRY,
    "model": models.REGISTRY,
    "loss": losses.REGISTRY,
    "schedule": schedule.REGISTRY,
    "calibrator": posthoc.REGISTRY,
}


@pytest.mark.parametrize("family", sorted(REGISTRIES))
def test_every_factory_declares_every_setting(family):
    registry = REGISTRIES[family]
    for name in registry.names():
        factory = registry.factory(name)
        target = factory.__init__ if inspect.isclass(factory) else factory
        wanted = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind is p.KEYWORD_ONLY
        ]
        declared = declarations(factory)
        assert [n for n in wanted if n not in declared] == [], f"{family} {name}"
        assert all(d.setting.help for d in declared.values())


@pytest.mark.parametrize("name", posthoc.names())
def test_a_methods_docstring_and_listing_come_from_its_declarations(name, capsys):
    from tests.test_cli import run_ok

    cls = posthoc.REGISTRY.factory(name)
    doc = inspect.getdoc(cls)
    for setting, d in declarations(cls).items():
        assert f"{setting} : " in doc and d.text()[:40] in " ".join(doc.split())
    out = " ".join(run_ok(["methods", name], capsys).split())
    for d in declarations(cls).values():
        assert " ".join(d.text().split()) in out


def test_values_objects_check_and_say_what_they_take():
    rate = Bounds(0, 1, low_open=True)
    assert str(rate) == "a number in (0, 1]" and rate.check("q", 1) == 1.0
    for bad in (0, 1.5, math.nan, math.inf, True, "0.5", 10**400):
        with pytest.raises(ValueError, match=r"^q: expected a number in \(0, 1\], got "):
            rate.check("q", bad)
    count = Bounds(1, 10, integer=True)
    assert str(count) == "an integer in 1..10" and count.check("n", 3) == 3
    with pytest.raises(ValueError, match=r"n: expected an integer in 1\.\.10, got 2\.0"):
        count.check("n", 2.0)
    choice = OneOf(("a", "b"), or_none=True)
    assert str(choice) == "one of 'a', 'b' or none" and choice.check("c", "a") == "a"
    with pytest.raises(ValueError, match="c: expected one of 'a', 'b' or none; got 'z'"):
        choice.check("c", "z")


def test_check_declared_fills_defaults_refuses_unknowns_and_admits_none():
    def f(
        *,
        x: Annotated[float, Setting("An x", Bounds(0, 1))] = 0.5,
        y: Annotated[int | None, Setting("A y", Bounds(1, 9, integer=True))] = None,
        flag: Annotated[bool, Setting("A flag")] = False,
    ):
        return x, y

    assert check_declared(f, {"y": 3}) == {"x": 0.5, "y": 3, "flag": False}
    assert check_declared(f, {"y": None})["y"] is None
    with pytest.raises(TypeError, match="f has no setting 'z'"):
        check_declared(f, {"z": 1})
    with pytest.raises(ValueError, match="flag: expected true or false, got 'false'"):
        check_declared(f, {"flag": "false"})
    assert parameters_section(f)[3:5] == [
        "    x : float, default 0.5",
        "        An x (a number in [0, 1]).",
    ]


def test_a_checked_spec_is_its_own_type_equal_to_its_text():
    checked = posthoc.REGISTRY.check("ts:t_max=50")
    plain = parse_spec("ts:t_max=50")
    assert isinstance(checked, CheckedSpec) and not isinstance(plain, CheckedSpec)
    assert checked == plain and hash(checked) == hash(plain) and {checked, plain} == {plain}
    assert posthoc.REGISTRY.check(checked) is checked  # trusted: not checked again
    again = losses.REGISTRY.check(losses.REGISTRY.check("focal:gamma=2"), gamma=1)
    assert again.kwargs == {"gamma": 1} and again.family == "loss"  # an override is checked
    with pytest.raises(ValueError, match="gamma: expected a number in"):
        losses.REGISTRY.check(losses.REGISTRY.check("focal"), gamma=-1)


def test_every_bin_scheme_is_checked_where_it_is_made():
    with pytest.raises(ValueError, match=r"n_bins: expected an integer in 1\.\.100,000, got 0"):
        BinScheme(0)
    with pytest.raises(ValueError, match="binning: expected one of 'calibkit'"):
        BinScheme(15, "sklearn")
    scheme = BinScheme(15)
    import torch

    wide = scheme.for_dtype(torch.float64)
    assert (wide.n_bins, wide.convention, wide.dtype) == (15, "calibkit", torch.float64)
    assert scheme.dtype == torch.float32 and scheme.for_dtype(torch.float32) is scheme


def test_overrides_of_a_checked_spec_are_checked_and_its_own_values_trusted():
    """A family without ``check_settings`` (models) checks only what overrides a checked
    spec, as the type check does: a run's model spec, checked once, is built with the
    data's ``num_classes`` and ``input_shape`` without its own values checked again."""
    checked = models.REGISTRY.check("mlp:hidden=64")
    vouched = CheckedSpec("mlp", (("hidden", 0),), "model")  # as if checked where it entered
    assert models.REGISTRY.check(vouched, num_classes=3).kwargs == {"hidden": 0, "num_classes": 3}
    with pytest.raises(ValueError, match=r"num_classes: expected an integer in 2\.\."):
        models.REGISTRY.check(checked, num_classes=1)
    with pytest.raises(ValueError, match=r"hidden: expected an integer in 1\.\."):
        models.REGISTRY.check("mlp:hidden=0")


@pytest.mark.parametrize(
    "call",
    [
        lambda z, y: metrics.ece(z, y, n_bins=np.int64(15)),
        lambda z, y: metrics.evaluate(z, y, n_bins=np.int32(15), bootstrap=np.int64(0)),
        lambda z, y: posthoc.create("hist-binning", n_bins=np.int64(10)).fit(z, y),
        lambda z, y: posthoc.create("ts", t_max=np.float32(50)).fit(z, y),
        lambda z, y: TrainConfig(lr=np.float32(0.1), epochs=np.int64(3)).check(),
    ],
)
def test_numpy_scalars_are_numbers_at_every_entry(call):
    """Issue 65 §3: a NumPy integer is an integer and a NumPy float of any width a number to
    the metric functions, the registries and TrainConfig alike (6636db0 took them; the
    declarations refused them until this rule)."""
    z, y = make_logits(200, 4, 0)
    call(z, y)


@pytest.mark.parametrize(
    "call",
    [
        lambda z, y: metrics.ece(z, y, n_bins=torch.tensor(15)),
        lambda z, y: metrics.ece(z, y, n_bins=np.bool_(True)),
        lambda z, y: metrics.ece(z, y, n_bins="15"),
        lambda z, y: posthoc.create("ts", t_max=torch.tensor(50.0)),
        lambda z, y: posthoc.create("hist-binning", n_bins=np.float64(10)),
        lambda z, y: TrainConfig(lr=torch.tensor(0.1)).check(),
        lambda z, y: TrainConfig(epochs=True).check(),
    ],
)
def test_tensors_booleans_and_strings_are_not_numbers(call):
    z, y = make_logits(200, 4, 0)
    with pytest.raises(ValueError, match=r"^[^\n]+$"):
        call(z, y)


def test_a_numpy_number_is_kept_as_the_python_number_it_holds():
    assert TrainConfig(epochs=np.int64(3)).check().epochs == 3
    assert type(TrainConfig(epochs=np.int64(3)).check().epochs) is int
    spec = posthoc.REGISTRY.check("ts", t_max=np.float32(50))
    assert dict(spec.params)["t_max"] == 50.0 and type(dict(spec.params)["t_max"]) is float


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"seed": -1}, "seed: expected an integer"),
        ({"seed": 2**70, "bootstrap": 10}, "seed: expected an integer"),
        ({"smooth": "no"}, "smooth: expected true or false"),
        ({"optimal": "no"}, "optimal: expected true or false"),
        ({"ci": 2}, "ci: expected a number"),
    ],
)
def test_the_metric_api_checks_every_declared_keyword_in_one_call(setting, message):
    """Issue 67 §1: evaluate(seed=-1), smooth="no" and optimal="no" were accepted and
    seed=2**70 died in torch ("Overflow when unpacking long long"); checks_declared checks
    each declared keyword with the registries' own check before the body runs."""
    z, y = make_logits(100, 3, 0)
    with pytest.raises(ValueError, match=rf"^{message}[^\n]*$"):
        metrics.evaluate(z, y, **setting)


def _torchmetrics_class(name: str):
    return getattr(pytest.importorskip("calibkit.adapters.torchmetrics"), name)


def _lightning_callback(**settings):
    pytest.importorskip("lightning")
    from calibkit.adapters.lightning import CalibrationCallback

    return CalibrationCallback(**settings)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: _torchmetrics_class("RMSCalibrationError")(debias="false"), "debias: expected"),
        (lambda: _torchmetrics_class("RMSCalibrationError")(debias=1), "debias: expected"),
        (lambda: _torchmetrics_class("ECE")(probs="yes"), "probs: expected true or false"),
        (lambda: _torchmetrics_class("AURC")(probs="yes"), "probs: expected true or false"),
        (lambda: _torchmetrics_class("AdaptiveECE")(n_bins=1.5), "n_bins: expected an integer"),
        (lambda: _lightning_callback(probs="yes"), "probs: expected true or false"),
        (lambda: _lightning_callback(prefix=5), "prefix: expected a text, got 5"),
        (lambda: _lightning_callback(diagram="no"), "diagram: expected true or false"),
        (lambda: metrics.CalibrationMeter(keep_samples=1), "keep_samples: expected true"),
        (lambda: metrics.CalibrationMeter(n_classes=1), "n_classes: expected an integer"),
        (lambda: losses.mmce_weighted(*make_logits(8, 3, 0), bandwidth=0), "bandwidth: expected"),
        (
            lambda: losses.mmce_weighted(*make_logits(8, 3, 0), bandwidth=math.nan),
            "bandwidth: expected",
        ),
    ],
)
def test_the_adapters_settings_are_checked_by_their_declarations(build, message):
    """Issue 65 §7: ``RMSCalibrationError(debias="false")`` turned debiasing on,
    ``CalibrationCallback(probs="yes")`` and ``prefix=5`` passed, ``mmce_weighted`` with a
    bandwidth of 0 or NaN returned NaN: each is now declared and checked in one line."""
    with pytest.raises(ValueError, match=rf"^{message}[^\n]*$"):
        build()


def test_the_adapters_checked_settings_keep_their_values():
    """The checks hand on what they were given, normalised (a NumPy flag is a bool)."""
    rms = _torchmetrics_class("RMSCalibrationError")(debias=np.bool_(True), n_bins=np.int64(7))
    assert rms.debias is True and rms.n_bins == 7 and type(rms.n_bins) is int
    assert _lightning_callback(prefix="v/", test_prefix="t/").prefix == "v/"
    z, y = map(torch.as_tensor, make_logits(64, 3, 0))
    assert torch.equal(losses.mmce_weighted(z, y), losses.mmce_weighted(z, y, bandwidth=0.4))


def test_scikit_learn_checks_n_jobs_with_its_own_parameter_validation():
    """Issue 65 §7: ``n_jobs=1.5`` passed; scikit-learn's own validation refuses it at fit."""
    from sklearn.linear_model import LogisticRegression

    from calibkit.adapters.sklearn import CalibratedClassifier

    X, y = np.random.default_rng(0).normal(size=(60, 3)), np.arange(60) % 2
    with pytest.raises(ValueError, match="'n_jobs' parameter of CalibratedClassifier"):
        CalibratedClassifier(LogisticRegression(), cv=3, n_jobs=1.5).fit(X, y)
