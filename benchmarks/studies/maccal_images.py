"""MaC-Cal stage 2 on the pretrained ResNet-20 (the JPEG CIFAR-10 tree: 10,000 training
images, 500 calibration, 2,000 test, as `bench real`) with the head trained on the cached
features of the plain training images (``images=plain``, calibkit's default) or on each
epoch's features of crop-flip augmented images (``images=augmented``, the paper's training
loader); 20 epochs, 2 seeds (docs/methods.md, "MaC-Cal's defaults and fit report").

    python benchmarks/studies/maccal_images.py [--out /tmp/maccal-resnet20]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from calibkit.metrics._resample import metric_values
from calibkit.posthoc._maccal import MacCal
from calibkit.runs import run_evidence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # progress_lines.py, shared
from nc_lambda import pretrained  # the pretrained ResNet-20 as a run, beside this file
from progress_lines import epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/maccal-resnet20"))
    args = parser.parse_args()
    run = pretrained(args.out, augment="crop-flip", train_size=10_000)
    evidence, _ = run_evidence(run, "cpu")
    y = evidence.labels["test"]
    base = metric_values(evidence.logits["test"], y, ["accuracy", "ece"])
    print(
        f"pretrained: test ECE {base['ece'] * 100:.2f} %, accuracy {base['accuracy'] * 100:.2f} %"
    )
    for seed in (0, 1):
        for images in ("plain", "augmented"):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with epochs(f"seed {seed} images={images}") as report:
                    cal = MacCal(images=images, epochs=20, seed=seed)
                    cal.fit_on(evidence, progress=report)
            m = metric_values(cal.apply_on(evidence)["test"], y, ["accuracy", "ece"])
            r = cal.fit_report_
            low, high = r.details["q_range"]
            print(
                f"seed {seed} images={images}: test ECE {m['ece'] * 100:.2f} %, accuracy "
                f"{m['accuracy'] * 100:.2f} %, final q {r.details['q']:.2f} (range {low:.2f}-"
                f"{high:.2f}), train accuracy {r.details['train_acc'] * 100:.2f} %, converged "
                f"{r.converged}, mask stopped: {r.details.get('mask_stopped', 'no')} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
