"""calibkit's metrics under its peers' conventions, against the peers themselves, on real
logits: netcal's ACE, TorchUncertainty's smooth ECE (logit kernel), AURC, AUGRC and
adaptive calibration error under each norm (l1, l2, max: ``aece(norm=...)``). Each
row prints calibkit's own value, calibkit's rendering of the peer's convention, the
peer's value, and the count of tied top-label confidences (TorchUncertainty orders ties
by its sort; calibkit averages over their orders).

    pip install --no-deps torch-uncertainty==0.13.0
    python benchmarks/correctness/peer_conventions.py \
        [--data ../shared/data/logits/resnet110_cifar10.npz]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from netcal.metrics import ACE

from calibkit import metrics as M

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the peers' loader of the tests
from tests.peers import torch_uncertainty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "logits"
    parser.add_argument("--data", type=Path, nargs="*", default=[
        shared / "resnet110_cifar10.npz", shared / "zoo" / "cifar100_resnet56.npz",
    ])  # fmt: skip
    args = parser.parse_args()
    smooth = torch_uncertainty("calibration.smooth_calibration_error")
    areas = torch_uncertainty("risk_coverage")
    adaptive = torch_uncertainty("calibration.adaptive_calibration_error")
    if smooth is None:
        sys.exit("error: torch-uncertainty not installed (pip install --no-deps ...==0.13.0)")
    print(f"{'logits':34s} {'metric':10s} {'calibkit':>10s} {'as peer':>10s} {'peer':>10s}")
    for path in args.data:
        with np.load(path) as d:
            key = "logits_test" if "logits_test" in d.files else "logits"
            z = torch.from_numpy(d[key]).float()
            y = torch.from_numpy(d[key.replace("logits", "labels")]).long()
        p = torch.softmax(z, 1)
        ties = len(p) - len(torch.unique(p.max(1).values))
        rows = [("ace", M.ece(p, y, probs=True, n_bins=10, binning="netcal"),
                 M.ace(p.double(), y, probs=True, n_bins=10, binning="netcal"),
                 ACE(bins=10).measure(p.double().numpy(), y.numpy()))]  # fmt: skip
        peer = smooth.SmoothCalibrationError()
        peer.update(p, y)
        rows.append(("smooth_ece", M.smooth_ece(p, y, probs=True),
                     M.smooth_ece(p, y, probs=True, convention="torch-uncertainty"),
                     float(peer.compute())))  # fmt: skip
        for name, fn in (("aurc", M.aurc), ("augrc", M.augrc)):
            peer = getattr(areas, name.upper())()
            peer.update(p, y)
            rows.append((name, fn(p, y, probs=True),
                         fn(p, y, probs=True, convention="torch-uncertainty"),
                         float(peer.compute())))  # fmt: skip
        for norm in ("l1", "l2", "max"):
            peer = adaptive.AdaptiveCalibrationError(
                task="multiclass", num_classes=p.shape[1], num_bins=15, norm=norm
            )
            peer.update(p, y)
            rows.append((f"aece {norm}", M.aece(p, y, probs=True, norm=norm),
                         M.aece(p, y, probs=True, norm=norm, convention="torch-uncertainty"),
                         float(peer.compute())))  # fmt: skip
        what = f"{path.name} ({ties} ties)"
        for name, own, as_peer, peer_value in rows:
            print(f"{what:34s} {name:10s} {own:10.6f} {as_peer:10.6f} {peer_value:10.6f}")
            what = ""
    print("\nace's 'calibkit' column is the ECE on the same bins (each bin weighted by its size)")


if __name__ == "__main__":
    main()
