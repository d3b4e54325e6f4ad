"""Schedules, batch transforms and recorders of the trainer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calibkit import losses, models
from calibkit.training import crop_flip, lr_at, milestones, mixup
from calibkit.training._recorders import EpochTotals, LearnedEpochs, grad_norms


def test_schedule_presets_scale_with_the_run_length():
    assert milestones("cifar", 350) == ([150, 250], 0.1)
    assert milestones("tiny-imagenet", 100) == ([40, 60], 0.1)
    assert milestones("cifar", 30) == ([13, 21], 0.1)
    assert [lr_at("cifar", 0.1, e, 350) for e in (0, 149, 150, 249, 250)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001]
    )
    assert lr_at("step:milestones=[2,4],gamma=0.5", 1.0, 4, 10) == 0.25
    assert lr_at("constant", 0.3, 99, 100) == 0.3
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        milestones("cosine", 10)
    with pytest.raises(ValueError, match="milestones=a is not an int or a sequence"):
        milestones("step:milestones=a", 10)
    with pytest.raises(ValueError, match="milestones must be positive integers"):
        milestones("step:milestones=[0,3]", 10)


def test_crop_flip_returns_a_flipped_or_plain_crop_of_the_padded_image():
    x = torch.arange(2 * 3 * 6 * 6, dtype=torch.float32).reshape(2, 3, 6, 6) + 1
    out = crop_flip(x, torch.Generator().manual_seed(0), pad=2)
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2))
    for b in range(2):
        crops = [
            padded[b, :, i : i + 6, j : j + 6].flip(-1) if f else padded[b, :, i : i + 6, j : j + 6]
            for i in range(5)
            for j in range(5)
            for f in (False, True)
        ]
        assert any(torch.equal(out[b], c) for c in crops)
    again = crop_flip(x, torch.Generator().manual_seed(0), pad=2)
    assert torch.equal(out, again)


def test_black_padding_is_black_before_normalisation():
    """Issue 55 §5: the papers' code pads the crop with black and then normalises, so the
    border is (0 − mean) / std per channel; calibkit's crop-flip pads normalised images
    with 0 (the mean colour). The same draws give the same crops."""
    from calibkit.data._augment import augmentation

    mean, std = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
    black = -torch.tensor(mean) / torch.tensor(std)
    x = torch.randn(64, 3, 8, 8)
    out = augmentation("crop-flip-black", mean, std)(x, torch.Generator().manual_seed(3))
    shifted = crop_flip(x - black[:, None, None], torch.Generator().manual_seed(3))
    torch.testing.assert_close(out, shifted + black[:, None, None])
    border = (out == black[None, :, None, None]).all(1)  # a pixel black in every channel
    assert border.any() and not (out == 0).all(1).any()
    assert augmentation("crop-flip", mean, std) is crop_flip
    with pytest.raises(ValueError, match="crop-flip, crop-flip-black or none"):
        augmentation("crop-flip-white", mean, std)


def test_mixup_is_one_convex_combination_per_batch():
    x = torch.randn(8, 3)
    t = torch.nn.functional.one_hot(torch.arange(8) % 4, 4).float()
    xm, tm = mixup(x, t, 0.4, torch.Generator().manual_seed(1), np.random.default_rng(2))
    lam = float(np.random.default_rng(2).beta(0.4, 0.4))
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(xm, lam * x + (1 - lam) * x[perm])
    assert torch.allclose(tm.sum(1), torch.ones(8)) and torch.allclose(
        tm, lam * t + (1 - lam) * t[perm]
    )


def test_learned_epoch_is_the_epoch_since_which_a_sample_stays_correct():
    rec = LearnedEpochs(3)
    history = {1: [True, False, True], 2: [True, True, False], 3: [True, True, False]}
    for epoch, correct in history.items():
        rec.update(torch.arange(3), torch.tensor(correct), epoch)
    assert rec.learned_epoch().tolist() == [1, 2, 4]  # 4: wrong in the last epoch


@pytest.mark.parametrize("every", [1, 3, 32])
def test_epoch_totals_equal_step_by_step_sums(every):
    """Held and reduced in groups (the last group partial) or step by step: the same loss
    sum to 1e-15 relative, the same number correct and seen, the same learned epochs."""
    g = torch.Generator().manual_seed(0)
    steps = []
    for size in (8, 8, 8, 8, 8, 8, 8, 5):  # 61 samples, the last batch short
        logits, labels = torch.randn(size, 4, generator=g), torch.randint(4, (size,), generator=g)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        steps.append((loss, logits, labels))
    order = torch.randperm(61, generator=g)
    held, direct = LearnedEpochs(61), LearnedEpochs(61)
    totals = EpochTotals(torch.device("cpu"), held, every=every)
    loss_sum, n_correct, start = 0.0, 0, 0
    for loss, logits, labels in steps:
        idx = order[start : start + len(labels)]
        start += len(labels)
        totals.add(loss, logits, labels, idx, epoch=2)
        correct = logits.argmax(1) == labels
        loss_sum += float(loss) * len(labels)
        n_correct += int(correct.sum())
        direct.update(idx, correct, 2)
    s = totals.totals(epoch=2)
    assert s.dtype == torch.float64
    assert float(s[0]) == pytest.approx(loss_sum, rel=1e-15)
    assert s[1:].tolist() == [n_correct, 61]
    assert torch.equal(held.last_wrong, direct.last_wrong) and bool(held.last_wrong.any())
    assert totals.totals(epoch=2).tolist() == s.tolist()  # nothing held twice


def test_grad_norms_equal_per_sample_autograd_on_the_head():
    torch.manual_seed(0)
    model = models.create("mlp:hidden=16", num_classes=4, input_shape=(5,)).double().eval()
    x, y = torch.randn(6, 5, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 0, 1])
    for spec in ("ce", "bsce-gra", "focal:gamma=2"):
        loss = losses.create(spec, reduction="sum")
        norms, brier = grad_norms(model, loss, x, y)
        for i in range(6):
            model.zero_grad()
            loss(model(x[i : i + 1]), y[i : i + 1]).backward()
            g = torch.cat([model.head.weight.grad.flatten(), model.head.bias.grad])
            assert float(norms[i]) == pytest.approx(float(g.norm()), rel=1e-10)
        p = torch.softmax(model(x), 1)
        assert torch.allclose(brier, ((p - torch.nn.functional.one_hot(y, 4)) ** 2).sum(1))


def test_schedules_are_a_registry_built_once_per_run(tmp_path, monkeypatch):
    from calibkit.training import TrainConfig, train
    from calibkit.training import _schedule as schedule

    assert schedule.REGISTRY.names() == ["cifar", "constant", "step", "tiny-imagenet"]
    assert schedule.REGISTRY.parameters("step") == ["milestones", "gamma"]
    built = []
    real = schedule.create
    monkeypatch.setattr(schedule, "create", lambda spec: built.append(spec) or real(spec))
    result = train(TrainConfig(epochs=3, schedule="step:milestones=[1],gamma=0.5"), tmp_path)
    # checked (parsed, not built) with the configuration, built once for the run from the
    # parsed spec: not once per epoch
    assert [str(s) for s in built] == ["step:milestones=[1],gamma=0.5"]
    assert [h["lr"] for h in result.history] == pytest.approx([0.1, 0.05, 0.05])


def test_a_run_parses_each_spec_once_and_writes_it_back_as_text(tmp_path, monkeypatch):
    import json
    from collections import Counter

    from calibkit import _registry as registry
    from calibkit.training import TrainConfig, train

    parsed = Counter()
    real = registry.parse_spec

    def counting(spec):
        parsed[spec if isinstance(spec, str) else "(a Spec: no parsing)"] += isinstance(spec, str)
        return real(spec)

    monkeypatch.setattr(registry, "parse_spec", counting)
    config = TrainConfig(loss="focal:gamma=3", epochs=1, extra=["digits"])
    train(config, tmp_path / "r")
    assert {k: v for k, v in parsed.items() if v} == {
        "digits": 2,
        "cnn": 1,
        "focal:gamma=3": 1,
        "cifar": 1,  # digits: data and extra
    }
    written = json.loads((tmp_path / "r" / "run.json").read_text())["config"]
    assert (written["loss"], written["extra"], written["schedule"]) == (
        "focal:gamma=3",
        ["digits"],
        "cifar",
    )


def test_a_config_is_checked_once_and_its_device_resolved_once(monkeypatch):
    """Issue 43: every layer of a run may call check(); only the first checks, and the
    device it resolves (torch_device) is the one the trainer, stage 2 and the kernels take.
    A field changed after a check is checked again; a torch.device is trusted as it is."""
    import torch

    import calibkit.training._config as config_module
    from calibkit.training._config import TrainConfig, pick_device

    resolved = []
    real = config_module.pick_device
    monkeypatch.setattr(config_module, "pick_device", lambda n: resolved.append(n) or real(n))
    config = TrainConfig(data="digits", model="mlp", loss="focal:gamma=3", device="auto")
    assert config.check() is config and config.check() is config
    assert config.torch_device == torch.device("cpu") and resolved == ["auto"]
    assert str(config.loss) == "focal:gamma=3" and config.loss.family == "loss"
    config.epochs = 0  # a change after the check is checked
    with pytest.raises(ValueError, match="epochs: expected an integer"):
        config.check()
    config.epochs = 2
    config.check()
    config.extra.append("digits")  # in place, too
    config.check()
    assert resolved == ["auto", "auto", "auto"] and str(config.extra[0]) == "digits"
    device = torch.device("cpu")
    assert pick_device(device) is device
