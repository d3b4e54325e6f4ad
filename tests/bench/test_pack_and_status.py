"""The bench on devices (issue 40 §4-5): a sweep's stage-1 networks trained as packs give
the numbers of the same sweep trained network by network (within float tolerance), its runs
reuse the packed networks, MaC-Cal's stage 2 of every seed is fitted together (issue 52),
and the workers tell the driver what they are doing while runs
run (a status per busy worker, each training epoch's end among them)."""

from __future__ import annotations

import json

import pytest

from calibkit.bench._pack import packs
from calibkit.bench._results import Results
from calibkit.bench._runner import run_bench
from calibkit.bench._spec import resolve
from calibkit.bench._stage2 import stage2_groups
from calibkit.bench._store import Store
from calibkit.bench._study import rate_table

RAW = {
    "name": "packed",
    "seeds": [1, 2],
    "train": {"epochs": 2, "batch_size": 32},
    "datasets": [{"data": "digits:train_size=200", "models": ["cnn"]}],
    "methods": [
        {"name": "CE", "loss": "ce"},
        {"name": "Focal", "loss": "focal:gamma=3"},
        {"name": "MaC-Cal", "loss": "ce", "stage2": "maccal:epochs=2"},
    ],
    "posthoc": ["ts"],
}


def _ece(out):
    rows = Store(out / "results.sqlite").metrics()
    return {(r[0], r[1], r[2]): r[5] for r in rows if r[4] == "ece" and r[3] == 0}


def test_packed_stage_one_gives_the_numbers_of_networks_trained_alone(tmp_path):
    spec = resolve(RAW)
    groups = packs(spec.runs, tmp_path / "packed")
    assert [len(g) for g in groups] == [4]  # CE and MaC-Cal share a network per seed
    seen = []
    counts = run_bench(
        spec,
        tmp_path / "packed",
        workers=2,
        pack=True,
        progress=lambda *a, status=None: seen.append(status),
    )
    assert counts["done"] == 6 and counts["failed"] == 0
    assert any(s and "pack of 4 cnn on digits: epoch 2" in s for s in seen), seen
    assert any(s and "fitting ts" in s for s in seen)
    # MaC-Cal's stage 2 of both seeds fitted together, after the pack, before the runs
    assert any(s and "stage 2 (maccal) of 2 cnn networks" in s for s in seen), seen
    assert not stage2_groups(spec.runs, tmp_path / "packed")
    for folder in (tmp_path / "packed" / "train").iterdir():
        if folder.is_dir():
            run = json.loads((folder / "run.json").read_text())
            assert run["packed"]["members"] == 4
            rate = json.loads((folder / "throughput.json").read_text())
            assert rate["packed_members"] == 4 and rate["train_images_per_s"] > 0
    assert not packs(spec.runs, tmp_path / "packed")  # trained: nothing left to pack
    store = Store(tmp_path / "packed" / "results.sqlite")
    store.history = lambda key: [{"time": 400.0}]  # one 400 s epoch of the pack of 4
    table = rate_table(store, Results(store))
    header, rows = table[0], {r[0]: r for r in table[1:]}
    assert set(rows) == {"CE", "Focal"}  # MaC-Cal's network is CE's, counted once
    for row in rows.values():  # a member's share of the pack's time, not the pack's time
        assert row[header.index("packed")] == "packs of 4"
        assert row[header.index("seconds per network")] == "100 [100, 100]"
    run_bench(spec, tmp_path / "alone", workers=1, pack=False)
    packed, alone = _ece(tmp_path / "packed"), _ece(tmp_path / "alone")
    assert packed.keys() == alone.keys() and len(packed) == 12
    for key, value in alone.items():
        assert packed[key] == pytest.approx(value, abs=2e-3), key


def test_one_worker_reports_each_epoch_of_a_run(tmp_path):
    raw = RAW | {"seeds": [1], "methods": [{"name": "CE", "loss": "ce"}]}
    seen = []
    run_bench(
        resolve(raw), tmp_path, workers=1, progress=lambda *a, status=None: seen.append(status)
    )
    assert "CE seed 1: training, epoch 1, step 7/14" in seen
    assert "CE seed 1: training, epoch 2, step 14/14" in seen


def test_a_pack_on_ray_is_one_task_holding_one_gpu(tmp_path):
    """Issue 52 §8: ``--pack`` was ignored on Ray; now each pack is one Ray task holding one
    GPU, so a cluster of G GPUs trains G packs at once. A local cluster declares 2 GPUs it
    does not have (the tasks train on CPU), so the sweep packs by default, and the numbers
    are those of the local engine's packs."""
    import os

    ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")
    raw = RAW | {"methods": RAW["methods"][:2], "seeds": [1]}
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        counts = run_bench(resolve(raw), tmp_path / "ray", engine="ray")  # pack: GPUs here
    finally:
        ray.shutdown()
    assert counts["done"] == 2 and counts["failed"] == 0
    folders = [f for f in (tmp_path / "ray" / "train").iterdir() if f.is_dir()]
    assert len(folders) == 2
    for folder in folders:
        rate = json.loads((folder / "throughput.json").read_text())
        assert rate["packed_members"] == 2
    run_bench(resolve(raw), tmp_path / "local", workers=1, pack=True)
    assert _ece(tmp_path / "ray") == pytest.approx(_ece(tmp_path / "local"), abs=1e-9)
