"""Measuring calibration: ``evaluate`` (saved scores) and ``demo`` (logits made here)."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import CONTEXT, cli
from ._options import (
    SEED,
    bootstrap_option,
    device_option,
    json_option,
    key_options,
    metric_options,
    on_device,
    split_option,
)
from ._output import console, evaluate_and_report


@cli.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("labels_file", required=False, type=click.Path(dir_okay=False))
@key_options
@split_option
@click.option(
    "--ood",
    type=click.Path(dir_okay=False),
    default=None,
    help="File of out-of-distribution scores (same format) for OOD AUROC/FPR95.",
)
@click.option(
    "--ood-key", default=None, help="Array of OOD scores in --ood (default: --logits-key)."
)
@metric_options
@device_option
def evaluate(
    file,
    labels_file,
    logits_key,
    labels_key,
    split,
    ood,
    ood_key,
    probs,
    n_bins,
    binning,
    binary,
    bootstrap,
    seed,
    ci,
    interval,
    optimal,
    smooth,
    plot,
    as_json,
    device,
) -> None:
    """Measure the calibration of saved scores and labels (on --device: metrics and the
    bootstrap compute where the scores are).

    FILE is a .npz (keys --logits-key and --labels-key), .csv or .parquet (one column per
    class plus a label column), .pt (a dict of tensors, loaded with weights_only=True), or a
    .npy of scores followed by LABELS_FILE, a .npy of labels.

    \b
    The metrics (fractions; docs/metrics.md defines each):
      accuracy, nll (nats), brier, entropy    means over samples
      ece, aece, mce, ace, classwise_ece      binned calibration errors (equal-width,
                                              equal-mass, worst bin, bin mean, per class)
      debiased_ece, debiased_classwise_ece    the same, less their small-sample bias
      rms_ce, debiased_rms_ce, ks_error, smooth_ece   other calibration errors
      refinement_auroc, aurc, augrc           how well confidence ranks right over wrong
      optimal_ece (T*)                        the lowest ECE any temperature gives
      mean_confidence, gap, overconfident, underconfident   where the error comes from

    \b
    Examples:
      calibkit evaluate run.npz --bootstrap 1000 --plot reliability.png
      calibkit evaluate logits.npy labels.npy --json
      calibkit evaluate ../shared/data/logits/resnet110_cifar10.npz --split val
      calibkit evaluate cifar.npz --logits-key logits_test --labels-key labels_test
    """
    from .._outputs import check_output
    from ..io import load_scores, load_split

    check_output(plot, [file, labels_file, ood], option="--plot")
    if labels_file is None:
        scores, labels = load_split(file, split, logits_key=logits_key, labels_key=labels_key)
    else:
        scores, labels = load_scores(file, labels_file)
    ood_scores = None
    if ood is not None:
        ood_scores, _ = load_scores(
            ood,
            logits_key=ood_key or logits_key or "logits",
            need_labels=False,
            scores_parameter="ood_key",
        )
    evaluate_and_report(
        on_device(scores, device, "scores"),
        on_device(labels, device, "labels"),
        title=Path(file).name,
        probs=probs,
        n_bins=n_bins,
        binning=binning,
        binary=binary,
        bootstrap=bootstrap,
        seed=seed,
        ci=ci,
        interval=interval,
        ood=on_device(ood_scores, device, "ood scores"),
        optimal=optimal,
        smooth=smooth,
        plot=plot,
        as_json=as_json,
        extra={"file": str(file)},
    )


@cli.command(context_settings=CONTEXT)
@click.option(
    "-o",
    "--output",
    default="calibkit-demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for the logits file and the reliability diagram.",
)
@click.option("--seed", default=0, show_default=True, type=SEED, help="Training seed.")
@bootstrap_option(1000)
@json_option
def demo(output, seed, bootstrap, as_json) -> None:
    """Make logits with no download (a small MLP on scikit-learn's bundled digits), save them,
    and measure their calibration with intervals and a reliability diagram.

    \b
    Example:
      calibkit demo -o calibkit-demo
      calibkit evaluate calibkit-demo/digits_logits.npz --bootstrap 200
    """
    from .._outputs import check_output, check_writable, save_npz
    from ..data import demo_logits

    out = check_writable(check_output(output))  # before a minute of training, not after
    if not as_json:
        click.echo("training a small MLP on the bundled digits ...", err=True)
    data = demo_logits(seed=seed)
    path = save_npz(out / "digits_logits.npz", **data)
    if not as_json:
        console().print(f"logits written to {path} (keys: {', '.join(data)})", soft_wrap=True)
    evaluate_and_report(
        data["logits"],
        data["labels"],
        title="digits MLP, test split",
        probs=False,
        n_bins=15,
        binning="calibkit",
        binary="top-label",
        bootstrap=bootstrap,
        seed=0,
        ci=0.95,
        ood=None,
        optimal=True,
        smooth=True,
        plot=str(out / "reliability.png"),
        as_json=as_json,
        extra={"file": str(path)},
    )
