"""The cases of scikit-learn's own ``sklearn/tests/test_calibration.py`` (1.9) that apply to
a calibrated-classifier wrapper, written again for ``CalibratedClassifier`` (issue 54 §2):
the cases and their expected behaviour carry over, not their code. Each test names the
scikit-learn test it comes from. Where calibkit refuses what scikit-learn accepts, the test
checks the one-line refusal that names the difference (docs/posthoc.md, "scikit-learn").

Not carried over: ``calibration_curve`` and ``CalibrationDisplay`` (not a wrapper's),
the array-API cases, and the default-estimator,
splitter-routing and parallel cases already in ``tests/test_sklearn_conformance.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_blobs, make_classification
from sklearn.ensemble import RandomForestClassifier, VotingClassifier
from sklearn.feature_extraction import DictVectorizer
from sklearn.frozen import FrozenEstimator
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, roc_auc_score
from sklearn.model_selection import KFold, train_test_split
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.svm import LinearSVC
from sklearn.utils.validation import check_is_fitted

from calibkit.adapters.sklearn import CalibratedClassifier
from calibkit.posthoc._anomalies import CalibrationWarning

METHODS = ["sigmoid", "isotonic"]


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=200, n_features=6, random_state=42)
    return X - X.min(), y  # MultinomialNB needs X >= 0


@pytest.mark.parametrize("ensemble", [True, False])
@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("method", METHODS)
def test_calibration(data, method, dense, ensemble):
    """test_calibration: calibrating naive Bayes lowers its Brier score, on dense and sparse
    X, and relabelling the classes leaves the probabilities as they are."""
    X, y = data
    X = X if dense else sparse.csr_matrix(X)
    train, test = slice(0, 100), slice(100, 200)
    base = MultinomialNB().fit(X[train], y[train])
    before = brier_score_loss(y[test], base.predict_proba(X[test])[:, 1])
    cal = CalibratedClassifier(MultinomialNB(), method=method, cv=2, ensemble=ensemble)
    probs = cal.fit(X[train], y[train]).predict_proba(X[test])[:, 1]
    assert brier_score_loss(y[test], probs) < before
    relabelled = CalibratedClassifier(MultinomialNB(), method=method, cv=2, ensemble=ensemble)
    again = relabelled.fit(X[train], y[train] + 1).predict_proba(X[test])[:, 1]
    np.testing.assert_allclose(again, probs)


def test_calibration_cv_splitter(data):
    """test_calibration_cv_splitter: a splitter object sets the folds, one pair per fold."""
    X, y = data
    cal = CalibratedClassifier(LogisticRegression(), method="sigmoid", cv=KFold(3)).fit(X, y)
    assert len(cal.calibrated_classifiers_) == 3
    single = CalibratedClassifier(LogisticRegression(), cv=KFold(3), ensemble=False).fit(X, y)
    assert len(single.calibrated_classifiers_) == 1


def test_error_less_class_samples_than_folds():
    """test_error_less_class_samples_than_folds and test_calibration_cv_nfold: more folds
    than a class's rows is a one-line error."""
    X = np.arange(20, dtype=float).reshape(10, 2)
    y = np.array([0] * 8 + [1] * 2)
    with pytest.raises(
        ValueError,
        match="Requesting 5-fold cross-validation, but at least one class has fewer than 5 rows",
    ):
        CalibratedClassifier(LogisticRegression(), cv=5).fit(X, y)


@pytest.mark.parametrize("method", [*METHODS, "ts"])
def test_calibration_less_classes(method):
    """test_calibration_less_classes: a fold whose training rows lack a class (KFold(3) on
    sorted labels: the first lacks class 0, the third class 3) gives that class p = 0 in its
    calibrated classifier and the rest of each row as the fold calibrates it; with
    scikit-learn's own methods the probabilities are scikit-learn's (issue 66 §1: calibkit
    refused such a fold)."""
    from sklearn.tree import DecisionTreeClassifier

    X = np.random.RandomState(0).randn(12, 5)
    y = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])  # KFold(3): 0,0,0,1 | 1,1,2,2 | 2,3,3,3
    tree = DecisionTreeClassifier(random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)  # ts on 4 rows: not converged
        cal = CalibratedClassifier(tree, method=method, cv=KFold(3)).fit(X, y)
    for fold, missing in [(0, 0), (2, 3)]:
        proba = cal.calibrated_classifiers_[fold].predict_proba(X)
        assert (proba[:, missing] == 0).all() and np.allclose(proba.sum(1), 1)
        if method == "sigmoid":
            assert (np.delete(proba, missing, axis=1) > 0).all()
    if method in METHODS:
        theirs = CalibratedClassifierCV(tree, method=method, cv=KFold(3)).fit(X, y)
        np.testing.assert_allclose(cal.predict_proba(X), theirs.predict_proba(X), atol=1e-7)


@pytest.mark.parametrize("method", METHODS)
def test_sample_weight_changes_the_fit(data, method):
    """test_sample_weight: weights given to fit change the calibrated classifier."""
    X, y = data
    weights = np.where(np.arange(len(y)) % 2 == 0, 1, 3)
    plain = CalibratedClassifier(LinearSVC(random_state=0), method=method, cv=3).fit(X, y)
    weighted = CalibratedClassifier(LinearSVC(random_state=0), method=method, cv=3)
    weighted.fit(X, y, sample_weight=weights)
    diff = np.abs(plain.predict_proba(X) - weighted.predict_proba(X)).max()
    assert diff > 1e-3


@pytest.mark.parametrize("ensemble", [True, False])
@pytest.mark.parametrize("method", METHODS)
def test_calibrated_classifier_cv_double_sample_weights_equivalence(method, ensemble):
    """test_calibrated_classifier_cv_double_sample_weights_equivalence: a weight of 2 is the
    row twice (with folds that keep the pairs together)."""
    X, y = make_classification(n_samples=120, n_features=5, random_state=0)
    X_twice, y_twice = np.repeat(X, 2, axis=0), np.repeat(y, 2)
    weighted = CalibratedClassifier(
        LogisticRegression(), method=method, cv=KFold(2), ensemble=ensemble
    ).fit(X, y, sample_weight=np.full(len(y), 2))
    # the same folds over the repeated rows: KFold keeps consecutive rows together
    twice = CalibratedClassifier(
        LogisticRegression(), method=method, cv=KFold(2), ensemble=ensemble
    ).fit(X_twice, y_twice)
    np.testing.assert_allclose(weighted.predict_proba(X), twice.predict_proba(X), atol=1e-5)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_fractional_weights_weight_the_fit_as_scikit_learn_does(data, method):
    """Issue 66 §1: weights are weights, not repeated rows (20 of scikit-learn's cases failed
    on fractional weights): with a frozen estimator, the same fractional weights give
    scikit-learn's CalibratedClassifierCV's probabilities. Isotonic is compared on the
    calibration rows: between its thresholds calibkit interpolates in σ(f), scikit-learn in
    f (docs/posthoc.md), while at the rows fitted the two maps agree."""

    X, y = data
    clf = LogisticRegression().fit(X[:100], y[:100])
    weights = np.random.default_rng(0).uniform(0.1, 2.5, 100)
    ours = CalibratedClassifier(FrozenEstimator(clf), method=method)
    theirs = CalibratedClassifierCV(FrozenEstimator(clf), method=method)
    warnings.simplefilter("ignore", UserWarning)  # scikit-learn: FrozenEstimator takes none
    ours.fit(X[100:], y[100:], sample_weight=weights)
    theirs.fit(X[100:], y[100:], sample_weight=weights)
    at = X[100:] if method == "isotonic" else X
    np.testing.assert_allclose(ours.predict_proba(at), theirs.predict_proba(at), atol=1e-6)


def test_a_huge_weight_costs_nothing(data):
    """Issue 65 §4: a weight of 1e9 was expanded into 1e9 repeated rows (447 GiB asked);
    it is a weight now, and the fit equals the one with every other row's weight ~0."""
    X, y = data
    weights = np.ones(len(y))
    weights[:3] = 1e9
    model = CalibratedClassifier(LogisticRegression(), method="ts", cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)  # three rows decide T
        model.fit(X, y, sample_weight=weights)
    assert np.isfinite(model.predict_proba(X)).all()


def test_weights_that_a_method_cannot_use_are_refused_in_one_line(data):
    X, y = data
    with pytest.raises(ValueError, match=r"^sample_weight: vector cannot weight its fit; .*ts$"):
        CalibratedClassifier(LogisticRegression(), method="vector", cv=3).fit(
            X, y, sample_weight=np.where(np.arange(len(y)) % 2, 1.0, 2.0)
        )


@pytest.mark.parametrize("ensemble", [True, False])
@pytest.mark.parametrize("method", ["sigmoid", "isotonic", "ts"])
def test_calibration_multiclass(method, ensemble):
    """test_calibration_multiclass and test_calibration_prob_sum: probabilities sum to 1 over
    three classes (one-vs-rest maps normalised, or calibkit's multiclass TS), and
    calibration does not make a random forest's Brier score much worse."""
    X, y = make_blobs(n_samples=500, n_features=10, centers=3, cluster_std=10.0, random_state=7)
    train, test = slice(0, 300), slice(300, 500)
    cal = CalibratedClassifier(
        RandomForestClassifier(n_estimators=30, random_state=0), method=method, cv=3,
        ensemble=ensemble,
    )  # fmt: skip
    probs = cal.fit(X[train], y[train]).predict_proba(X[test])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    rf = RandomForestClassifier(n_estimators=30, random_state=0).fit(X[train], y[train])
    onehot = np.eye(3)[y[test]]
    before = ((rf.predict_proba(X[test]) - onehot) ** 2).sum(1).mean()
    after = ((probs - onehot) ** 2).sum(1).mean()
    assert after < before + 0.05


def test_calibration_zero_probability():
    """test_calibration_zero_probability: an estimator whose probabilities hold exact zeros
    gives finite probabilities that sum to 1, never NaN."""

    class ZeroProbabilities(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.classes_ = np.unique(y)
            return self

        def predict_proba(self, X):
            out = np.zeros((len(X), len(self.classes_)))
            out[:, 0] = 1.0
            return out

    X, y = make_blobs(n_samples=60, centers=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        probs = CalibratedClassifier(ZeroProbabilities(), cv=2).fit(X, y).predict_proba(X)
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_calibration_frozen(data, method):
    """test_calibration_frozen: a frozen estimator is calibrated as it is, never refitted,
    and cv="prefit" means the same."""
    X, y = data
    fitted = MultinomialNB().fit(X[:100], y[:100])
    frozen = CalibratedClassifier(FrozenEstimator(fitted), method=method).fit(X[100:], y[100:])
    prefit = CalibratedClassifier(fitted, method=method, cv="prefit").fit(X[100:], y[100:])
    np.testing.assert_allclose(frozen.predict_proba(X), prefit.predict_proba(X))
    assert frozen.calibrated_classifiers_[0].estimator.estimator is fitted


@pytest.mark.parametrize("method", METHODS)
def test_calibration_ensemble_false(data, method):
    """test_calibration_ensemble_false: ensemble=False fits the method on out-of-fold
    scores and the estimator once on all rows."""
    X, y = data
    cal = CalibratedClassifier(LinearSVC(random_state=0), method=method, cv=3, ensemble=False)
    cal.fit(X, y)
    (pair,) = cal.calibrated_classifiers_
    refit = LinearSVC(random_state=0).fit(X, y)
    np.testing.assert_allclose(pair.estimator.coef_, refit.coef_)


@pytest.mark.parametrize("ensemble", [True, False])
def test_calibration_nan_imputer(ensemble):
    """test_calibration_nan_imputer: X with NaN reaches a pipeline that imputes it."""
    X, y = make_classification(n_samples=50, n_features=6, random_state=0)
    X[0, 0] = np.nan
    pipe = make_pipeline(SimpleImputer(), RandomForestClassifier(n_estimators=5, random_state=0))
    cal = CalibratedClassifier(pipe, method="sigmoid", cv=2, ensemble=ensemble).fit(X, y)
    assert np.isfinite(cal.predict_proba(X)).all()


def test_calibration_dict_pipeline():
    """test_calibration_dict_pipeline: X that is not an array (a list of dicts) goes to the
    estimator untouched."""
    X = [{"state": "NY", "age": "adult"}, {"state": "TX", "age": "adult"}] * 10
    X += [{"state": "VT", "age": "child"}] * 10
    y = np.array([0, 1] * 10 + [1] * 10)
    pipe = Pipeline([("vectorise", DictVectorizer()), ("clf", LogisticRegression())])
    cal = CalibratedClassifier(pipe, method="sigmoid", cv=2).fit(X, y)
    assert cal.predict_proba(X).shape == (30, 2)
    assert not hasattr(cal, "n_features_in_")  # X has no features to count


def test_calibration_attributes(data):
    """test_calibration_attributes: classes_ and n_features_in_ as the estimator's."""
    X, y = data
    labels = np.array(["no", "yes"])[y]
    cal = CalibratedClassifier(LogisticRegression(), cv=2).fit(X, labels)
    np.testing.assert_array_equal(cal.classes_, ["no", "yes"])
    assert cal.n_features_in_ == X.shape[1]
    assert set(cal.predict(X)) <= {"no", "yes"}


def test_calibration_inconsistent_prefit_n_features_in(data):
    """test_calibration_inconsistent_prefit_n_features_in: a frozen estimator fitted on
    other features is refused."""
    X, y = data
    fitted = LogisticRegression().fit(X[:, :3], y)
    with pytest.raises(ValueError, match="features"):
        CalibratedClassifier(FrozenEstimator(fitted)).fit(X, y)


def test_calibration_votingclassifier():
    """test_calibration_votingclassifier: a soft-voting ensemble's predict_proba is used."""
    X, y = make_classification(n_samples=60, n_features=5, random_state=7)
    vote = VotingClassifier(
        [("lr", LogisticRegression()), ("rf", RandomForestClassifier(n_estimators=5))],
        voting="soft",
    )
    cal = CalibratedClassifier(vote, method="sigmoid", cv=2).fit(X, y)
    assert cal.predict_proba(X).shape == (60, 2)


def test_calibration_with_fit_params(data):
    """test_calibration_with_fit_params: fit parameters that are per sample are split with
    the folds and reach the estimator's fit."""
    X, y = data
    seen = []

    class Checking(LogisticRegression):
        def fit(self, X, y, a=None, b=None):
            seen.append((len(X), len(a), b))
            return super().fit(X, y)

    CalibratedClassifier(Checking(), cv=2).fit(X, y, a=np.ones(len(y)), b="kept")
    assert seen == [(100, 100, "kept"), (100, 100, "kept")]


def test_calibration_without_sample_weight_estimator(data):
    """test_calibration_without_sample_weight_estimator: an estimator whose fit takes no
    sample_weight still fits (the weights go to the calibrator alone), with a warning."""
    X, y = data

    class NoWeights(LogisticRegression):
        def fit(self, X, y):
            return super().fit(X, y)

    cal = CalibratedClassifier(NoWeights(), method="sigmoid", cv=2)
    with pytest.warns(UserWarning, match="takes no sample_weight"):  # as scikit-learn warns
        cal.fit(X, y, sample_weight=np.ones(len(y), dtype=int))
    assert cal.predict_proba(X).shape == (200, 2)


def test_calibrated_classifier_cv_works_with_large_confidence_scores():
    """test_calibrated_classifier_cv_works_with_large_confidence_scores: decision values of
    order 1e6 still give a sigmoid map that ranks as they do."""
    X, y = make_classification(n_samples=120, n_features=4, random_state=0)

    class Large(LogisticRegression):
        def decision_function(self, X):
            return 1e6 * super().decision_function(X)

    probs = CalibratedClassifier(Large(), method="sigmoid", cv=2).fit(X, y).predict_proba(X)
    small = CalibratedClassifier(LogisticRegression(), method="sigmoid", cv=2).fit(X, y)
    assert np.isfinite(probs).all()
    order = np.argsort(small.predict_proba(X)[:, 1])
    assert np.corrcoef(np.argsort(order), np.argsort(np.argsort(probs[:, 1])))[0, 1] > 0.99


@pytest.mark.parametrize("method", METHODS)
def test_float32_predict_proba(data, method):
    """test_float32_predict_proba: an estimator with float32 probabilities and no
    decision_function works."""
    X, y = data

    class Float32(MultinomialNB):
        def predict_proba(self, X):
            return super().predict_proba(X).astype(np.float32)

    cal = CalibratedClassifier(Float32(), method=method, cv=2).fit(X, y)
    assert np.isfinite(cal.predict_proba(X)).all()


@pytest.mark.parametrize(("method", "n_classes", "maps"), [
    ("sigmoid", 2, 1), ("sigmoid", 3, 3), ("isotonic", 3, 3), ("ts", 3, 1),
])  # fmt: skip
def test_calibrated_classifiers_answer_as_scikit_learns(method, n_classes, maps):
    """test_calibration_multiclass and test_calibration_attributes read each fold's
    ``calibrators`` (one map per class for sigmoid and isotonic, one on two classes) and
    call its ``predict_proba`` (issue 66 §1: calibkit's pairs had neither)."""
    X, y = make_blobs(n_samples=300, centers=n_classes, random_state=0, cluster_std=3.0)
    cal = CalibratedClassifier(LogisticRegression(), method=method, cv=3).fit(X, y)
    pairs = cal.calibrated_classifiers_
    assert len(pairs) == 3 and all(len(p.calibrators) == maps for p in pairs)
    folds = np.mean([p.predict_proba(X) for p in pairs], axis=0)
    np.testing.assert_allclose(folds, cal.predict_proba(X))
    assert pairs[0].predict_proba(X).shape == (300, n_classes)


@pytest.mark.parametrize("ensemble", [True, False])
@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_temperature_scaling(n_classes, ensemble):
    """test_temperature_scaling, with scikit-learn's CalibratedClassifierCV as the oracle:
    one map per pair that scikit-learn's check_is_fitted accepts, with an inverse
    temperature beta_ > 0; with ensemble=False the predicted classes and ROC AUC unchanged,
    the log-loss no worse, and the probabilities scikit-learn's. Each fold's beta_ is
    scikit-learn's where the fold has a finite optimum (beta_ < 10 there: a separable fold's
    likelihood is flat as beta_ grows, and each fit stops at its own tolerance). On two
    classes calibkit's logits are (0, f) and scikit-learn's (-f, f), so its beta_ is twice
    scikit-learn's for the same probabilities. With a frozen estimator and ensemble=True,
    the folds' maps are scikit-learn's ensemble (one calibration before, whatever ensemble
    said)."""

    X, y = make_classification(
        n_samples=1000, n_features=10, n_informative=10, n_redundant=0, n_classes=n_classes,
        n_clusters_per_class=1, class_sep=2.0, random_state=42,
    )  # fmt: skip
    X_train, X_cal, y_train, y_cal = train_test_split(X, y, random_state=42)
    clf = LogisticRegression(C=np.inf, tol=1e-8, max_iter=200, random_state=0).fit(X_train, y_train)
    made = {}
    for name, cls in (("calibkit", CalibratedClassifier), ("sklearn", CalibratedClassifierCV)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationWarning)  # a separable fold's T
            made[name] = cls(
                FrozenEstimator(clf), cv=3, method="temperature", ensemble=ensemble
            ).fit(X_cal, y_cal)
    ours, theirs = (made[k].calibrated_classifiers_ for k in ("calibkit", "sklearn"))
    assert len(ours) == len(theirs) == (3 if ensemble else 1)
    for pair in ours:
        (calibrator,) = pair.calibrators
        check_is_fitted(calibrator)
        assert calibrator.beta_ > 0
    scale = 2.0 if n_classes == 2 else 1.0
    for mine, sk in zip(ours, theirs, strict=True):
        beta = sk.calibrators[0].beta_
        if beta < 10:
            np.testing.assert_allclose(mine.calibrators[0].beta_ / scale, beta, rtol=1e-5)
    if not ensemble:
        cal = made["calibkit"]
        assert accuracy_score(y_cal, cal.predict(X_cal)) == accuracy_score(
            y_cal, clf.predict(X_cal)
        )
        before, after = clf.predict_proba(X_cal), cal.predict_proba(X_cal)
        np.testing.assert_allclose(after, made["sklearn"].predict_proba(X_cal), atol=1e-8)
        assert log_loss(y_cal, after) <= log_loss(y_cal, before)
        if n_classes == 2:
            before, after = before[:, 1], after[:, 1]
        np.testing.assert_allclose(
            roc_auc_score(y_cal, before, multi_class="ovr"),
            roc_auc_score(y_cal, after, multi_class="ovr"),
        )


def test_per_class_isotonic_on_scores_that_look_like_probabilities():
    """test_calibration_nan_imputer[True-isotonic] failed in CI at random: a fold where a
    random forest gave one class probability 1 on every row made the pairs [0, 1] that
    calibkit builds as logits, and its guard read them as probabilities. Here the estimator
    always says [0, 1]: scikit-learn's constant, the positives' share, with no error."""

    class Certain(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.classes_ = np.unique(y)
            return self

        def predict_proba(self, X):
            return np.tile([0.0, 1.0], (len(X), 1))

        def predict(self, X):
            return self.classes_[self.predict_proba(X).argmax(1)]

    X, y = np.zeros((40, 2)), np.arange(40) % 4 == 0
    frozen = FrozenEstimator(Certain().fit(X, y))
    ours = CalibratedClassifier(frozen, method="isotonic").fit(X, y).predict_proba(X)
    theirs = CalibratedClassifierCV(frozen, method="isotonic").fit(X, y).predict_proba(X)
    np.testing.assert_allclose(ours, theirs)
    np.testing.assert_allclose(ours[:, 1], 0.25)


def test_an_isotonic_decision_function_is_finite_and_scores_roc_auc():
    """Issue 66 §1: with method="isotonic" the binary decision_function held +inf (log 1 −
    log 0), so cross_val_score(..., scoring="roc_auc") was all NaN."""
    from sklearn.model_selection import cross_val_score

    X, y = make_classification(n_samples=300, random_state=0)
    cal = CalibratedClassifier(LogisticRegression(), method="isotonic", cv=3).fit(X, y)
    scores = cal.decision_function(X)
    assert np.isfinite(scores).all() and (np.abs(scores) > 600).any()  # the map's 0s and 1s
    np.testing.assert_array_equal(scores > 0, cal.predict(X) == 1)
    auc = cross_val_score(cal, X, y, cv=3, scoring="roc_auc")
    assert np.isfinite(auc).all() and auc.min() > 0.8
