"""The scikit-learn adapters with the real library on its bundled digits: estimator
contract (clone, get_params/set_params, pickle), Pipeline and GridSearchCV over a method's
own settings, calibrating a fitted classifier, and scorers, each checked against the
numbers computed without scikit-learn's machinery."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from calibkit import metrics, posthoc
from calibkit.adapters.sklearn import CalibratedClassifier, estimator, scorer


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    tr, cal, te = idx[:900], idx[900:1350], idx[1350:]
    clf = LogisticRegression(max_iter=2000, C=10.0).fit(x[tr], y[tr])
    return x, y, tr, cal, te, clf


@pytest.mark.parametrize("name", posthoc.names("logits"))
def test_every_logits_method_keeps_the_estimator_contract(name):
    cls = estimator(name)
    est = cls()
    params = est.get_params()
    assert params == posthoc.REGISTRY.factory(name)().settings()
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    assert pickle.loads(pickle.dumps(est)).get_params() == params
    with pytest.raises(TypeError, match="has no parameter 'nope'"):
        cls(nope=1)


def test_grid_search_over_odir_settings_scores_what_a_manual_loop_scores(digits):
    x, y, _, cal, _, clf = digits
    z, yc = clf.decision_function(x[cal]), y[cal]
    grid = {"lambdas": [[0.01], [100.0]], "mus": [[0.01]], "folds": [2]}
    cv = KFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(estimator("dir-odir")(), grid, scoring="neg_log_loss", cv=cv).fit(z, yc)
    for i, lam in enumerate(grid["lambdas"]):
        manual = []
        for a, b in cv.split(z):
            m = posthoc.create("dir-odir", lambdas=lam, mus=[0.01], folds=2).fit(z[a], yc[a])
            p = m.predict_proba(torch.as_tensor(z[b])).numpy()
            manual.append(-log_loss(yc[b], p, labels=np.arange(10)))
        assert search.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(manual), abs=1e-9)
    assert search.best_estimator_.calibrator_.fitted


def test_last_step_of_a_pipeline(digits):
    x, y, _, cal, te, clf = digits
    pipe = Pipeline(
        [("logits", FunctionTransformer(clf.decision_function)), ("ts", estimator("ts")())]
    )
    pipe.fit(x[cal], y[cal])
    direct = posthoc.create("ts").fit(clf.decision_function(x[cal]), y[cal])
    want = direct.predict_proba(torch.as_tensor(clf.decision_function(x[te]))).numpy()
    assert np.allclose(pipe.predict_proba(x[te]), want, atol=1e-12)
    assert (pipe.predict(x[te]) == clf.predict(x[te])).all()  # TS keeps the argmax


def test_calibrating_a_fitted_overconfident_classifier(digits):
    x, y, tr, cal, te, _ = digits
    nb = GaussianNB().fit(x[tr], y[tr])
    before = log_loss(y[te], np.clip(nb.predict_proba(x[te]), 1e-15, 1), labels=nb.classes_)
    cc = CalibratedClassifier(nb, method="ts", cv="prefit").fit(x[cal], y[cal])
    after = log_loss(y[te], cc.predict_proba(x[te]), labels=nb.classes_)
    assert after < 0.5 * before  # naive Bayes is badly over-confident on digits
    assert cc.calibrator_.temperature_ > 1
    assert (cc.predict(x[te]) == nb.predict(x[te])).mean() > 0.99  # TS keeps the argmax
    lr_fit = LogisticRegression(max_iter=5000).fit(x[tr], y[tr] % 2)
    lr_cc = CalibratedClassifier(lr_fit, "ts", cv="prefit")
    lr_cc.fit(x[cal], y[cal] % 2)  # binary: a 1-D decision_function becomes logits [0, d]
    assert lr_cc.predict_proba(x[te]).shape == (len(te), 2)
    with pytest.raises(ValueError, match="label 10 is not one of the estimator's classes"):
        CalibratedClassifier(nb, cv="prefit").fit(x[cal][:5], np.full(5, 10))


@pytest.mark.parametrize("ensemble", [True, False])
def test_cross_validated_mode_equals_calibrated_classifier_cv(digits, ensemble):
    """Issue 30.4: cv=5 as CalibratedClassifierCV(cv=5): the same folds, clones and fits;
    calibkit's ts is scikit-learn's method="temperature" (to 1e-6 here, 6e-9 measured)."""
    from sklearn.calibration import CalibratedClassifierCV

    x, y, tr, cal, te, _ = digits
    rows = np.concatenate([tr, cal])
    lr = LogisticRegression(max_iter=2000, C=10.0)
    ours = CalibratedClassifier(lr, "ts", cv=5, ensemble=ensemble).fit(x[rows], y[rows])
    theirs = CalibratedClassifierCV(lr, method="temperature", cv=5, ensemble=ensemble)
    theirs.fit(x[rows], y[rows])
    assert len(ours.pairs_) == (5 if ensemble else 1)
    assert np.abs(ours.predict_proba(x[te]) - theirs.predict_proba(x[te])).max() < 1e-6
    assert (ours.predict(x[te]) == theirs.predict(x[te])).all()
    assert lr.__dict__.get("coef_") is None  # the estimator given is cloned, never fitted
    # both rows of class 9 last: KFold(2) holds them out together in its second fold, whose
    # training rows lack class 9: it gets p = 0 there, scikit-learn's rule for sigmoid and
    # isotonic (its method="temperature" fails on such a fold with a broadcasting error)
    few = np.concatenate([rows[y[rows] != 9], rows[y[rows] == 9][:2]])
    lacking = CalibratedClassifier(lr, "ts", cv=KFold(2)).fit(x[few], y[few])
    second = lacking.calibrated_classifiers_[1].predict_proba(x[te])
    assert (second[:, 9] == 0).all() and np.allclose(second.sum(1), 1)
    assert (lacking.calibrated_classifiers_[0].predict_proba(x[te])[:, 9] > 0).all()
    with pytest.raises(
        ValueError,
        match="Requesting 2-fold cross-validation, but at least one class has fewer than 2 rows",
    ):
        CalibratedClassifier(lr, "ts", cv=KFold(2)).fit(x[few[:-1]], y[few[:-1]])


def test_scorers_equal_the_metrics_and_follow_the_neg_convention(digits):
    x, y, tr, _, te, clf = digits
    s = scorer("ece", n_bins=10)
    assert s.__name__ == "neg_ece"
    want = metrics.ece(clf.predict_proba(x[te]), y[te], probs=True, n_bins=10)
    assert s(clf, x[te], y[te]) == pytest.approx(-want, abs=1e-15)
    assert scorer("refinement_auroc")(clf, x[te], y[te]) > 0
    scores = cross_val_score(LogisticRegression(max_iter=2000), x[tr], y[tr], cv=3, scoring=s)
    assert len(scores) == 3 and (scores <= 0).all()
    with pytest.raises(ValueError, match="has no function 'eec'"):
        scorer("eec")


def test_the_classifier_api_scikit_learn_users_expect():
    """Issue 42 §3: a default estimator (scikit-learn's LinearSVC, 5 folds),
    calibrated_classifiers_, predict_log_proba, decision_function, and warnings at the
    caller's line."""
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    from calibkit.adapters.sklearn import CalibratedClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    model = CalibratedClassifier().fit(X[:1200], y[:1200])
    assert len(model.calibrated_classifiers_) == 5
    assert type(model.calibrated_classifiers_[0].estimator).__name__ == "LinearSVC"
    p = model.predict_proba(X[1200:])
    np.testing.assert_allclose(model.predict_log_proba(X[1200:]), np.log(p))
    scores = model.decision_function(X[1200:])
    assert (model.classes_[scores.argmax(1)] == model.predict(X[1200:])).all()
    clf = LogisticRegression(max_iter=50).fit(X[:300], y[:300])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        CalibratedClassifier(clf, method="matrix", cv="prefit").fit(X[300:400], y[300:400])
    mine = [w for w in said if "parameters from" in str(w.message)]
    assert mine and all(w.filename == __file__ for w in mine), [w.filename for w in said]
