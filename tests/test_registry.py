"""The spec grammar for lists of specs (issue 27 §2: --methods split at every comma)."""

from __future__ import annotations

import pytest


def test_a_list_of_specs_keeps_each_specs_own_settings():
    from calibkit._registry import SpecError, split_specs

    assert split_specs("dir-odir:folds=5,average_folds=true") == [
        "dir-odir:folds=5,average_folds=true"
    ]
    assert split_specs("ts, dir-odir:folds=5,average_folds=true,ts-grid") == [
        "ts",
        "dir-odir:folds=5,average_folds=true",
        "ts-grid",
    ]
    assert split_specs("dir-odir:lambdas=[0.01,1],mus=[1]") == ["dir-odir:lambdas=[0.01,1],mus=[1]"]
    with pytest.raises(SpecError, match="'folds=5' is a setting with no method before it"):
        split_specs("folds=5,ts")


def test_compare_methods_option_reads_settings_after_commas(tmp_path):
    import json

    import numpy as np
    from click.testing import CliRunner

    from calibkit.cli import cli

    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(400, 3)) * 3, rng.integers(0, 3, 400)
    np.savez(tmp_path / "f.npz", logits=z, labels=y)
    out = CliRunner().invoke(
        cli,
        [
            "compare",
            "--file",
            str(tmp_path / "f.npz"),
            "--split",
            "0.5",
            "--methods",
            "dir-odir:folds=3,lambdas=[1],mus=[1],ts",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    names = [m for m in json.loads(out.output)["methods"]]
    assert any(n.startswith("dir-odir:") and "lambdas" in n for n in names) and "ts" in names
    assert not any(n.startswith("lambdas") or n.startswith("mus") for n in names)
    table = CliRunner().invoke(
        cli,
        [
            "compare",
            "--file",
            str(tmp_path / "f.npz"),
            "--split",
            "0.5",
            "--methods",
            "ts",
            "--seeds",
            "2",
        ],
    )
    assert table.exit_code == 0 and "ece (%) ± std" in table.output
    assert "± std over the splits" in table.output


def checks_recorded(monkeypatch, cls) -> list[dict]:
    """The settings of each ``cls.check_settings`` call from now on, in order."""
    calls: list[dict] = []
    real = cls.check_settings.__func__
    monkeypatch.setattr(
        cls, "check_settings", classmethod(lambda c, **s: calls.append(s) or real(c, **s))
    )
    return calls


def test_a_checked_spec_is_trusted_downstream_and_checked_once(monkeypatch):
    """Issue 43: a spec checked where it enters (the bench's YAML, a CLI option) travels down
    checked: the registry's check and create, the seeding and the calibrator's fit do not
    run ``check_settings`` again; a changed setting is checked anew."""
    import torch

    from calibkit import posthoc
    from calibkit._registry import Spec
    from calibkit.posthoc._temperature import TemperatureScaling

    calls = checks_recorded(monkeypatch, TemperatureScaling)
    spec = posthoc.REGISTRY.check("temperature:t_max=50")  # an alias, made canonical
    assert calls == [{"t_max": 50}] and spec == Spec("ts", (("t_max", 50),))
    assert spec.family == "calibrator" and spec.settings["t_max"] == 50.0
    assert posthoc.REGISTRY.check(spec) is spec
    assert posthoc.REGISTRY.seeded(spec, 3) is spec  # ts has no seed
    cal = posthoc.create(spec)
    z, y = torch.randn(200, 3, dtype=torch.float64), torch.randint(0, 3, (200,))
    cal.fit(z, y)
    assert len(calls) == 1, calls  # the edge's check, and no other
    cal.t_max = 30.0  # a changed setting is checked again, once
    cal.fit(z, y)
    cal.fit(z, y)
    assert calls[1:] == [{"t_min": 0.01, "t_max": 30.0, "tol": 1e-12, "max_iter": 100}]
    # text, or a spec with overrides, is checked where it comes in
    posthoc.REGISTRY.check(spec, t_max=20)
    posthoc.create("ts")
    assert len(calls) == 4


def test_overrides_of_a_checked_spec_check_only_what_they_add(monkeypatch):
    """``models.create(checked_spec, num_classes=..., input_shape=...)`` (every run builds its
    model so) checks the two overrides, not the spec's own parameters again; a bad override
    is still refused in one line."""
    import calibkit._registry as registry
    from calibkit import models

    spec = models.REGISTRY.check("resnet20:input_shape=[3,32,32]")
    seen = []
    real = registry._accepts
    monkeypatch.setattr(registry, "_accepts", lambda a, v: seen.append(v) or real(a, v))
    models.REGISTRY.check(spec, num_classes=10)
    assert seen == [10]
    seen.clear()
    models.REGISTRY.check("resnet20:num_classes=10", input_shape=(3, 32, 32))  # text: all
    assert len(seen) == 2
    with pytest.raises(registry.SpecError, match="no parameter 'depth'"):
        models.REGISTRY.check(spec, depth=3)


def test_a_seeded_spec_stays_checked_and_keeps_its_own_seed():
    from calibkit import posthoc

    spec = posthoc.REGISTRY.check("hist-binning")
    assert "seed" not in posthoc.REGISTRY.parameters("hist-binning")
    sb = posthoc.REGISTRY.check("scaling-binning")
    seeded = posthoc.REGISTRY.seeded(sb, 7)
    assert seeded.kwargs == {"seed": 7} and seeded.family == "calibrator"
    assert seeded.settings["seed"] == 7
    assert posthoc.REGISTRY.seeded(sb.with_params(seed=1), 7).kwargs == {"seed": 1}
    assert posthoc.REGISTRY.seeded("scaling-binning", 2).kwargs == {"seed": 2}  # text: checked
    assert posthoc.REGISTRY.seeded(spec, 7) is spec


def test_a_saved_calibrator_is_checked_once_where_it_loads(monkeypatch, tmp_path):
    """Issue 67 §4: ``posthoc.load`` built the method from the file's spec (one check) and
    the method checked its settings again where it first read them (the loaded-state check
    of ts-grid, MaC-Cal's ``_load``); it now hands the registry's result on, as ``create``
    does."""
    import torch

    from calibkit import posthoc
    from calibkit.posthoc._temperature import TemperatureGrid

    z, y = torch.randn(300, 3, dtype=torch.float64), torch.randint(0, 3, (300,))
    path = posthoc.create("ts-grid").fit(z, y).save(tmp_path / "grid.calib")
    calls = checks_recorded(monkeypatch, TemperatureGrid)
    again = posthoc.load(path)
    assert len(calls) == 1, calls
    assert torch.equal(again(z), posthoc.load(path)(z))
