"""Every command's --json output is strict JSON (no NaN or Infinity tokens) and matches its
JSON Schema in calibkit/schemas/, on real runs of the commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibkit import schemas
from calibkit.cli._output import strict_json
from tests.bench.test_runner_report import SPEC
from tests.conftest import make_logits
from tests.test_cli import run_ok

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

SCHEMAS = schemas.HERE


def _registry():
    resources = []
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)  # each is a valid schema
        resources.append((schema["$id"], referencing.Resource.from_contents(schema)))
    return referencing.Registry().with_resources(resources)


REGISTRY = _registry()


def validate(command: str, payload) -> None:
    """Raise unless ``payload`` matches calibkit/schemas/<command>.schema.json."""
    schema = json.loads((SCHEMAS / f"{command}.schema.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=REGISTRY).validate(payload)


def strict_loads(text: str):
    def refuse(token):
        raise AssertionError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def output(command: str, argv: list[str], capsys):
    payload = strict_loads(run_ok(argv, capsys))
    validate(command, payload)
    assert payload["schema_version"] == schemas.SCHEMA_VERSION
    return payload


def test_every_command_with_json_has_a_schema():
    from calibkit.cli import cli

    with_json = {
        name
        for name, command in cli.commands.items()
        if any(p.name == "as_json" for p in command.params)
    }
    documented = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert with_json == set(cli.commands)  # every command has --json
    assert with_json | {"common", "bench-estimate", "bench-spec"} == documented


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("json")
    z, y = make_logits(800, 5, 0, dtype=np.float32)
    z[:50] *= 40  # confident rows: empty low bins, so NaN bin values are exercised
    np.savez(d / "val.npz", logits=z[:400], labels=y[:400])
    np.savez(d / "test.npz", logits=z[400:], labels=y[400:])
    np.savez(d / "ood.npz", logits=make_logits(100, 5, 9, acc=0.2, dtype=np.float32)[0])
    return d


def test_measuring_and_post_hoc_commands(files, capsys):
    d = str(files)
    r = output(
        "evaluate",
        [
            "evaluate",
            f"{d}/test.npz",
            "--bootstrap",
            "20",
            "--ood",
            f"{d}/ood.npz",
            "--plot",
            f"{d}/r.png",
            "--json",
        ],
        capsys,
    )
    assert None in r["bins"]["accuracy"] and "ood_aupr" in r["metrics"]
    output(
        "fit",
        ["fit", "--method", "ts", "--val", f"{d}/val.npz", "-o", f"{d}/ts.calib", "--json"],
        capsys,
    )
    output(
        "apply", ["apply", f"{d}/ts.calib", f"{d}/test.npz", "-o", f"{d}/out.npz", "--json"], capsys
    )
    pair = ["--val", f"{d}/val.npz", "--test", f"{d}/test.npz"]
    output(
        "compare",
        ["compare", *pair, "--methods", "ts,dir-odir:folds=2", "--seeds", "2", "--json"],
        capsys,
    )
    output(
        "compare",
        [
            "compare",
            "--file",
            f"{d}/test.npz",
            "--split",
            "0.5",
            "--methods",
            "ts",
            "--bootstrap",
            "0",
            "--json",
        ],
        capsys,
    )
    rows = output("methods", ["methods", "--json"], capsys)["methods"]
    assert {r["name"] for r in rows} >= {"ts", "maccal", "neural-clamping"}
    ts = next(r for r in rows if r["name"] == "ts")
    import inspect

    from calibkit.posthoc import REGISTRY

    t_max = inspect.signature(REGISTRY.factory("ts")).parameters["t_max"].default
    assert ts["defaults"]["t_max"] == repr(t_max) and list(ts["defaults"]) == ts["settings"]


def test_training_calibrating_and_bench_commands(tmp_path, capsys):
    out = output("train", ["train", "--epochs", "1", "-o", str(tmp_path / "run"), "--json"], capsys)
    assert len(out["history"]) == 1
    cal = output(
        "calibrate",
        ["calibrate", "ts", str(tmp_path / "run"), "-o", str(tmp_path / "ts"), "--json"],
        capsys,
    )
    test = cal["test"]  # the run's test split, before and after (issue 42 §5)
    assert test["before"]["accuracy"] == test["after"]["accuracy"]  # TS keeps the argmax
    assert test["after"]["nll"] <= test["before"]["nll"] + 0.05
    (tmp_path / "one.yaml").write_text(SPEC.replace("seeds: [1, 2, 3]", "seeds: [1]"))
    bench = output(
        "bench", ["bench", str(tmp_path / "one.yaml"), "-o", str(tmp_path / "b"), "--json"], capsys
    )
    assert bench["counts"]["done"] == 1
    output("report", ["report", bench["store"], "-o", str(tmp_path / "rep"), "--json"], capsys)


def test_demo_output_is_an_evaluation(tmp_path, capsys):
    output("demo", ["demo", "-o", str(tmp_path), "--bootstrap", "5", "--json"], capsys)


def test_strict_json_writes_null_for_non_finite_numbers():
    value = {"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": (Path("x"), 2)}
    assert strict_json(value) == {"a": None, "b": [None, None, 1.5], "c": ["x", 2]}
    with pytest.raises(jsonschema.ValidationError):  # the schemas are not vacuous
        validate("fit", {"method": "ts", "file": "x", "fit": {}, "before": {}, "after": {}})
    with pytest.raises(jsonschema.ValidationError):
        validate(
            "methods",
            {
                "schema_version": 1,
                "methods": [
                    {"name": "ts", "level": "logits", "settings": [], "defaults": {}, "extra": 1}
                ],
            },
        )
    with pytest.raises(jsonschema.ValidationError):  # the version is required
        validate("methods", {"methods": []})


def test_the_schemas_metric_names_are_the_metric_tables():
    """A metric added to the table (docs/architecture.md, "Adding a metric") is named in the
    shipped schema's enums, in the table's order."""
    from calibkit import schemas
    from calibkit.metrics._table import METRICS_TABLE

    names = [m.name for m in METRICS_TABLE]
    common = schemas.load("common")["$defs"]
    assert common["metrics"]["propertyNames"]["enum"] == names
    assert common["intervals"]["propertyNames"]["enum"] == names
