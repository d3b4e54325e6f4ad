"""The registry of calibration methods: every method under its name and the names people
know it by, and what goes through the registry: ``names``, ``create`` and ``load`` (a file
names its method; the registry builds it)."""

from __future__ import annotations

from .._docs import documented
from .._registry import Registry, Spec
from ..io import FileFormatError
from . import _affine as affine
from . import _binning as binning
from . import _clamping as clamping
from . import _maccal as maccal
from . import _temperature as temperature
from ._base import POSTHOC_PARAMETERS, FitReport, Method
from ._files import check_meta, first_line, loaded_problem, read_checked

REGISTRY: Registry[Method] = Registry("calibrator")
for _cls in (  # by module
    temperature.TemperatureScaling,
    temperature.TemperatureGrid,
    temperature.EnsembleTemperatureScaling,
    affine.VectorScaling,
    affine.MatrixScaling,
    affine.MatrixScalingODIR,
    affine.DirichletL2,
    affine.DirichletODIR,
    binning.HistogramBinning,
    binning.IsotonicCalibration,
    binning.BetaCalibration,
    binning.PlattScaling,
    binning.ScalingBinning,
    clamping.NeuralClamping,
    maccal.MacCal,
):
    REGISTRY.register(_cls.name)(_cls)
#: the names other libraries and papers use (docs/posthoc.md): "dirichlet" is Dir-ODIR, the
#: regulariser Kull et al. 2019 recommend; scikit-learn's "sigmoid" is Platt scaling
for _name, *_others in (
    ("ts", "temperature", "temperature-scaling", "TemperatureScaling"),
    ("ts-grid", "temperature-grid"),
    ("ets", "ensemble-temperature-scaling", "mix-n-match"),
    ("vector", "vector-scaling", "VectorScaling"),
    ("matrix", "matrix-scaling", "MatrixScaling"),
    ("dir-odir", "dirichlet", "dirichlet-calibration", "DirichletCalibration"),
    ("hist-binning", "histogram", "histogram-binning", "HistogramBinning"),
    ("isotonic", "isotonic-regression", "IsotonicRegression"),
    ("beta", "beta-calibration", "BetaCalibration"),
    ("platt", "sigmoid", "platt-scaling", "PlattScaling", "logistic-calibration"),
    ("neural-clamping", "NeuralClamping"),
    ("maccal", "mac-cal-stage-2"),
):
    REGISTRY.alias(_name, *_others)


@documented(POSTHOC_PARAMETERS, "list of str: the names, sorted.")
def names(level: str | None = None) -> list[str]:
    """Names of every registered calibration method (``level``: only ``"logits"`` or
    ``"model"`` ones).

    Examples
    --------
    >>> from calibkit import posthoc
    >>> posthoc.names("model")
    ['maccal', 'neural-clamping']
    >>> "ts" in posthoc.names("logits") and "dir-odir" in posthoc.names()
    True
    """
    return [n for n in REGISTRY.names() if level in (None, REGISTRY.factory(n).level)]


@documented(POSTHOC_PARAMETERS, "Method: the method, unfitted.")
def create(spec: str | Spec, **overrides) -> Method:
    """A method from a spec such as ``"ts"`` or ``"dir-odir:folds=5,average_folds=true"``.
    Its settings are checked once, here or where the spec was checked, and the method
    trusts that result (:meth:`Method.trust_settings`).

    Examples
    --------
    >>> from calibkit import posthoc
    >>> posthoc.create("hist-binning:n_bins=10")
    HistogramBinning(n_bins=10, strategy='uniform', mode='top-label', empty='keep', not fitted)
    >>> posthoc.create("ts", t_max=50.0)  # overrides as keywords, checked the same way
    TemperatureScaling(t_min=0.01, t_max=50.0, tol=1e-12, max_iter=100, not fitted)
    >>> posthoc.create("ts:t_max=-1")
    Traceback (most recent call last):
    ...
    calibkit._registry.SpecError: calibrator 'ts': t_max: expected a number in (0, 1e6], got -1
    """
    checked = REGISTRY.check(spec, **overrides)
    method = REGISTRY.create(checked)
    if checked.settings is not None:
        method.trust_settings(checked.settings)
    return method


@documented(POSTHOC_PARAMETERS, "Method: the fitted method, ready to apply.")
def load(path, model=None) -> Method:
    """Read a file written by ``save``; refuses corrupted or altered files. A model-level
    method needs the ``model`` it was fitted on.

    Examples
    --------
    >>> from calibkit import posthoc
    >>> from calibkit.data import demo_logits
    >>> d = demo_logits()
    >>> cal = posthoc.create("vector").fit(d["logits_val"], d["labels_val"])
    >>> path = cal.save(getfixture("tmp_path") / "vector.calib")
    >>> again = posthoc.load(path)  # safetensors and JSON: never pickle
    >>> bool((again(d["logits_test"]) == cal(d["logits_test"])).all())
    True
    """
    meta, tensors = read_checked(path, "calibrator")
    check_meta(path, meta)
    if meta["method"] not in REGISTRY:
        raise FileFormatError(f"{path}: unknown calibrator {meta['method']!r}")
    try:
        obj = create(meta["method"], **meta["settings"])  # checked once, then trusted
    except (TypeError, ValueError) as err:
        raise FileFormatError(f"{path}: invalid settings ({first_line(err)})") from None
    if obj.level == "model":
        if model is None:
            raise ValueError(f"{path}: a {obj.name} file needs the model it calibrates")
        obj.model_ = model
        device = next(model.parameters()).device
        tensors = {k: v.to(device) for k, v in tensors.items()}
    if meta["n_classes"] is not None:
        obj.n_classes_ = meta["n_classes"]
    try:
        obj._load(tensors, meta["learned"])
        obj.fit_report_ = FitReport(**meta["fit_report"])
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise FileFormatError(
            f"{path}: the {obj.name} file's values do not fit the method ({first_line(err)})"
        ) from None
    problem = loaded_problem(obj, tensors)
    if problem:
        raise FileFormatError(f"{path}: {problem}; the file was altered or damaged")
    return obj
