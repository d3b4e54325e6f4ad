"""The `real` preset end to end on a miniature data root written here (the layout of
../shared/data: zoo logits, a JPEG class-folder tree with byte-exact test images, a
pretrained ResNet checkpoint), then resumed; its report and its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from calibkit import models
from calibkit.bench import real
from calibkit.bench.real_report import write_real_report
from calibkit.bench.store import Store
from calibkit.cli import main
from tests.conftest import make_logits
from tests.models.test_checkpoint import published_layout

CLASSES = [f"c{i}" for i in range(10)]


def write_root(root):
    rng = np.random.default_rng(0)
    zoo = root / "logits" / "zoo"
    zoo.mkdir(parents=True)
    for name, k in (("cifar10_netA", 10), ("cifar100_netB", 100)):
        z, y = make_logits(400 if k == 10 else 1000, k, k)
        y[: 2 * k] = np.repeat(np.arange(k), 2)  # every class at least twice
        np.savez(zoo / f"{name}.npz", logits=z.astype(np.float32), labels=y)
    tree = root / "cifar10-jpeg"
    # the "official" test order: 4 per class, each class twice among the first 20 ("exact")
    labels = np.concatenate([rng.permutation(np.repeat(np.arange(10), 2)) for _ in range(2)])
    images = rng.integers(0, 256, (len(labels), 32, 32, 3), dtype=np.uint8)
    seen = dict.fromkeys(range(10), 0)
    for j, c in enumerate(labels):
        (tree / "test" / CLASSES[c]).mkdir(parents=True, exist_ok=True)
        Image.fromarray(images[j]).save(tree / "test" / CLASSES[c] / f"{seen[c]:04d}.jpg")
        seen[c] += 1
    for c in range(10):
        (tree / "train" / CLASSES[c]).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                tree / "train" / CLASSES[c] / f"{i:04d}.jpg"
            )
    np.save(tree / "test_labels_canonical.npy", labels.astype(np.int64))
    np.savez(tree / "test_exact_first1017.npz", images=images[:20], labels=labels[:20])
    (root / "weights").mkdir()
    torch.manual_seed(0)
    net = models.create("resnet20")
    torch.save({"state_dict": published_layout(net)}, root / "weights" / "resnet20-0000.th")


SMALL = real.Settings(
    zoo_seeds=2, posthoc=["ts", "hist-binning", "matrix"], depths=(20,), clamp_calibration=10,
    clamp_test=10, clamp={"epochs": 1, "batch_size": 5, "gamma_pool": (1.0,)},
    maccal_epochs=2, maccal_val=10, maccal_gammas=(0.5,), shift_seeds=2,
)  # fmt: skip


def test_the_preset_runs_resumes_and_reports(tmp_path):
    write_root(tmp_path / "data")
    out = tmp_path / "out"
    summary = real.run_real(tmp_path / "data", out, settings=SMALL, workers=1)
    units = real.plan(tmp_path / "data", SMALL)
    assert summary["done"] == len(units) == 1 + 2 + 1 + 6 + 2 * 2
    keys = {r["key"] for r in Store(out / "results.sqlite", create=False).runs()}
    assert keys == {u.key for u in units}
    again = real.run_real(tmp_path / "data", out, settings=SMALL, workers=1)
    assert again == {"done": 0, "skipped": len(units), "seconds_by_part": {}}
    info = write_real_report(out / "results.sqlite", out, tmp_path / "real.md")
    md = (tmp_path / "real.md").read_text()
    report = (out / "report.md").read_text().rstrip()
    assert md == f"<!-- calibkit:real -->\n{report}\n<!-- /calibkit:real -->\n"
    assert "<table>" in (out / "report.html").read_text()
    for title in ("## Verdicts", "## Average ranks over all 28 networks", "## Refinement",
                  "## Neural Clamping against post-hoc methods, resnet20", "## MaC-Cal stage 2",
                  "## Natural shift"):  # fmt: skip
        assert title in md
    from calibkit.cli.common import strict_json
    from tests.test_cli_json import validate

    validate(
        "bench-real", strict_json(summary | info | {"wall_seconds": 1.0})
    )  # what --json prints
    papers = [row[0] for row in info["verdicts"][1:]]
    assert papers[0] == "Kull et al. 2019" and "Dark Side (Table 3, shift)" in papers
    # the 100-class network ran without the full maps, hist-binning on every seed
    s = Store(out / "results.sqlite", create=False)
    cals = {(k, c) for k, _, c, _, m, _ in s.metrics() if m == "ece"}
    assert ("posthoc/cifar100_netB/1", "matrix") not in cals
    assert ("posthoc/cifar10_netA/1", "matrix") in cals
    assert ("posthoc/cifar100_netB/1", "hist-binning") in cals


def test_the_exact_images_map_to_their_jpeg_files(tmp_path):
    write_root(tmp_path)
    images = real.Images(tmp_path)
    exact_labels = np.load(tmp_path / "cifar10-jpeg" / "test_exact_first1017.npz")["labels"]
    assert torch.equal(images.bundle.test.y[images.jpeg_of_exact], torch.from_numpy(exact_labels))
    # the JPEG file of exact image j holds (up to JPEG's loss) the same picture
    x = images.bundle.test.x[images.jpeg_of_exact].float()
    err = (x - images.exact.float()).abs().mean((1, 2, 3))
    other = (x - images.exact.roll(1, 0).float()).abs().mean((1, 2, 3))
    assert bool((err < other).all())


def test_bench_real_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "real", "-o", str(tmp_path)])
    assert e.value.code == 2 and "needs --data-root DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["bench", "real", "--data-root", str(tmp_path), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "missing logits/zoo" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(["bench", "default", "--data-root", str(tmp_path)])
    assert e.value.code == 2 and "belongs to the `real` preset" in capsys.readouterr().err
