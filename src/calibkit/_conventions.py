"""The names of the choices a user makes about how a metric is computed: the binning
conventions (:mod:`calibkit.metrics._binning`) and the bootstrap interval methods
(:mod:`calibkit.metrics._intervals`). A module of names alone, so that the CLI offers them
in its options without importing PyTorch."""

from __future__ import annotations

#: equal-width binning conventions (docs/metrics.md, "Equal-width bins: three conventions")
BINNINGS = ("calibkit", "torchmetrics", "netcal", "kull")
#: bootstrap interval methods; "auto" gives each metric its own (docs/metrics.md)
INTERVALS = ("auto", "percentile", "basic", "bca", "two-pivot")
