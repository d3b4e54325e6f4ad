"""Training losses: values against per-sample formulas written out here, gradients against
their closed forms (focal, every -GRA loss), float64 gradcheck for all, and finiteness at
saturated probabilities."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from calibkit import losses
from calibkit.losses._base import soft_targets

ALL = losses.names()


def batch(n=12, k=5, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    z = scale * torch.randn(n, k, generator=g, dtype=torch.float64)
    y = torch.randint(k, (n,), generator=g)
    soft = torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64), 1)
    return z, y, soft


def test_registry_holds_every_loss_the_issue_names():
    assert set(ALL) == {
        "ce",
        "focal",
        "flsd53",
        "dual-focal",
        "inverse-focal",
        "label-smoothing",
        "erl",
        "logit-l1",
        "mmce",
        "brier",
        "mbls",
        "bsce",
        "bsce-gra",
        "focal-gra",
        "dual-focal-gra",
    }


def reference(name: str, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample losses with integer labels, one sample at a time, from docs/methods.md §3."""
    out = []
    for zi, yi in zip(z, y, strict=True):
        p = torch.softmax(zi, 0)
        py, k = p[yi], len(p)
        below = [float(v) for v in p if v < py]
        pj = max(below) if below else 0.0
        ce = -math.log(py)
        brier = float(((p - F.one_hot(yi, k)) ** 2).sum())
        values = {
            "ce": ce,
            "focal": (1 - py) ** 3 * ce,
            "focal-gra": (1 - py) ** 3 * ce,
            "flsd53": (1 - py) ** (5 if py < 0.2 else 3) * ce,
            "dual-focal": (1 - py + pj) ** 5 * ce,
            "dual-focal-gra": (1 - py + pj) ** 5 * ce,
            "inverse-focal": (1 + py) ** 3 * ce,
            "label-smoothing": 0.95 * ce - 0.05 / k * float(torch.log(p).sum()),
            "erl": ce + 0.1 * float((p * torch.log(p)).sum()),
            "logit-l1": ce + 0.01 * float(zi.abs().sum()),
            "brier": brier,
            "mbls": ce + 0.1 * sum(max(0.0, float(zi.max() - v - 10)) for v in zi),
            "bsce": brier * ce,
            "bsce-gra": brier * ce,
        }
        out.append(float(values[name]))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("name", [n for n in ALL if n != "mmce"])
def test_value_equals_the_per_sample_formula(name):
    z, y, _ = batch(scale=6.0)  # scale 6: some logit gaps exceed MbLS's margin of 10
    got = losses.create(name, reduction="none")(z, y)
    assert torch.allclose(got, reference(name, z, y), rtol=1e-10, atol=1e-12)


def test_mmce_equals_the_pairwise_sums_of_kumar_et_al():
    z, y, _ = batch(n=9)
    p = torch.softmax(z, 1)
    r, pred = p.max(1)
    c = (pred == y).tolist()
    m, n = sum(c), len(c)
    kern = lambda a, b: math.exp(-abs(a - b) / 0.4)  # noqa: E731
    total = 0.0
    for i in range(n):
        for j in range(n):
            ri, rj = float(r[i]), float(r[j])
            if c[i] and c[j]:
                total += (1 - ri) * (1 - rj) * kern(ri, rj) / m**2
            elif not c[i] and not c[j]:
                total += ri * rj * kern(ri, rj) / (n - m) ** 2
            else:  # each mixed pair appears twice: -2 sum over C x W
                a, b = (ri, rj) if c[i] else (rj, ri)
                total -= (1 - a) * b * kern(a, b) / (m * (n - m))
    assert 0 < m < n
    mmce = math.sqrt(total + 1e-10)
    assert float(losses.mmce_weighted(z, y)) == pytest.approx(mmce, rel=1e-12)
    ce = F.cross_entropy(z, y, reduction="none")
    got = losses.create("mmce:lam=2", reduction="none")(z, y)
    assert torch.allclose(got, ce + 2 * mmce, rtol=1e-12)


def _their_mmce(z: torch.Tensor, y: torch.Tensor) -> float:
    """focal_calibration's MMCE_weighted penalty, its rule written again: the top-k split
    into correct and wrong confidences, each block's mean of kernel × weights, divided again
    by m², n² and m·n (+ 1e-5), zeroed on a batch all right or all wrong."""
    r, pred = torch.softmax(z, 1).max(1)
    ok = pred == y
    good, bad = r[ok], r[~ok]
    m, n = len(good), len(bad)
    if m == 0 or n == 0:
        return 0.0

    def block(a, wa, b, wb):
        kernel = torch.exp(-(a[:, None] - b[None, :]).abs() / 0.4)
        return float((kernel * wa[:, None] * wb[None, :]).mean())

    total = block(good, 1 - good, good, 1 - good) / (m * m + 1e-5)
    total += block(bad, bad, bad, bad) / (n * n + 1e-5)
    total -= 2 * block(good, 1 - good, bad, bad) / (m * n + 1e-5)
    return math.sqrt(total + 1e-10)


@pytest.mark.parametrize("n", [9, 64])
def test_mmce_focal_calibration_normalisation_is_their_rule(n):
    """Issue 55 §5: their weighted MMCE divides each sum a second time, and is 0 on a batch
    that is all right."""
    z, y, _ = batch(n=n)
    theirs = losses.mmce_weighted(z, y, normalisation="focal-calibration")
    assert float(theirs) == pytest.approx(_their_mmce(z, y), rel=1e-9)
    right = z.argmax(1)
    assert float(losses.mmce_weighted(z, right, normalisation="focal-calibration")) == 0.0
    ce = F.cross_entropy(z, y, reduction="none")
    got = losses.create("mmce:lam=2,normalisation=focal-calibration", reduction="none")(z, y)
    assert torch.allclose(got, ce + 2 * theirs, rtol=1e-12)
    with pytest.raises(ValueError, match="normalisation"):
        losses.create("mmce:normalisation=mukhoti")


def test_label_smoothing_and_ce_match_torch():
    z, y, _ = batch()
    assert float(losses.create("ce")(z, y)) == pytest.approx(float(F.cross_entropy(z, y)), 1e-14)
    ls = losses.create("label-smoothing:epsilon=0.1")(z, y)
    assert float(ls) == pytest.approx(float(F.cross_entropy(z, y, label_smoothing=0.1)), 1e-14)


def test_bsce_exponents_give_the_generalised_brier_norm():
    z, y, _ = batch()
    p = torch.softmax(z, 1)
    u = torch.linalg.vector_norm(p - F.one_hot(y, 5), ord=1, dim=1) ** 0.5
    got = losses.create("bsce:gamma=0.5,norm=1", reduction="none")(z, y)
    assert torch.allclose(got, u * F.cross_entropy(z, y, reduction="none"), rtol=1e-12)


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0])
def test_focal_gradient_is_g_times_the_ce_gradient(gamma):
    z, y, _ = batch()
    z.requires_grad_(True)
    losses.create(f"focal:gamma={gamma}", reduction="sum")(z, y).backward()
    p = torch.softmax(z.detach(), 1)
    py = p[torch.arange(len(y)), y]
    g = (1 - py) ** gamma - gamma * py * (1 - py) ** (gamma - 1) * torch.log(py)
    expected = g[:, None] * (p - F.one_hot(y, 5))
    assert torch.allclose(z.grad, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("gra", ["focal-gra", "dual-focal-gra", "bsce-gra"])
def test_gra_gradient_is_u_times_the_ce_gradient_exactly(gra):
    z, y, _ = batch()
    z.requires_grad_(True)
    losses.create(gra, reduction="mean")(z, y).backward()
    plain = losses.create(gra.removesuffix("-gra"))
    logp = torch.log_softmax(z.detach(), 1)
    u = plain.weights(logp.exp(), logp, F.one_hot(y, 5).double())
    u_y = u[:, 0] if u.shape[1] == 1 else u[torch.arange(len(y)), y]
    expected = u_y[:, None] * (logp.exp() - F.one_hot(y, 5)) / len(y)
    assert torch.equal(z.grad, expected) or torch.allclose(z.grad, expected, rtol=1e-14, atol=0)
    assert not torch.allclose(z.grad, torch.func.grad(lambda x: plain(x, y))(z.detach()))


@pytest.mark.parametrize("name", ALL)
def test_gradcheck_float64_labels_and_soft_targets(name):
    """A -GRA loss's gradient is by design not the derivative of its value; with u frozen
    at the point of evaluation it is, so that is what gradcheck checks for them."""
    z, y, soft = batch(n=6, k=4, scale=1.5)
    for target in (y, soft):
        loss = losses.create(name)
        if name.endswith("-gra"):
            logp = torch.log_softmax(z, 1)
            frozen = loss.weights(logp.exp(), logp, soft_targets(z, target))
            loss.weights = lambda p, logp, t, u=frozen: u
        x = z.clone().requires_grad_(True)
        assert torch.autograd.gradcheck(lambda x, loss=loss, t=target: loss(x, t), (x,))


@pytest.mark.parametrize("name", ALL)
def test_labels_equal_one_hot_targets_and_reductions_agree(name):
    z, y, _ = batch()
    loss = losses.create(name, reduction="none")
    per = loss(z, y)
    assert per.shape == (12,)
    assert torch.allclose(per, loss(z, F.one_hot(y, 5).double()), rtol=1e-13, atol=1e-15)
    assert float(losses.create(name, reduction="sum")(z, y)) == pytest.approx(float(per.sum()))
    assert float(losses.create(name)(z, y)) == pytest.approx(float(per.mean()))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_no_nan_or_inf_gradient_at_saturated_probabilities(name, dtype):
    z = torch.tensor([[1000.0, 0.0, -5.0], [-1000.0, 3.0, 0.0], [40.0, 0.0, 0.0]], dtype=dtype)
    y = torch.tensor([0, 0, 0])  # p_y = 1 exactly, p_y -> 0, p_y within 1e-17 of 1
    for spec in (
        {name, f"{name}:gamma=0.5"} if "gamma" in losses.REGISTRY.parameters(name) else {name}
    ):
        x = z.clone().requires_grad_(True)
        value = losses.create(spec)(x, y)
        value.backward()
        assert torch.isfinite(value) and torch.isfinite(x.grad).all(), spec


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: losses.create("focal:gamma=-1"), "gamma: expected a number in [0, 100], got -1"),
        (lambda: losses.create("bsce:norm=0.5"), "norm: expected a number in [1, 100], got 0.5"),
        (
            lambda: losses.create("label-smoothing:epsilon=2"),
            "epsilon: expected a number in [0, 1]",
        ),
        (lambda: losses.create("ce", reduction="avg"), "reduction"),
        (lambda: losses.create("focal:alpha=1"), "has no parameter 'alpha'; valid: gamma"),
        (lambda: losses.create("focus"), "unknown loss 'focus'; did you mean focal"),
        (lambda: losses.create("ce")(torch.zeros(3, 4), torch.tensor([0, 1, 4])), "[0, 3]"),
        (lambda: losses.create("ce")(torch.zeros(3, 4), torch.tensor([0, 1])), "shape (3,)"),
        (lambda: losses.create("ce")(torch.zeros(2, 3), torch.full((2, 3), 0.5)), "sum to 1"),
        (lambda: losses.create("ce")(torch.zeros(3), torch.tensor([0, 1, 2])), "shape (N, K)"),
    ],
)
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises(ValueError, match=None) as err:
        call()
    assert message in str(err.value)
