"""The peers' own conventions reproduced (issue 54 §5): netcal's ACE, TorchUncertainty's
smooth ECE (logit kernel) and its AURC and AUGRC areas, each against the installed peer,
and the new definitions (ACE, AUGRC) against hand-worked cases and brute force."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
import torch

from calibkit import metrics as M
from tests.conftest import make_logits, shared
from tests.peers import torch_uncertainty


def _tu(module: str):
    found = torch_uncertainty(module)
    if found is None:
        message = "torch-uncertainty not installed (pip install --no-deps torch-uncertainty)"
        if os.environ.get("CI"):
            pytest.fail(message + "; the README's test command installs it")
        pytest.skip(message)
    return found


def _real(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    with np.load(shared("logits", "zoo", name)) as d:
        return torch.from_numpy(d["logits"]), torch.from_numpy(d["labels"]).long()


def test_ace_by_hand():
    """Two bins with one and three samples: ACE is their plain mean, ECE weighs them."""
    p = torch.tensor([[0.95, 0.05], [0.65, 0.35], [0.62, 0.38], [0.7, 0.3]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    # bin (0.6, 0.7]: conf mean 0.6567, accuracy 1/3; bin (0.9, 1]: conf 0.95, accuracy 1
    low = abs((0.65 + 0.62 + 0.7) / 3 - 1 / 3)
    assert M.ace(p, y, probs=True, n_bins=10) == pytest.approx((low + 0.05) / 2, abs=1e-12)
    assert M.ece(p, y, probs=True, n_bins=10) == pytest.approx((3 * low + 0.05) / 4, abs=1e-12)


@pytest.mark.parametrize("n_bins", [5, 10, 15])
@pytest.mark.parametrize("name", ["cifar10_resnet20.npz", "cifar100_resnet56.npz"])
def test_ace_equals_netcal(name, n_bins):
    from netcal.metrics import ACE

    z, y = _real(name)
    p = torch.softmax(z.double(), 1)
    ours = M.ace(p, y, probs=True, n_bins=n_bins, binning="netcal")
    assert ours == pytest.approx(ACE(bins=n_bins).measure(p.numpy(), y.numpy()), abs=1e-12)


def _augrc_brute(conf: np.ndarray, wrong: np.ndarray) -> float:
    """Traub et al.'s AUGRC averaged over every order of tied confidences, by enumeration."""
    n, total, orders = len(conf), 0.0, 0
    groups = [np.flatnonzero(conf == c) for c in sorted(set(conf), reverse=True)]
    for perm in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = np.concatenate(perm)
        accepted_wrong = np.cumsum(wrong[order]) / n  # share of all samples: accepted and wrong
        total += accepted_wrong.mean()
        orders += 1
    return total / orders


def _tu_formula(conf: np.ndarray, wrong: np.ndarray, generalized: bool) -> float:
    """TorchUncertainty's trapezoid rule, written again, averaged over every tie order."""
    n, total, orders = len(conf), 0.0, 0
    groups = [np.flatnonzero(conf == c) for c in sorted(set(conf), reverse=True)]
    cov = np.arange(1, n + 1) / n
    for perm in itertools.product(*(itertools.permutations(g) for g in groups)):
        rate = np.cumsum(wrong[np.concatenate(perm)]) / np.arange(1, n + 1)
        curve = rate * cov if generalized else rate
        total += np.sum((curve[1:] + curve[:-1]) / 2 * np.diff(cov)) / (1 - 1 / n)
        orders += 1
    return total / orders


@pytest.mark.parametrize("seed", range(4))
def test_augrc_and_the_torch_uncertainty_areas_average_over_tie_orders(seed):
    rng = np.random.default_rng(seed)
    conf = rng.choice([0.5, 0.6, 0.8, 0.9], size=8)  # heavy ties: 8 samples on 4 values
    wrong = rng.integers(0, 2, 8)
    wrong[0] = 1 - wrong[1]  # neither all right nor all wrong
    # two-class probabilities whose top label is class 0, right unless ``wrong``
    p = torch.from_numpy(np.stack([conf, 1 - conf], 1))
    y = torch.from_numpy(wrong).long()
    assert M.augrc(p, y, probs=True) == pytest.approx(_augrc_brute(conf, wrong), abs=1e-12)
    for fn, gen in ((M.aurc, False), (M.augrc, True)):
        got = fn(p, y, probs=True, convention="torch-uncertainty")
        assert got == pytest.approx(_tu_formula(conf, wrong, gen), abs=1e-12)


def test_augrc_of_an_uninformative_and_a_perfect_ranking():
    """Wrong samples spread evenly give about r/2; all ranked last give r²/2 (Traub et al.)."""
    n, r = 10_000, 0.2
    wrong = np.zeros(n, dtype=int)
    wrong[:: int(1 / r)] = 1
    conf = np.linspace(0.99, 0.5, n)
    p = torch.from_numpy(np.stack([conf, 1 - conf], 1))
    spread = M.augrc(p, torch.from_numpy(wrong).long(), probs=True)
    assert spread == pytest.approx(r / 2, abs=1e-3)
    last = np.zeros(n, dtype=int)
    last[-int(r * n) :] = 1
    assert M.augrc(p, torch.from_numpy(last).long(), probs=True) == pytest.approx(
        r * r / 2, abs=1e-3
    )


@pytest.mark.parametrize("metric", ["AURC", "AUGRC"])
def test_areas_equal_torch_uncertainty_without_ties(metric):
    rc = _tu("risk_coverage")
    z, y = make_logits(1000, 7, seed=5)
    p = torch.softmax(torch.from_numpy(z), 1).float()
    assert len(torch.unique(p.max(1).values)) == len(p)  # the premise: no ties
    peer = getattr(rc, metric)()
    peer.update(p, torch.from_numpy(y))
    fn = M.aurc if metric == "AURC" else M.augrc
    ours = fn(p, torch.from_numpy(y), probs=True, convention="torch-uncertainty")
    assert ours == pytest.approx(float(peer.compute()), rel=1e-6)  # the peer sums in float32


@pytest.mark.parametrize("bandwidth", ["auto", 0.05])
@pytest.mark.parametrize(
    "name", ["cifar10_resnet20.npz", "cifar100_resnet56.npz", "fashionmnist_densenet.npz"]
)
def test_smooth_ece_equals_torch_uncertainty(name, bandwidth):
    sm = _tu("calibration.smooth_calibration_error")
    z, y = _real(name)
    p = torch.softmax(z.float(), 1)
    peer = sm.SmoothCalibrationError(bandwidth=bandwidth)
    peer.update(p, y)
    sigma = None if bandwidth == "auto" else bandwidth
    ours = M.smooth_ece(p, y, probs=True, convention="torch-uncertainty", sigma=sigma)
    assert ours == pytest.approx(float(peer.compute()), abs=1e-7)


def test_conventions_are_checked():
    p = torch.tensor([[0.7, 0.3], [0.4, 0.6]], dtype=torch.float64)
    y = torch.tensor([0, 0])
    for fn in (M.aurc, M.augrc, M.smooth_ece):
        with pytest.raises(ValueError, match="convention"):
            fn(p, y, probs=True, convention="torchuncertainty")


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("name", ["cifar10_resnet20.npz", "cifar100_resnet56.npz"])
def test_adaptive_calibration_error_equals_torch_uncertainty(name, norm):
    """Issue 66 §2: the adaptive RMS and MCE beside the adaptive ECE, TorchUncertainty's
    ``AdaptiveCalibrationError(norm=...)`` under its convention (``tensor_split`` bins)."""
    ace = _tu("calibration.adaptive_calibration_error")
    z, y = _real(name)
    p = torch.softmax(z.double(), 1)
    peer = ace.AdaptiveCalibrationError(
        task="multiclass", num_classes=p.shape[1], num_bins=15, norm=norm
    )
    peer.update(p, y)
    ours = M.aece(p, y, probs=True, norm=norm, convention="torch-uncertainty")
    assert ours == pytest.approx(float(peer.compute()), rel=1e-6)  # the peer is float32


def _equal_mass_direct(conf: np.ndarray, hit: np.ndarray, n_bins: int, norm: str) -> float:
    """Equal-mass bins of confidences with no ties, written again: sorted, cut at ⌊mN/M⌋."""
    order = np.argsort(conf)
    cuts = [m * len(conf) // n_bins for m in range(1, n_bins)]
    gaps, shares = [], []
    for c, h in zip(np.split(conf[order], cuts), np.split(hit[order], cuts), strict=True):
        gaps.append(abs(h.mean() - c.mean()))
        shares.append(len(c) / len(conf))
    gaps, shares = np.array(gaps), np.array(shares)
    return {
        "l1": (gaps * shares).sum(),
        "l2": np.sqrt((gaps**2 * shares).sum()),
        "max": gaps.max(),
    }[norm]


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_adaptive_norms_equal_bins_summed_directly(norm):
    z, y = make_logits(1003, 7, seed=11)
    p = torch.softmax(torch.from_numpy(z).double(), 1)
    conf, pred = p.max(1)
    assert len(torch.unique(conf)) == len(conf)  # the premise: no ties
    hit = (pred == torch.from_numpy(y)).double().numpy()
    ours = M.aece(p, y, probs=True, n_bins=15, norm=norm)
    assert ours == pytest.approx(_equal_mass_direct(conf.numpy(), hit, 15, norm), abs=1e-12)


def test_the_focal_calibration_rule_has_the_l1_norm_only():
    p = torch.tensor([[0.7, 0.3], [0.4, 0.6]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"norm='l2'.*l1 norm only"):
        M.aece(p, torch.tensor([0, 0]), probs=True, norm="l2", convention="focal-calibration")
    with pytest.raises(ValueError, match="norm"):
        M.aece(p, torch.tensor([0, 0]), probs=True, norm="l3")
