"""A streaming, mergeable calibration meter that reduces across ``torch.distributed`` ranks.

State: the equal-width top-label bin sums (count, Σ confidence, Σ correct; O(bins)), the
classwise bin sums (O(bins × classes)) and running sums of correctness, NLL, Brier and
entropy. Those are all the equal-width metrics need, so with ``keep_samples=False`` the
memory does not grow with N. The rank- and quantile-based metrics (AECE, refinement
AUROC, KS error, smooth ECE) need every sample's confidence and correctness, kept when
``keep_samples=True`` (the default): two numbers per sample. Optimal ECE needs the full
logits and is not streamed; use :func:`calibkit.metrics.optimal_ece` on them.

Results equal the one-shot functions on the concatenated data: the rank-based ones bit
for bit, the binned ones up to float64 summation order (relative 1e-12), because a
batch's bin sums are added to the running ones instead of being summed in one go.

>>> import torch
>>> from calibkit.metrics import CalibrationMeter, ece
>>> g = torch.Generator().manual_seed(0)
>>> z, y = torch.randn(1000, 5, generator=g), torch.randint(5, (1000,), generator=g)
>>> m = CalibrationMeter()
>>> for zb, yb in zip(z.split(300), y.split(300)):
...     _ = m.update(zb, yb)
>>> abs(m.compute()["ece"] - ece(z, y)) < 1e-12
True
"""

from __future__ import annotations

from typing import Annotated, Any

import torch
from torch import Tensor

from .._docs import documented
from .._metric_settings import METRIC_PARAMETERS, Binary, Binning, MetricBins, Probs
from .._settings import Bounds, Setting, checks_declared
from . import _stats as st
from ._binning import BinScheme
from ._bins import Bins, bins_of
from ._evaluate import METRICS
from ._inputs import Runs, prepare
from ._smooth import smooth_ece_batch
from ._table import COMPUTED, Memo

NClasses = Annotated[
    int | None,
    Setting("K, the number of classes; None: from the first batch", Bounds(2, 2**31, integer=True)),
]
KeepSamples = Annotated[
    bool,
    Setting(
        "Keep each sample's confidence and outcome, which the rank-based metrics (AECE, KS, "
        "smooth ECE, AUROC, AURC) need; False keeps only bin and running sums (memory "
        "independent of N)"
    ),
]

_SCALARS = ("correct", "nll", "brier", "entropy")


class _MeterStatistics(Memo):
    """:class:`~calibkit.metrics._table.Statistics` of a meter's running sums (B = 1) and,
    with ``keep_samples``, of its kept samples."""

    def __init__(self, meter: CalibrationMeter) -> None:
        super().__init__()
        self.meter, self.n, self.n_bins = meter, meter.n, meter.n_bins

    def sums(self) -> Tensor:
        return self.meter.top[None]

    def mean(self, per_sample: str) -> Tensor:
        return (self.meter.scalars[_SCALARS.index(per_sample)] / self.n).reshape(1)

    def classwise(self) -> tuple[Tensor, BinScheme]:
        return self.meter.classwise[None], self.meter._scheme()

    def _kept(self) -> tuple[Tensor, ...]:
        return self._once("kept", self.meter._concat_samples)

    def runs(self) -> tuple[Runs, Tensor, Tensor]:
        def make() -> tuple[Runs, Tensor, Tensor]:
            runs = Runs.from_values(*self._kept()[:2])
            return runs, runs.sizes[None], runs.positives[None]

        return self._once("runs", make)

    def correct_runs(self) -> tuple[Tensor, Tensor]:
        if self.meter.binary == "top-label":
            return self.runs()[1:]

        def make() -> tuple[Tensor, Tensor]:
            runs = Runs.from_values(*self._kept()[2:])
            return runs.sizes[None], runs.positives[None]

        return self._once("correct", make)

    def smooth(self) -> Tensor:
        conf, outcome, _, _ = self._kept()
        return smooth_ece_batch(conf, outcome)[0]


class CalibrationMeter:
    """Accumulate calibration statistics over batches; see the module docstring.

    Examples
    --------
    >>> import torch
    >>> from calibkit.metrics import CalibrationMeter, ece
    >>> logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.2, 2.5], [1.0, 0.8, 0.0]])
    >>> labels = torch.tensor([0, 1, 2, 1])
    >>> meter = CalibrationMeter()
    >>> for z, y in zip(logits.split(2), labels.split(2)):
    ...     _ = meter.update(z, y)  # returns the meter
    >>> result = meter.compute()  # sync() first under torch.distributed
    >>> round(result["ece"], 4) == round(ece(logits, labels), 4)
    True
    """

    @documented(METRIC_PARAMETERS, "None: the meter is ready for :meth:`update`.")
    @checks_declared
    def __init__(
        self,
        n_classes: NClasses = None,
        *,
        n_bins: MetricBins = 15,
        binning: Binning = "calibkit",
        probs: Probs = None,
        binary: Binary = "top-label",
        keep_samples: KeepSamples = True,
    ) -> None:
        """A meter with no sample yet; each setting is checked here."""
        self.n_bins, self.binning, self.probs = n_bins, binning, probs
        self.binary = binary
        self.keep_samples = keep_samples
        self._init_classes = n_classes
        self.reset()

    def reset(self) -> None:
        """Forget every sample seen."""
        self.n_classes = self._init_classes
        self.n = 0
        self.dtype: torch.dtype | None = None
        self.top: Tensor | None = None
        self.classwise: Tensor | None = None
        self.scalars = torch.zeros(len(_SCALARS), dtype=torch.float64)
        self._samples: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []

    # ----------------------------------------------------------------- accumulation

    def _scheme(self) -> BinScheme:
        return BinScheme(self.n_bins, self.binning, self.dtype or torch.float32)

    def _ensure_state(self, k: int, dtype: torch.dtype, device: torch.device) -> None:
        if self.n_classes is not None and k != self.n_classes:
            raise ValueError(
                f"scores: this meter holds {self.n_classes} classes, the batch has {k}"
            )
        if self.dtype is not None and dtype != self.dtype:
            raise TypeError(
                f"scores: this meter started with {self.dtype} scores, the batch is {dtype}; "
                "bin edges depend on the dtype, so keep one dtype per meter"
            )
        self.n_classes, self.dtype = k, dtype
        s = self._scheme().n_slots
        if self.top is None:
            self.top = torch.zeros(3, s, dtype=torch.float64, device=device)
            self.classwise = torch.zeros(3, k, s, dtype=torch.float64, device=device)
            self.scalars = self.scalars.to(device)

    @documented(METRIC_PARAMETERS, "CalibrationMeter: this meter.")
    def update(self, scores: Any, labels: Any) -> CalibrationMeter:
        """Add a batch: ``scores`` (B, K) logits (probabilities if ``probs``), ``labels`` (B,)."""
        p = prepare.trusting(scores, labels, probs=self.probs, binary=self.binary)
        p.scan(full=True)  # the NaN/inf check of logits is in the scan: before the meter changes
        self._ensure_state(p.k, p.dtype, p.device)
        scheme = self._scheme()
        self.top += st.topbin_sums(p, scheme)[0]
        self.classwise += st.classwise_sums(p, scheme)[0]
        per_sample = (p.correct.double(), -p.label_logp, p.brier_per_sample, p.entropy_per_sample)
        self.scalars += torch.stack([v.sum() for v in per_sample])
        self.n += p.n
        if self.keep_samples:
            conf, outcome = p.cal_pair
            self._samples.append((conf, outcome, p.confidence.double(), p.correct))
        return self

    @documented(
        {},
        "CalibrationMeter: this meter.",
        other=("CalibrationMeter", "A meter of the same settings."),
    )
    def merge(self, other: CalibrationMeter) -> CalibrationMeter:
        """Add another meter's samples to this one (same settings) and return self."""
        mine = (self.n_bins, self.binning, self.probs, self.binary, self.keep_samples)
        theirs = (other.n_bins, other.binning, other.probs, other.binary, other.keep_samples)
        if mine != theirs:
            raise ValueError(f"merge: meters differ in settings {mine} vs {theirs}")
        if other.n == 0:
            return self
        self._ensure_state(other.n_classes, other.dtype, other.top.device)
        self.top += other.top
        self.classwise += other.classwise
        self.scalars += other.scalars
        self.n += other.n
        self._samples.extend(other._samples)
        return self

    def settings(self) -> dict[str, Any]:
        """What the meter was made with (``CalibrationMeter(**settings)`` makes its twin)."""
        return {
            "n_classes": self._init_classes,
            "n_bins": self.n_bins,
            "binning": self.binning,
            "probs": self.probs,
            "binary": self.binary,
            "keep_samples": self.keep_samples,
        }

    def __call__(self, scores: Any, labels: Any) -> dict[str, float]:
        """Add a batch, as :meth:`update`, and return the metrics of that batch alone (as a
        torchmetrics ``Metric``'s ``forward`` does); :meth:`compute` gives every batch's."""
        batch = CalibrationMeter(**self.settings()).update(scores, labels)
        self.merge(batch)
        return batch.compute()

    def state_dict(self) -> dict[str, Any]:
        """The meter's state as plain values and tensors (``torch.save`` it; it loads with
        ``weights_only=True``); :meth:`load_state_dict` restores it."""
        conf, outcome, top_conf, correct = self._concat_samples()
        return {
            "settings": self.settings(),
            "n_classes": self.n_classes,
            "n": self.n,
            "dtype": None if self.dtype is None else str(self.dtype).removeprefix("torch."),
            "top": self.top,
            "classwise": self.classwise,
            "scalars": self.scalars,
            "samples": [conf, outcome, top_conf, correct] if self.keep_samples else [],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output, all or nothing: a state of other settings,
        shapes or types is refused in one line and the meter is left as it was."""
        if not isinstance(state, dict) or state.get("settings") != self.settings():
            raise ValueError(
                "load_state_dict: the state is not of a meter with these settings "
                f"({self.settings()})"
            )
        twin = CalibrationMeter(**self.settings())
        try:
            n, k = int(state["n"]), state["n_classes"]
            if n:
                twin._ensure_state(k, getattr(torch, state["dtype"]), state["top"].device)
                for name in ("top", "classwise", "scalars"):
                    value = state[name]
                    if getattr(twin, name).shape != value.shape:
                        raise ValueError(f"{name} has shape {tuple(value.shape)}")
                    setattr(twin, name, value.to(torch.float64).clone())
                if self.keep_samples:
                    conf, outcome, top_conf, correct = state["samples"]
                    if not len(conf) == len(outcome) == len(top_conf) == len(correct) == n:
                        raise ValueError(f"the kept samples are not {n} long")
                    twin._samples = [(conf, outcome.bool(), top_conf, correct.bool())]
            twin.n = n
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(f"load_state_dict: not a meter's state ({err})") from None
        self.__dict__.update(twin.__dict__)

    # ----------------------------------------------------------------- distributed

    @documented(
        {},
        "CalibrationMeter: this meter, holding every rank's samples.",
        group=(
            "ProcessGroup or None, default None",
            "The torch.distributed group; None: the default one.",
        ),
    )
    def sync(self, group: Any = None) -> CalibrationMeter:
        """Reduce the state over all ranks of ``group`` so that every rank holds the total.

        Bin and running sums are all-reduced (a sum); kept samples are all-gathered in rank
        order. Every rank must call it, and must know the number of classes (from a batch
        or from ``n_classes``). Outside ``torch.distributed`` (one process) there is nothing
        to reduce: the meter already holds the total and ``sync`` returns it unchanged, as
        torchmetrics does.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return self
        if self.n_classes is None:
            raise ValueError(
                "sync: this rank has seen no batch; pass n_classes to CalibrationMeter"
            )
        if self.top is None:
            self._ensure_state(self.n_classes, self.dtype or torch.float32, torch.device("cpu"))
        flat = torch.cat(
            [
                torch.tensor([float(self.n)], dtype=torch.float64, device=self.top.device),
                self.top.reshape(-1),
                self.classwise.reshape(-1),
                self.scalars,
            ]
        )
        dist.all_reduce(flat, group=group)
        sizes = [1, self.top.numel(), self.classwise.numel(), len(_SCALARS)]
        n, top, cw, sc = flat.split(sizes)
        self.n = int(n.item())
        self.top, self.classwise, self.scalars = (
            top.view_as(self.top),
            cw.view_as(self.classwise),
            sc,
        )
        if self.keep_samples:
            self._samples = [_all_gather_samples(self._concat_samples(), group)]
        return self

    # ----------------------------------------------------------------- results

    def _concat_samples(self) -> tuple[Tensor, ...]:
        if not self._samples:
            empty = torch.zeros(0, dtype=torch.float64)
            return (empty, empty.bool(), empty, empty.bool())
        return tuple(torch.cat(parts) for parts in zip(*self._samples, strict=True))

    @documented({}, "dict: each metric's value by name (fractions; nats for NLL and entropy).")
    def compute(self) -> dict[str, float]:
        """Every metric of :func:`evaluate` except optimal ECE (rank-based ones need samples)."""
        if self.n == 0:
            raise ValueError("compute: the meter is empty; call update() with at least one batch")
        stats = _MeterStatistics(self)
        out = {
            m.name: float(m.compute(stats)[0])
            for m in COMPUTED
            if self.keep_samples or not m.samples
        }
        return {m: out[m] for m in METRICS if m in out}

    def bins(self) -> Bins:
        """Per-bin count, accuracy and confidence of the equal-width top-label bins, for
        :func:`calibkit.plots.draw_reliability`."""
        if self.n == 0:
            raise ValueError("bins: the meter is empty; call update() with at least one batch")
        return bins_of(self.top[None], self._scheme())

    def state_nbytes(self) -> int:
        """Bytes held by the state (bin sums, running sums, kept samples)."""
        tensors = [self.scalars] + ([self.top, self.classwise] if self.top is not None else [])
        tensors += [t for s in self._samples for t in s]
        return sum(t.numel() * t.element_size() for t in tensors)


def _all_gather_samples(local: tuple[Tensor, ...], group: Any) -> tuple[Tensor, ...]:
    import torch.distributed as dist

    world = dist.get_world_size(group)
    dev = local[0].device
    size = torch.tensor([len(local[0])], dtype=torch.int64, device=dev)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    longest = int(max(s.item() for s in sizes))
    out = []
    for t in local:
        buf = torch.zeros(longest, dtype=torch.float64, device=dev)
        buf[: len(t)] = t.double()
        parts = [torch.empty_like(buf) for _ in range(world)]
        dist.all_gather(parts, buf, group=group)
        merged = torch.cat([part[: int(s.item())] for part, s in zip(parts, sizes, strict=True)])
        out.append(merged.bool() if t.dtype == torch.bool else merged)
    return tuple(out)
