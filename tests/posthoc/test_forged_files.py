"""Forged calibrator files: an edited file whose SHA-256 was recomputed passes the checksum
(it has no key), so everything loaded is validated as if hostile. Each forgery must be
refused with a one-line FileFormatError naming the file (CLI: exit 2, no traceback), and
every genuine file must still load."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch
from safetensors import safe_open

from calibkit import posthoc
from calibkit.io import FileFormatError
from calibkit.posthoc._files import write_checked
from tests.conftest import make_logits
from tests.posthoc.test_clamping import toy_data, toy_model
from tests.test_cli import run

#: the file holds the chosen λ and μ, not the search: one grid point keeps the
#: cross-validated maps' fit to a second (the full grid took 18 s for dir-odir)
ONE_GRID_POINT = {
    "dir-odir": "dir-odir:lambdas=[1],mus=[1]",
    "ms-odir": "ms-odir:lambdas=[1],mus=[1]",
}


@functools.cache
def fitted(spec: str, k: int = 10) -> posthoc.Method:
    """``spec`` fitted on 600 synthetic rows (once per process: tests only read it)."""
    spec = ONE_GRID_POINT.get(spec, spec)
    z, y = make_logits(600, k, 3)
    return posthoc.create(spec).fit(torch.from_numpy(z).double(), torch.from_numpy(y))


def contents(path) -> tuple[dict, dict]:
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["calibkit"]), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118


def forge(tmp_path, spec: str, edit) -> str:
    """A genuine file of ``spec`` edited by ``edit(meta, tensors)``, its checksum recomputed."""
    path = tmp_path / "genuine.calib"
    fitted(spec).save(path)
    meta, tensors = contents(path)
    meta = edit(meta, tensors) or meta
    forged = tmp_path / "forged.calib"
    write_checked(forged, tensors, meta)
    return str(forged)


def _set(name, value):
    def edit(meta, tensors):
        tensors[name] = value

    return edit


def _drop(name):
    def edit(meta, tensors):
        del tensors[name]

    return edit


def _meta(key, value):
    def edit(meta, tensors):
        meta[key] = value

    return edit


def _fill(name, value):
    def edit(meta, tensors):
        tensors[name] = torch.full_like(tensors[name], value)

    return edit


def _nan_table(meta, tensors):
    tensors["values_"] = torch.full_like(tensors["values_"], torch.nan)


def _cut_classes(meta, tensors):
    for name in list(tensors):
        t = tensors[name]
        tensors[name] = t[:5, :5].contiguous() if t.ndim == 2 else t[:5].contiguous()


def _flip(name):
    def edit(meta, tensors):
        tensors[name] = tensors[name].flip(-1).contiguous()

    return edit


F64 = torch.float64
FORGERIES = {
    "metadata is a JSON list": ("ts", lambda meta, tensors: [1, 2]),
    "temperature of shape (3,)": ("ts", _set("temperature_", torch.ones(3, dtype=F64))),
    "temperature removed": ("ts", _drop("temperature_")),
    "temperature NaN": ("ts", _set("temperature_", torch.tensor(float("nan"), dtype=F64))),
    "temperature 0": ("ts", _set("temperature_", torch.tensor(0.0, dtype=F64))),
    "temperature -1": ("ts", _set("temperature_", torch.tensor(-1.0, dtype=F64))),
    "temperature inf": ("ts-grid", _set("temperature_", torch.tensor(float("inf"), dtype=F64))),
    "vector scaling cut to 5 classes": ("vector", _cut_classes),
    "matrix scaling weights NaN": ("matrix", _fill("weight_", torch.nan)),
    "histogram binning tables NaN": ("hist-binning", _nan_table),
    "scaling-binning tables NaN": ("scaling-binning", _nan_table),
    "histogram binning edges inf": ("hist-binning", _fill("edges_", torch.inf)),
    "settings out of range": ("hist-binning", lambda m, t: m["settings"].update(n_bins=-3)),
    "settings of another method": ("ts", lambda m, t: m["settings"].update(n_bins=10)),
    "n_classes a string": ("ts", _meta("n_classes", "ten")),
    "n_classes 1": ("ts", _meta("n_classes", 1)),
    "fit report missing": ("ts", lambda m, t: m.pop("fit_report")),
    "learned a list": ("dir-odir:lambdas=[1],mus=[1],folds=2", _meta("learned", [1])),
    "method unknown": ("ts", _meta("method", "nope")),
    "settings a string": ("ts", _meta("settings", "t_min=0")),
    # issue 41 §3: values of the right shape, finite, that the method's own fit never makes
    "temperature 1e300 (uniform)": ("ts", _set("temperature_", torch.tensor(1e300, dtype=F64))),
    "temperature 1e-6 (one-hot)": ("ts", _set("temperature_", torch.tensor(1e-6, dtype=F64))),
    "temperature a boolean": ("ts", _set("temperature_", torch.tensor(True))),
    "grid temperature off its grid": ("ts-grid", _set("temperature_", torch.tensor(50.0))),
    "ets weights not summing to 1": ("ets", _set("weights_", torch.tensor([0.9, 0.9, 0.0]))),
    "ets weight negative": ("ets", _set("weights_", torch.tensor([1.2, -0.2, 0.0]))),
    "isotonic map reversed": ("isotonic", _flip("y_")),
    "isotonic thresholds reversed": ("isotonic", _flip("x_")),
    "histogram edges unsorted": ("hist-binning", _flip("edges_")),
    "histogram values times 5": ("hist-binning", lambda m, t: t.update(values_=t["values_"] * 5)),
    "histogram edges from 0.2": ("hist-binning", lambda m, t: t["edges_"].__setitem__((0, 0), 0.2)),
    "scaling-binning values above 1": (
        "scaling-binning",
        lambda m, t: t.update(values_=t["values_"] + 2),
    ),
    "n_classes null on vector scaling": ("vector", _meta("n_classes", None)),
    "version a string": ("ts", _meta("version", "1")),
    # issue 53 §5: the calibrators added last got their invariants
    "platt slope negated": (
        "platt",
        lambda m, t: t.update(coef_=t["coef_"].new_tensor([[-1.0, -1.0, 0.0]])),
    ),
    "platt a = b = 1e300": (
        "platt",
        lambda m, t: t.update(coef_=t["coef_"].index_fill(1, torch.tensor([0, 1]), 1e300)),
    ),
    "beta a = b = 1e300": (
        "beta",
        lambda m, t: t.update(coef_=t["coef_"].index_fill(1, torch.tensor([0, 1]), 1e300)),
    ),
    "beta abm read as am": ("beta", lambda m, t: m["settings"].update(parameters="am")),
    "beta ab with another c": (
        "beta:parameters=ab",
        lambda m, t: t["coef_"].__setitem__((0, 2), 3.0),
    ),
    "beta slope negated": ("beta", lambda m, t: t.update(coef_=-t["coef_"])),
}


@pytest.mark.parametrize("case", list(FORGERIES))
def test_a_forged_file_is_refused_in_one_line(tmp_path, case):
    spec, edit = FORGERIES[case]
    path = forge(tmp_path, spec, edit)
    with pytest.raises(FileFormatError) as err:
        posthoc.load(path)
    message = str(err.value)
    assert message.startswith(path) and "\n" not in message
    assert "newer calibkit" not in message  # format 1 is this one's


def test_a_vector_scaling_file_with_a_negative_weight_is_a_possible_fit(tmp_path):
    """Vector scaling promises no ranking: on logits without information its optimum has
    weights at or below 0 (tests/posthoc/test_trust.py), so such a file loads."""
    path = forge(tmp_path, "vector", lambda m, t: t.update(weight_=-t["weight_"]))
    assert bool((posthoc.load(path).weight_ < 0).all())


GENUINE = [
    "beta",
    "beta:parameters=am",
    "beta:parameters=ab",
    "beta:mode=one-vs-rest",
    "platt",
    "ts",
    "ts-grid",
    "ets",
    "vector",
    "matrix",
    "hist-binning",
    "isotonic",
    "scaling-binning",
    "dir-l2:lambdas=[1],folds=2",
]


@pytest.mark.parametrize("spec", GENUINE)
def test_every_genuine_file_still_loads_and_gives_the_same_outputs(tmp_path, spec):
    cal = fitted(spec)
    cal.save(tmp_path / "c.calib")
    back = posthoc.load(tmp_path / "c.calib")
    z = torch.from_numpy(make_logits(50, 10, 9)[0]).double()
    torch.testing.assert_close(back(z), cal(z), rtol=0, atol=0)


def test_forged_model_level_files_are_refused(tmp_path):
    model = toy_model()
    x, y = toy_data()
    nc = posthoc.create("neural-clamping:epochs=2,gamma_pool=[1]").fit(model, x, y)
    nc.save(tmp_path / "nc.calib")
    meta, tensors = contents(tmp_path / "nc.calib")
    for name, bad in (
        ("temperature_", torch.tensor(-2.0, dtype=F64)),
        ("delta_", torch.full((3,), torch.nan, dtype=F64)),
    ):
        write_checked(tmp_path / "f.calib", tensors | {name: bad}, meta)
        with pytest.raises(FileFormatError, match=r"f\.calib: "):
            posthoc.load(tmp_path / "f.calib", model)
    assert posthoc.load(tmp_path / "nc.calib", model).gamma_ == 1.0


def test_the_cli_refuses_a_forged_file_with_exit_2(tmp_path, capsys):
    path = forge(tmp_path, "ts", FORGERIES["temperature -1"][1])
    z, y = make_logits(50, 10, 1)
    np.savez(tmp_path / "test.npz", logits=z, labels=y)
    argv = ["apply", path, str(tmp_path / "test.npz"), "-o", str(tmp_path / "o.npz")]
    code, _, err = run(argv, capsys)
    assert code == 2 and "temperature" in err and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()


def _logits_methods() -> list[str]:
    """Every registered calibrator that maps logits (the model-level ones need a network)."""
    return [n for n in posthoc.REGISTRY.names() if posthoc.REGISTRY.create(n).level != "model"]


@pytest.mark.parametrize("name", _logits_methods())
def test_every_calibrator_refuses_its_own_file_forged_and_loads_it_genuine(tmp_path, name):
    """The contract every calibrator, a future one included, must keep (issue 53 §5): its
    genuine file loads and gives the same outputs, and its file with every learned float
    scaled by 1e300 (finite, of the right shape) is refused in one line: each method states
    the invariants its fit keeps (``invariant_problem``) or the loaded map's outputs fail."""
    cal = fitted(name)
    cal.save(tmp_path / "c.calib")
    z = torch.from_numpy(make_logits(50, 10, 9)[0]).double()
    torch.testing.assert_close(posthoc.load(tmp_path / "c.calib")(z), cal(z), rtol=0, atol=0)

    def huge(meta, tensors):
        floats = [k for k, t in tensors.items() if t.is_floating_point()]
        assert floats, f"{name} stores no learned float"
        for k in floats:
            tensors[k] = tensors[k] * 1e300

    path = forge(tmp_path, name, huge)
    with pytest.raises(FileFormatError) as err:
        posthoc.load(path)
    assert str(err.value).startswith(path) and "\n" not in str(err.value)
