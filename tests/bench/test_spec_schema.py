"""The bench spec file's JSON Schema is written from the sections' declarations, ships equal
to what they write, and agrees with the spec reader on every preset and on bad specs."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from calibkit import schemas
from calibkit.bench import _sections as sections
from calibkit.bench._spec import (
    ENTRY_KEYS,
    METHOD_KEYS,
    PRESETS,
    TOP_KEYS,
    SpecError,
    load_spec,
    resolve,
)

jsonschema = pytest.importorskip("jsonschema")


def _validator():
    return jsonschema.Draft202012Validator(schemas.load("bench-spec"))


def test_the_shipped_schema_is_the_declarations():
    assert schemas.load("bench-spec") == json.loads(json.dumps(sections.spec_schema()))
    shipped = schemas.load("bench-spec")
    assert tuple(shipped["properties"]) == TOP_KEYS
    assert tuple(shipped["$defs"]["MethodEntry"]["properties"]) == METHOD_KEYS
    assert tuple(shipped["$defs"]["DatasetEntry"]["properties"]) == ENTRY_KEYS
    assert tuple(shipped["properties"]["train"]["properties"]) == sections.TRAIN_KEYS


@pytest.mark.parametrize("preset", sorted(p.stem for p in PRESETS.glob("*.yaml")))
def test_every_preset_is_valid_under_the_schema(preset):
    raw = yaml.safe_load((PRESETS / f"{preset}.yaml").read_text())
    _validator().validate(raw)


GOOD = {"datasets": [{"data": "digits", "models": ["cnn"]}], "methods": [{"loss": "ce"}]}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"colour": "red"}, "colour: unknown key"),
        ({"record": "yes"}, "record: expected true or false"),
        ({"train": {"lr2": 1}}, "train.lr2: unknown training option"),
        ({"methods": [{"loss": "ce", "mixup": 200}]}, "methods[0].mixup: expected a number in"),
        ({"methods": [{"loss": "ce", "colour": 1}]}, "methods[0].colour: unknown key"),
        ({"datasets": [{"data": "digits", "models": ["cnn"], "sets": 1}]}, "sets: unknown key"),
    ],
)
def test_a_spec_the_schema_refuses_the_reader_refuses(change, says):
    bad = GOOD | change
    assert not _validator().is_valid(bad)
    with pytest.raises(SpecError, match=None) as err:
        resolve(bad)
    assert says in str(err.value)
    _validator().validate(GOOD)
    assert resolve(GOOD).runs


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"seeds": [-1]}, "seeds[0]: expected an integer in 0.."),
        ({"seeds": [1.5]}, "seeds[0]: expected an integer in 0.."),
        ({"seeds": []}, "seeds: expected a non-empty list"),
        ({"seeds": [1, 1]}, "seeds[1]: 1 is listed twice"),
        ({"seeds": [2**70]}, "seeds[0]: expected an integer in 0.."),
        ({"calibration_sizes": [0]}, "calibration_sizes[0]: expected 'all' or an integer"),
        ({"calibration_sizes": [1]}, "calibration_sizes[0]: expected 'all' or an integer"),
        ({"calibration_sizes": ["bogus"]}, "calibration_sizes[0]: expected 'all' or"),
        ({"calibration_sizes": []}, "calibration_sizes: expected a non-empty list"),
        ({"calibration_sizes": ["all", "all"]}, "calibration_sizes[1]: 'all' is listed twice"),
        ({"name": None}, "name: expected a text, got None"),
        ({"name": 5}, "name: expected a text, got 5"),
        ({"methods": [{"name": 7, "loss": "ce"}]}, "methods[0].name: expected a text, got 7"),
        ({"posthoc": None}, "posthoc: expected a list of post-hoc specs, got None"),
        ({"train": None}, "train: expected a mapping"),
        (
            {"datasets": [{"data": "digits", "models": ["cnn"], "seeds": [2, 2]}]},
            "datasets[0].seeds[1]: 2 is listed twice",
        ),
    ],
)
def test_the_schema_and_the_reader_refuse_the_same_specs(change, says):
    """Issue 65 §6: the schema passed what the reader refused (seeds -1, [], [1, 1], 2**70;
    calibration sizes 0, 1, "bogus", []) and flagged what ran (``name: null``, ``name: 5``,
    a method named 7, ``posthoc: null``, ``train: null``): both now come from one
    declaration per key, and each refusal names its place."""
    bad = GOOD | change
    assert not _validator().is_valid(bad)
    with pytest.raises(SpecError) as err:
        resolve(bad)
    assert says in str(err.value)


def test_a_whole_float_is_the_one_place_where_they_differ():
    """JSON Schema counts 1.0 as an integer (its data model has one number type); the
    reader, as every calibkit entry point, does not take a float for an integer setting
    (docs/bench.md, "The spec's JSON Schema")."""
    bad = GOOD | {"train": {"epochs": 1.0}}
    assert _validator().is_valid(bad)
    with pytest.raises(SpecError, match=r"train\.epochs: expected an integer in 1\.\.1,000,000"):
        resolve(bad)


_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 4) | st.sampled_from([2**63 - 1, 2**63, 2**70]),
    st.floats(-2, 3, allow_nan=False).filter(lambda x: not float(x).is_integer()),
    st.sampled_from(["all", "bogus", "", "ts", "x"]),
)
_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "name": _VALUE,
        "seeds": _VALUE | st.lists(_VALUE, max_size=3),
        "calibration_sizes": _VALUE | st.lists(_VALUE, max_size=3),
        "record": _VALUE,
        "posthoc": st.none() | st.lists(st.sampled_from(["ts", "hist-binning"]), max_size=2),
        "train": st.none() | st.fixed_dictionaries({}, optional={"epochs": _VALUE}),
    },
)


@given(_CHANGES)
@settings(max_examples=150)
def test_drawn_specs_are_accepted_by_the_schema_exactly_when_the_reader_accepts_them(change):
    """Issue 65 §6: schema and reader agree on drawn specs (whole floats, which JSON Schema
    counts as integers, are not drawn: the one documented difference above)."""
    spec = GOOD | change
    try:
        resolve(spec)
        read = True
    except SpecError:
        read = False
    assert _validator().is_valid(spec) == read, change


def test_the_train_section_is_checked_without_building_a_config(monkeypatch):
    """Issue 67 §4: the spec check built a default TrainConfig, so it checked the `cnn`
    model and the `digits` data the sweep never names, and resolved a device; now each
    `train` key is checked by its declaration and the schedule by its registry."""
    from calibkit import models
    from calibkit.training import _config

    checked = []
    real = models.REGISTRY.check
    monkeypatch.setattr(models.REGISTRY, "check", lambda s: checked.append(str(s)) or real(s))
    monkeypatch.setattr(_config, "pick_device", lambda *a: pytest.fail("a device was chosen"))
    mlp = GOOD | {"datasets": [{"data": "digits", "models": ["mlp"]}]}
    resolve(mlp | {"train": {"epochs": 2, "schedule": "step:milestones=[1],gamma=0.5"}})
    assert checked == ["mlp"]  # the sweep's model only
    with pytest.raises(SpecError, match=r"train\.schedule: .*nope"):
        resolve(GOOD | {"train": {"schedule": "nope"}})
    with pytest.raises(SpecError, match=r"train\.lr: expected a number in \(0, 100\], got -1"):
        resolve(GOOD | {"train": {"lr": -1}})


def test_a_run_checks_each_setting_once(monkeypatch, tmp_path):
    """Issue 67 §4: a worker checked the loss spec 3 times (its config, then each read of
    run.json: the stage-2 fit's source and the calibrated run) and resolved ``auto`` into a
    device 3 times; it now keeps its checked config and reads its run folders with it. A
    run.json that is not the config's is refused."""
    from calibkit import runs
    from calibkit._registry import Registry
    from calibkit.bench._execute import execute
    from calibkit.training import _config

    checked, resolved = [], []
    real_check, real_pick = Registry._check, _config.pick_device

    def check(self, spec, overrides):
        if not overrides and not hasattr(spec, "family"):  # text, parsed and checked
            checked.append(self.family)
        return real_check(self, spec, overrides)

    def pick(name):
        resolved.append(name) if isinstance(name, str) else None
        return real_pick(name)

    monkeypatch.setattr(Registry, "_check", check)
    monkeypatch.setattr(_config, "pick_device", pick)
    monkeypatch.setattr(runs, "pick_device", pick)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "seeds: [1]\ntrain: {epochs: 2}\n"
        'datasets: [{data: "digits:train_size=200", models: [mlp]}]\n'
        'methods: [{name: M, loss: "focal:gamma=3", stage2: "maccal:epochs=2"}]\n'
    )
    run = load_spec(spec).runs[0]
    checked.clear()  # the spec's own check, where the sweep enters
    execute(run, tmp_path / "bench")
    # the spec's data, model, loss and stage 2 travel checked; the default schedule, text
    assert checked == ["schedule"]
    assert resolved == ["auto"]
    other = run.train_config()
    other.lr /= 2
    with pytest.raises(runs.TrainingError, match=r"other settings .*\(lr\)"):
        runs.run_evidence(tmp_path / "bench" / "train" / run.training_key, config=other)
