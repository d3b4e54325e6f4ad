"""OOD scores beyond max-softmax (max-logit, energy, entropy), AUPR-In beside AUROC and
FPR95, and the area under the risk-coverage curve: each against scikit-learn or a
brute-force reimplementation, with ties, through the functions and through evaluate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from calibkit import metrics as M


def _data(seed=0, n=400, m=300, k=6):
    g = torch.Generator().manual_seed(seed)
    z = 3 * torch.randn(n, k, generator=g, dtype=torch.float64)
    y = torch.randint(k, (n,), generator=g)
    zo = 1.5 * torch.randn(m, k, generator=g, dtype=torch.float64) - 0.5
    return z, y, zo


def test_scores_by_hand():
    z = torch.tensor([[1.0, 2.0, -1.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(
        M.ood_score(z, score="max-logit"), torch.tensor([2.0, 0.0], dtype=torch.float64)
    )
    lse = torch.tensor(
        [math.log(math.e + math.e**2 + math.e**-1), math.log(3.0)], dtype=torch.float64
    )
    assert torch.allclose(M.ood_score(z, score="energy"), lse)
    p = torch.softmax(z, 1)
    assert torch.allclose(M.ood_score(z, score="entropy"), (p * p.log()).sum(1))
    assert torch.allclose(M.ood_score(z), p.amax(1))
    with pytest.raises(ValueError, match="score: 'energy' needs logits"):
        M.ood_score(p, score="energy", probs=True)
    with pytest.raises(ValueError, match="score"):
        M.ood_score(z, score="odin")


@pytest.mark.parametrize("score", ["msp", "max-logit", "energy", "entropy"])
def test_auroc_aupr_fpr95_match_scikit_learn(score):
    z, y, zo = _data()
    s_in = M.ood_score(z, score=score).numpy()
    s_out = M.ood_score(zo, score=score).numpy()
    # round to create ties (negative scores too: energy and entropy take the sort for signs)
    s_in, s_out = np.round(s_in, 1), np.round(s_out, 1)
    truth = np.r_[np.ones(len(s_in)), np.zeros(len(s_out))]
    both = np.r_[s_in, s_out]
    # two-column logits whose max-logit is the rounded score
    zr = torch.stack([torch.from_numpy(s_in), torch.from_numpy(s_in) - 50], 1)
    zor = torch.stack([torch.from_numpy(s_out), torch.from_numpy(s_out) - 50], 1)
    assert M.ood_auroc(zr, zor, score="max-logit") == pytest.approx(
        roc_auc_score(truth, both), abs=1e-12
    )
    assert M.ood_aupr(zr, zor, score="max-logit") == pytest.approx(
        average_precision_score(truth, both), abs=1e-12
    )
    # unrounded, through evaluate and its bootstrap
    r = M.evaluate(z, y, ood_scores=zo, ood_score=score, optimal=False, smooth=False, bootstrap=30)
    raw_in, raw_out = M.ood_score(z, score=score).numpy(), M.ood_score(zo, score=score).numpy()
    raw = np.r_[raw_in, raw_out]
    assert r["ood_auroc"] == pytest.approx(roc_auc_score(truth, raw), abs=1e-12)
    assert r["ood_aupr"] == pytest.approx(average_precision_score(truth, raw), abs=1e-12)
    assert r["ood_fpr95"] == M.ood_fpr95(z, zo, score=score)
    assert r.settings["ood_score"] == score
    lo, hi = r.intervals["ood_aupr"]
    assert lo <= r["ood_aupr"] <= hi


def _aurc_brute(conf, correct):
    """Mean over every order of the tied runs of the plain definition: risk(k) averaged."""
    conf, correct = np.asarray(conf), np.asarray(correct, dtype=float)
    values = sorted(set(conf), reverse=True)
    groups = [np.flatnonzero(conf == v) for v in values]
    total, count = 0.0, 0
    for orders in itertools.product(*[list(itertools.permutations(g)) for g in groups]):
        seq = np.concatenate([np.array(o, dtype=int) for o in orders])
        errors = np.cumsum(1 - correct[seq])
        total += np.mean(errors / np.arange(1, len(seq) + 1))
        count += 1
    return total / count


def test_aurc_by_brute_force_with_ties():
    p = torch.tensor(
        [[0.9, 0.1], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.7, 0.3], [0.7, 0.3], [0.6, 0.4]],
        dtype=torch.float64,
    )
    y = torch.tensor([0, 1, 0, 1, 0, 1, 0])
    conf, pred = p.max(1)
    want = _aurc_brute(conf.numpy(), (pred == y).numpy())
    assert M.aurc(p, y, probs=True) == pytest.approx(want, abs=1e-14)


def test_aurc_without_ties_is_the_plain_definition_and_bounded():
    z, y, _ = _data(3, n=2000)
    conf, pred = torch.softmax(z, 1).max(1)
    order = torch.argsort(conf, descending=True)
    err = (pred != y).double()[order].numpy()
    want = np.mean(np.cumsum(err) / np.arange(1, len(err) + 1))
    got = M.aurc(z, y)
    assert got == pytest.approx(want, abs=1e-12)
    assert M.evaluate(z, y, optimal=False, smooth=False)["aurc"] == got
    r = float(err.mean())
    assert r + (1 - r) * math.log(1 - r) - 1e-3 <= got  # the optimum of a perfect ranking
    # bootstrap weights: the closed form matches expanding each resample into its samples
    from calibkit.metrics import _stats as st
    from calibkit.metrics._inputs import prepare
    from calibkit.metrics._resample import resample_chunks

    prep = prepare(z, y)
    w, _ = next(resample_chunks(len(y), 3, 0, "cpu"))
    got_w = st.aurc_from_runs(*st.run_sums(prep.runs, w))
    for b in range(3):
        rep = np.repeat(np.arange(len(y)), w[b].numpy().astype(int))
        assert got_w[b] == pytest.approx(M.aurc(z[rep], y[rep]), abs=1e-10)
