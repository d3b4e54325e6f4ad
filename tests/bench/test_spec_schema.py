"""The bench spec file's JSON Schema is written from the sections' declarations, ships equal
to what they write, and agrees with the spec reader on every preset and on bad specs."""

from __future__ import annotations

import json

import pytest
import yaml

from calibkit import schemas
from calibkit.bench import _sections as sections
from calibkit.bench._spec import ENTRY_KEYS, METHOD_KEYS, PRESETS, TOP_KEYS, SpecError, resolve

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
