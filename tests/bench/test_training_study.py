"""Issue 25 §2: the training study's parts on the one bench harness: post-hoc methods for
one method's runs, one stage 1 shared by the runs that train the same network, the training
rate against a matrix product, and the train-cifar presets."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from calibkit._registry import parse_spec
from calibkit.bench._spec import SpecError, load_spec, resolve
from calibkit.training._throughput import flops_per_image, matmul_gflops

SPEC = {
    "seeds": [1, 2],
    "datasets": [{"data": "digits", "models": ["mlp"]}],
    "methods": [
        {"name": "CE", "loss": "ce", "posthoc": ["neural-clamping:epochs=2"]},
        {"name": "Focal", "loss": "focal"},
        {"name": "MaC-Cal", "loss": "ce", "stage2": "maccal:epochs=2"},
    ],
    "posthoc": ["ts"],
}


def test_method_posthoc_adds_to_that_methods_runs_only():
    runs = resolve(SPEC).runs
    by = {(r.method, r.seed): r for r in runs}
    # the runs carry their specs parsed (text only at the store's edge)
    assert by["CE", 1].posthoc == (parse_spec("ts"), parse_spec("neural-clamping:epochs=2"))
    assert by["Focal", 1].posthoc == by["MaC-Cal", 2].posthoc == (parse_spec("ts"),)
    assert by["CE", 1].as_json()["posthoc"] == ["ts", "neural-clamping:epochs=2"]
    twice = SPEC | {"methods": [{"name": "CE", "loss": "ce", "posthoc": ["ts"]}]}
    with pytest.raises(SpecError, match=r"methods\[0\]\.posthoc: ts is in the spec's posthoc"):
        resolve(twice)
    with pytest.raises(SpecError, match=r"methods\[0\]\.posthoc\[0\]: .*unknown"):
        resolve(SPEC | {"methods": [{"loss": "ce", "posthoc": ["nope"]}]})


def test_runs_training_the_same_network_share_a_training_key():
    by = {(r.method, r.seed): r for r in resolve(SPEC).runs}
    assert by["CE", 1].training_key == by["MaC-Cal", 1].training_key
    assert by["CE", 1].key != by["MaC-Cal", 1].key
    assert by["CE", 1].training_key != by["CE", 2].training_key
    assert by["CE", 1].training_key != by["Focal", 1].training_key


def test_flops_per_image_is_the_closed_form_of_a_two_layer_net():
    net = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 5))
    before = [p.detach().clone() for p in net.parameters()]
    # forward 2·12·8 + 2·8·5; backward: both weight gradients again, and the gradient into
    # the second layer's input (none into the data, which needs no gradient)
    assert flops_per_image(net, (12,)) == 2 * (12 * 8 + 8 * 5) * 2 + 2 * 8 * 5
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    assert all(p.grad is None for p in net.parameters())


def test_flops_per_image_leaves_batch_norm_statistics_alone():
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    stats = net[1].running_mean.clone()
    assert flops_per_image(net, (3, 6, 6)) > 0
    assert torch.equal(net[1].running_mean, stats)


def test_matmul_rate_is_a_positive_number():
    assert 0 < matmul_gflops("cpu", repeats=2) < 1e6


def test_the_train_cifar_presets_are_the_study_and_the_papers_protocol():
    from ..conftest import shared

    shared("cifar10-jpeg")  # the presets name ../shared/data/cifar10-jpeg, checked as they load
    study, paper = load_spec("train-cifar"), load_spec("train-cifar-paper")
    losses = {str(r.loss) for r in study.runs}
    assert {
        "ce",
        "focal:gamma=3",
        "flsd53",
        "label-smoothing:epsilon=0.05",
        "inverse-focal:gamma=3",
        "brier",
        "bsce-gra",
    } <= losses
    assert any(r.mixup for r in study.runs) and any(r.stage2 for r in study.runs)
    assert len({r.seed for r in study.runs}) >= 2
    nc = [r for r in study.runs if any(p.name == "neural-clamping" for p in r.posthoc)]
    assert nc and {r.method for r in nc} == {"CE"}
    # one network per (loss, seed): MaC-Cal and its no-mask control reuse CE's
    assert len({r.training_key for r in study.runs}) == len(study.runs) - 4
    # the controls of the mechanisms the verdicts judge (issue 68 §1)
    assert {"bsce", "maccal:adaptive=fixed,q0=1.0"} <= losses | {str(r.stage2) for r in study.runs}
    assert any(p.kwargs.get("fit_delta") is False for r in nc for p in r.posthoc)
    assert paper.methods == study.methods
    assert paper.runs[0].train["epochs"] == 200
    # the papers' code's pipeline: black padding, its normalisation, the gradient clipped at 2
    assert paper.runs[0].dataset.kwargs["augment"] == "crop-flip-black"
    assert tuple(paper.runs[0].dataset.kwargs["std"]) == (0.2023, 0.1994, 0.201)
    assert paper.runs[0].train_config().grad_clip == 2.0


def _small(run, root):
    """The study's run at CI size: the same preset, a few images, one epoch."""
    from dataclasses import replace

    data = run.dataset.with_params(root=str(root), train_size=64, val_size=60, test_size=200)
    post = tuple(p.with_params(epochs=1) if p.name == "neural-clamping" else p for p in run.posthoc)
    stage2 = run.stage2 and run.stage2.with_params(epochs=1)
    return replace(run, dataset=data, train=run.train | {"epochs": 1}, posthoc=post, stage2=stage2)


def test_the_study_preset_runs_small_on_the_real_tree_and_resumes(tmp_path):
    """CI's small version of train-cifar: CE (with Neural Clamping), BSCE-GRA and MaC-Cal on
    CE's shared stage 1, 2 seeds, on the JPEG CIFAR-10 tree."""
    from calibkit.bench._report import write_report
    from calibkit.bench._runner import run_bench
    from calibkit.bench._store import Store

    from ..conftest import shared

    root = shared("cifar10-jpeg")
    spec = load_spec("train-cifar")
    keep = ("CE", "BSCE-GRA", "MaC-Cal")
    spec.runs = [_small(r, root) for r in spec.runs if r.method in keep]
    spec.methods = [m for m in spec.methods if m in keep]
    counts = run_bench(spec, tmp_path, workers=2)
    assert counts == {"total": 6, "skipped": 0, "done": 6, "failed": 0}
    assert len([p for p in (tmp_path / "train").iterdir() if p.is_dir()]) == 4  # CE's shared
    store = Store(tmp_path / "results.sqlite", create=False)
    prov = store._read("SELECT method, provenance FROM runs")
    import json

    rates = [json.loads(p) for m, p in prov if m != "MaC-Cal"]
    assert all(r["train_gflops"] > 0 and r["matmul_gflops"] > 0 for r in rates)
    cals = {row[2] for row in store.metrics()}
    assert {"uncalibrated", "ts", "hist-binning"} < cals
    assert any(c.startswith("neural-clamping") for c in cals)
    info = write_report(tmp_path / "results.sqlite", tmp_path / "report")
    assert info["verdicts"][0][3] == "premise"
    assert all(row[3] for row in info["verdicts"][1:])
    from calibkit.bench._study import study_markdown

    md = study_markdown(tmp_path / "results.sqlite")
    for title in ("Verdicts", "Calibratability", "Refinement", "Every network", "Training rate"):
        assert f"### {title}" in md
    assert "| CE | 1 |" in md and "| MaC-Cal | 2 |" in md
    again = run_bench(spec, tmp_path, workers=1)
    assert again["skipped"] == 6 and again["done"] == 0


def test_interval_is_the_t_interval_over_seeds():
    from calibkit.bench._study import interval

    # mean 2, sd √2, n 2: half-width t(0.975, 1) · √2 / √2 = 12.706
    assert interval([0.01, 0.03], scale=100) == "2.00 [-10.71, 14.71]"
    assert interval([0.5]) == "0.50" and interval([]) == "—"


def test_estimate_counts_each_network_once_from_a_measured_rate(monkeypatch):
    from calibkit.bench import _estimate as est

    monkeypatch.setattr(est, "images_per_second", lambda *a, **k: 100.0)
    fits = []
    monkeypatch.setattr(est, "_fit_seconds", lambda spec, rows, *a: fits.append(spec) or 1.0)
    spec = resolve(SPEC | {"train": {"epochs": 4}})
    out = est.estimate(spec, workers=2, threads=1)
    n_train, n_val, n_test, shape, _ = est._sizes("digits")
    row = out["models"]["mlp"]
    assert row["networks"] == 4 and row["runs"] == 6  # MaC-Cal shares CE's networks
    per_network = 4 * (n_train / 100.0 + n_val / 300.0)
    assert row["seconds"] == pytest.approx(4 * per_network)
    # each run: its test and validation images once; ts on every run, CE's neural clamping
    # and MaC-Cal's stage 2 on theirs: 6 + 2 + 2 fits of 1 s
    assert sorted({str(s) for s in fits}) == ["maccal:epochs=2", "neural-clamping:epochs=2", "ts"]
    assert row["after_seconds"] == pytest.approx(6 * (n_val + n_test) / 300.0 + 10)
    assert out["seconds"] == pytest.approx((4 * per_network + row["after_seconds"]) / 2)
    assert out["training_seconds"] == pytest.approx(2 * per_network)
    assert out["given_runs"] == 0
    from calibkit import models

    flops = flops_per_image(models.create("mlp", num_classes=10, input_shape=shape), shape)
    assert row["gflop"] == pytest.approx(4 * 4 * n_train * flops / 1e9)


def test_a_fit_is_timed_for_real_and_a_model_level_one_scaled_from_its_pilot(monkeypatch):
    from calibkit.bench import _estimate as est

    sizes = est._sizes("digits")
    mlp = est.parse_spec("mlp")
    cache: dict = {}
    ts = est._fit_seconds(est.parse_spec("ts"), 300, sizes, mlp, 1, cache)
    assert 0 < ts < 5 and list(cache.values()) == [ts]
    fitted = []
    real_create = est.posthoc.create
    monkeypatch.setattr(est.posthoc, "create", lambda s: fitted.append(str(s)) or real_create(s))
    seconds, scale = est._time_fit(est.parse_spec("neural-clamping:epochs=4"), 300, sizes, mlp)
    assert fitted[-1] == "neural-clamping:epochs=1"  # one pilot epoch on 256 of the 300 rows
    assert seconds > 0 and scale == pytest.approx(4 * 300 / est.PILOT_ROWS)
    _, scale = est._time_fit(est.parse_spec("maccal:epochs=3"), 100, sizes, mlp)
    assert scale == 3 and fitted[-1] == "maccal:epochs=1"


def test_bench_estimate_prints_and_runs_nothing(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from calibkit.cli import _progress as progress
    from calibkit.cli import cli

    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.0)  # issue 42 §2: the paper preset's
    # estimate was silent for 61 s (a ResNet-110's steps on a CPU): it says what it times

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "seeds: [1]\ndatasets: [{data: digits, models: [cnn]}]\n"
        "methods: [{loss: ce}]\ntrain: {epochs: 2}\n"
    )
    res = CliRunner().invoke(cli, ["bench", str(spec), "--estimate", "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "cnn: 1 networks" in res.output and "of training and" in res.output
    assert "--estimate: 1/1" in res.stderr and "timing cnn's training steps on cpu" in res.stderr
    assert not (tmp_path / "o").exists()
    res = CliRunner().invoke(cli, ["bench", str(spec), "--estimate", "--json"])
    payload = json.loads(res.output)
    assert payload["models"]["cnn"]["networks"] == 1
    from tests.test_cli_json import validate

    validate("bench-estimate", payload)
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    res = CliRunner().invoke(
        cli, ["bench", str(spec), "--estimate", "--workers", str(cores), "--threads", "2"]
    )
    assert res.exit_code == 0 and f"workers × 2 threads > {cores} cores" in res.output


def test_an_unwritable_doc_is_refused_before_the_sweep(tmp_path):
    from click.testing import CliRunner

    from calibkit.cli import cli

    (tmp_path / "file").write_text("x")
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            "default",
            "-o",
            str(tmp_path / "o"),
            "--doc",
            str(tmp_path / "file" / "real.md"),
        ],
    )
    assert res.exit_code == 2 and "cannot write to" in res.output
    assert not (tmp_path / "o").exists()


def test_every_preset_that_ships_is_a_valid_spec():
    """A preset is one YAML file (docs/architecture.md, "Adding a preset"): each one that
    ships loads and checks like a user's spec, and its name is its file's."""
    from calibkit.bench._spec import PRESETS

    from ..conftest import shared

    shared("cifar10-jpeg")  # several presets name ../shared/data, checked as they load
    found = sorted(PRESETS.glob("*.yaml"))
    assert len(found) >= 7
    for path in found:
        assert f"name: {path.stem}" in path.read_text(), path.name
        if "root=~/" in path.read_text():  # the user's own data: refused in one line here
            with pytest.raises(SpecError, match=r"root: ~/\S+ does not exist"):
                load_spec(path.stem)
            continue
        assert load_spec(path.stem).runs, path.name


def test_presets_names_every_preset_with_what_it_runs_and_its_measured_time():
    import json

    from click.testing import CliRunner

    from calibkit.bench._spec import PRESETS
    from calibkit.cli import cli
    from tests.test_cli_json import validate

    res = CliRunner().invoke(cli, ["presets", "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    validate("presets", payload)
    rows = {r["name"]: r for r in payload["presets"]}
    assert set(rows) == {p.stem for p in PRESETS.glob("*.yaml")}
    assert all(r["about"] for r in rows.values())
    assert rows["default"]["runs"] == 90 and rows["default"]["unreadable"] is None
    # a time the help once remembered ("5-8 minutes") is now a measurement with its source
    assert re.search(r"\d+ min \d+ s wall on .*commit [0-9a-f]{7}", rows["default"]["measured"])
    text = CliRunner().invoke(cli, ["presets"]).output
    assert "default (90 runs): Every system" in text and "never run; `calibkit bench" in text


def test_the_bench_help_remembers_no_times():
    from click.testing import CliRunner

    from calibkit.cli import cli

    text = CliRunner().invoke(cli, ["bench", "--help"]).output
    assert "calibkit presets" in text and not re.search(r"\d+\s*(minutes|min\b)", text)
