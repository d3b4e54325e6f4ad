"""MaC-Cal stage 2: gradient restriction leaves masked weights bit-identical, the
straight-through variant passes the whole gradient, adaptive sparsity follows Eq. 12–13,
every Table 5 row runs, features are computed once, and bad settings fail clearly."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from calibkit.training import TrainConfig, train
from calibkit.training.maccal import (
    ABLATIONS,
    MacCalConfig,
    MaskedHead,
    eta_at,
    masked_inference,
    masked_sgd_step,
    stage2,
    stage2_config,
)
from calibkit.training.runs import load_run, run_stage2


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    out = tmp_path_factory.mktemp("stage1")
    train(TrainConfig(epochs=3, seed=1), out)
    return out


def step_pair(restrict: bool):
    torch.manual_seed(0)
    head = MaskedHead(6, 3, head="bottleneck", width=5, restrict=restrict)
    h, y = torch.randn(16, 6), torch.randint(3, (16,))
    gen = torch.Generator().manual_seed(1)
    state: dict = {}
    for _ in range(2):  # a first step fills the momentum buffers
        head.resample(0.5, gen)
        nn.functional.cross_entropy(head(h), y).backward()
        masked_sgd_step(head, state, 0.1, 0.9, 5e-4)
        head.zero_grad()
    head.resample(0.5, gen)
    before = [p.detach().clone() for p in head.parameters()]
    bufs = {i: b.clone() for i, b in state.items()}
    nn.functional.cross_entropy(head(h), y).backward()
    grads = [p.grad.clone() for p in head.parameters()]
    masked_sgd_step(head, state, 0.1, 0.9, 5e-4)
    return head, before, bufs, grads, state


def test_gradient_restriction_leaves_masked_weights_and_momentum_bit_identical():
    head, before, bufs, grads, state = step_pair(restrict=True)
    params = list(head.parameters())
    for i, (p, old) in enumerate(zip(params, before, strict=True)):
        mask = next(
            (m for lin, m in zip(head.layers, head.masks, strict=True) if lin.weight is p), None
        )
        expected_buf = bufs[i] * 0.9 + grads[i] + 5e-4 * old  # torch.optim.SGD's rule
        if mask is None:  # biases: a plain SGD step
            assert torch.allclose(state[i], expected_buf) and torch.allclose(
                p, old - 0.1 * expected_buf
            )
            continue
        assert not mask.all() and mask.any()
        assert torch.equal(p[~mask], old[~mask]) and torch.equal(state[i][~mask], bufs[i][~mask])
        assert torch.equal(grads[i][~mask], torch.zeros_like(grads[i][~mask]))
        assert torch.allclose(p[mask], (old - 0.1 * expected_buf)[mask])


def test_without_restriction_the_gradient_is_straight_through():
    torch.manual_seed(0)
    head = MaskedHead(4, 3, head="linear", restrict=False)
    head.resample(0.5, torch.Generator().manual_seed(2))
    h, y = torch.randn(8, 4), torch.randint(3, (8,))
    nn.functional.cross_entropy(head(h), y).backward()
    w_eff = (head.layers[0].weight * head.masks[0]).detach().requires_grad_(True)
    nn.functional.cross_entropy(nn.functional.linear(h, w_eff, head.layers[0].bias), y).backward()
    assert torch.allclose(head.layers[0].weight.grad, w_eff.grad)
    assert (head.layers[0].weight.grad[~head.masks[0]] != 0).any()


def test_eta_schedule_is_eq_13_and_q_follows_eq_12(stage1):
    cfg = MacCalConfig(epochs=4, adaptive="decaying", batch_size=32)
    assert eta_at(cfg, 4) == pytest.approx(0.001) and eta_at(cfg, 0) == pytest.approx(0.1)
    assert eta_at(cfg, 2) == pytest.approx(0.1 * math.exp(math.log(0.01) / 2))
    assert eta_at(MacCalConfig(adaptive="static"), 7) == 0.1
    _, bundle, model, _ = load_run(stage1)
    _, history = stage2(model, bundle, cfg, torch.device("cpu"))
    q = 0.5
    for rec in history:
        assert rec["q"] == pytest.approx(q)
        step = max(-rec["eta"], min(rec["eta"], rec["train_conf"] - 0.9 * rec["train_acc"]))
        q = min(1.0, max(0.05, q + step))
        assert rec["q_next"] == pytest.approx(q)


@pytest.mark.parametrize("row", list(ABLATIONS))
def test_every_table5_row_runs_with_deterministic_inference(stage1, row):
    _, bundle, model, _ = load_run(stage1)
    model, history = stage2(
        model, bundle, MacCalConfig(**ABLATIONS[row], epochs=2), torch.device("cpu")
    )
    assert len(history) == 2 and isinstance(model.head, MaskedHead) and not model.head.training
    x = torch.randn(4, 1, 8, 8)
    assert torch.equal(model(x), model(x))
    assert len(model.head.layers) == (1 if ABLATIONS[row]["head"] == "linear" else 2)


def test_expected_weight_inference_scales_a_linear_head_by_q(stage1):
    _, bundle, model, _ = load_run(stage1)
    cfg = MacCalConfig(head="linear", adaptive="fixed", q0=0.3, epochs=1, inference="expected")
    model, _ = stage2(model, bundle, cfg, torch.device("cpu"))
    lin = model.head.layers[0]
    h = torch.randn(5, model.num_features)
    assert torch.allclose(model.head(h), nn.functional.linear(h, 0.3 * lin.weight, lin.bias))


def test_features_are_computed_once_per_split(stage1):
    _, bundle, model, _ = load_run(stage1)
    calls = []
    original = model.forward_features
    model.forward_features = lambda x: (calls.append(len(x)), original(x))[1]
    stage2(model, bundle, MacCalConfig(epochs=3), torch.device("cpu"))
    assert sum(calls) == len(bundle.train) + len(bundle.val)  # never per epoch


def test_masked_inference_starts_at_the_unmasked_head_and_loses_confidence(stage1):
    _, bundle, model, _ = load_run(stage1)
    from calibkit.data import to_inputs

    with torch.no_grad():
        h = model.forward_features(to_inputs(bundle.test.x, bundle))
    rows = masked_inference(model.head, h, bundle.test.y, [0.0, 0.5, 0.9])
    full = float((model.head(h).argmax(1) == bundle.test.y).double().mean())
    assert rows[0]["accuracy"] == pytest.approx(full)
    assert rows[0]["confidence"] > rows[2]["confidence"]
    with pytest.raises(ValueError, match=r"rates: a mask rate must lie in \[0, 1\)"):
        masked_inference(model.head, h, bundle.test.y, [1.0])


def test_cli_stage2_from_a_run_and_bad_input(stage1, tmp_path):
    history = run_stage2(stage1, stage2_config("maccal:epochs=2"), tmp_path / "m")
    assert [h["epoch"] for h in history] == [1, 2]
    _, _, model, info = load_run(tmp_path / "m")  # the masked head is rebuilt from run.json
    assert isinstance(model.head, MaskedHead) and info["stage2"]["epochs"] == 2
    for spec, message in [
        ("maccal:q0=0", r"q0: a mask rate must lie in \(0, 1\]"),
        ("maccal:gamma=1", r"gamma: expected a value in \(0, 1\)"),
        ("maccal:head=wide", "head: expected one of linear, bottleneck"),
        ("maccal:mask=1", "has no parameter 'mask'"),
    ]:
        with pytest.raises(ValueError, match=message):
            stage2_config(spec)
    _, bundle, model, _ = load_run(stage1)
    plain = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    with pytest.raises(ValueError, match="split into forward_features and head"):
        stage2(plain, bundle, MacCalConfig(epochs=1), torch.device("cpu"))
    with pytest.raises(ValueError, match="stage 2 diverged: the loss became nan in epoch 1"):
        stage2(model, bundle, MacCalConfig(epochs=2, lr=1e30), torch.device("cpu"))
    _, bundle, model, _ = load_run(stage1)
    model.num_features = 99
    with pytest.raises(
        ValueError, match="features have width 64 but the model says num_features = 99"
    ):
        stage2(model, bundle, MacCalConfig(epochs=1), torch.device("cpu"))
