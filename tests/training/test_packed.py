"""Packed training (calibkit.training._packed): a member of a packed run equals the same
network trained alone (same initialisation, batches, augmentation and mixup draws) within
float tolerance, each member writes its own run, a killed packed run resumes to the same
networks, and what cannot be packed is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibkit.training import TrainConfig, train
from calibkit.training import _trainer as trainer
from calibkit.training._packed import pack_key
from calibkit.training._trainer import train_packed

SHARED = {
    "data": "digits:train_size=200",
    "model": "cnn",
    "epochs": 2,
    "batch_size": 32,
    "device": "cpu",
}
MEMBERS = [("ce", 1, 0.0), ("focal:gamma=3", 2, 0.0), ("ce", 3, 0.2)]


def _configs(**more):
    return [
        TrainConfig(loss=loss, seed=seed, mixup=mix, **(SHARED | more))
        for loss, seed, mix in MEMBERS
    ]


def _logits(folder):
    with np.load(folder / "logits.npz") as f:
        return f["logits_val"], f["logits_test"]


def _packed_and_alone(configs, tmp_path) -> None:
    """Train ``configs`` as one pack (``p<i>``) and each alone (``a<i>``), and check that
    every member's logits equal its network trained alone within float tolerance."""
    train_packed(configs, [tmp_path / f"p{i}" for i in range(len(configs))])
    for i, config in enumerate(configs):
        train(config, tmp_path / f"a{i}")
        for alone, both in zip(
            _logits(tmp_path / f"a{i}"), _logits(tmp_path / f"p{i}"), strict=True
        ):
            assert np.abs(alone - both).max() < 1e-4 * max(1.0, np.abs(alone).max())


def test_each_member_equals_its_network_trained_alone(tmp_path):
    configs = _configs()
    _packed_and_alone(configs, tmp_path)
    for i, config in enumerate(configs):
        h_alone = json.loads((tmp_path / f"a{i}" / "history.json").read_text())
        h_packed = json.loads((tmp_path / f"p{i}" / "history.json").read_text())
        for a, p in zip(h_alone, h_packed, strict=True):
            assert p["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4)
            assert p["val_acc"] == pytest.approx(a["val_acc"], abs=1e-9)
        run = json.loads((tmp_path / f"p{i}" / "run.json").read_text())
        assert run["packed"] == {"members": 3, "member": i}
        assert run["config"]["loss"] == str(config.loss) and run["seed"] == config.seed


def test_members_on_images_crop_flip_and_mix_as_they_would_alone(tmp_path):
    """Issue 52 §3: a pack's batches are gathered, normalised and cropped in one go, each
    member with its own crop, flip and mixup draws: a member still equals its network
    trained alone, and members of different seeds saw different crops."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(48):
        part = "train" if i < 36 else "test"
        pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        (tmp_path / "tree" / part / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(tmp_path / "tree" / part / f"c{i % 2}" / f"{i}.png")
    data = f"folder:root={tmp_path / 'tree'},val_size=8,in_memory=true"
    configs = _configs(data=data, batch_size=8)
    assert trainer.build(configs[0])[0].augment == "crop-flip"
    _packed_and_alone(configs, tmp_path)
    assert np.abs(_logits(tmp_path / "a0")[1] - _logits(tmp_path / "a1")[1]).max() > 1e-3


def test_gradient_clipping_clips_each_member_as_it_would_alone(tmp_path):
    """Issue 55 §5: the papers' code clips the gradient norm at 2. A packed member clips its
    own gradient, as the network trained alone does; a clip this tight changes the run."""
    _packed_and_alone(_configs(grad_clip=0.05), tmp_path)
    train(_configs()[0], tmp_path / "unclipped")
    assert np.abs(_logits(tmp_path / "a0")[1] - _logits(tmp_path / "unclipped")[1]).max() > 0.1


@pytest.mark.parametrize("kill", ["between epochs", "during the writes", "during the renames"])
def test_a_killed_packed_run_resumes_to_the_same_networks(tmp_path, monkeypatch, kill):
    configs = _configs(epochs=3)
    whole = [tmp_path / f"w{i}" for i in range(3)]
    train_packed(configs, whole)
    calls = {"save": 0, "replace": 0}
    real_save, real_replace = trainer.save_checkpoint, trainer.os.replace

    def save(*args, **kwargs):  # epoch 2's second member: killed while writing
        calls["save"] += 1
        if kill == "during the writes" and calls["save"] == 5:
            raise KeyboardInterrupt
        return real_save(*args, **kwargs)

    def replace(*args):  # epoch 2's second rename: killed between two renames
        calls["replace"] += 1
        if kill == "during the renames" and calls["replace"] == 5:
            raise KeyboardInterrupt
        return real_replace(*args)

    def stop_after_two(step, total, record):
        if kill == "between epochs" and record is not None and record["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "save_checkpoint", save)
    monkeypatch.setattr(trainer.os, "replace", replace)
    parts = [tmp_path / f"k{i}" for i in range(3)]
    with pytest.raises(KeyboardInterrupt):
        train_packed(configs, parts, progress=stop_after_two)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="already holds a run"):
        train_packed(configs, parts)
    train_packed(configs, parts, resume=True)
    for a, b in zip(whole, parts, strict=True):
        for x, y in zip(_logits(a), _logits(b), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def test_what_cannot_be_packed_is_refused(tmp_path):
    one = TrainConfig(**SHARED)
    other = TrainConfig(**(SHARED | {"lr": 0.05}))
    assert pack_key(one) != pack_key(other)
    assert pack_key(TrainConfig(**SHARED, record_learned_epochs=True)) is None
    with pytest.raises(ValueError, match="share every setting but loss, seed, mixup"):
        train_packed([one, other], [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ValueError, match="one output folder per configuration"):
        train_packed([one], [])
