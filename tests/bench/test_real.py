"""The `real` preset's kinds of run on the one bench harness, end to end on a miniature data
root written here (the layout of ../shared/data: zoo logits, a JPEG class-folder tree with
byte-exact test images, a pretrained ResNet checkpoint): networks given by logits files and by
checkpoints, per-entry methods, post-hoc lists and seeds, the exact-image splits, the tables
and verdicts of the doc section, resume, and the spec's one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from calibkit import data, models
from calibkit.bench._spec import SpecError, load_spec
from calibkit.bench._store import Store
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


def spec_for(root) -> dict:
    """The real preset's shape at miniature scale, reading ``root``."""
    tree = root / "cifar10-jpeg"
    folder = (
        f"folder:root={tree},mean=[0.485,0.456,0.406],std=[0.229,0.224,0.225],"
        "val_from=test,val_size=14,test_size=20,augment=none,in_memory=true"
    )
    net = {"model": "resnet20", "checkpoint": str(root / "weights" / "resnet20-0000.th")}
    exact = [f"cifar10-exact:root={tree}", f"cifar10-exact-jpeg:root={tree}"]
    return {
        "name": "real-mini",
        "seeds": [0, 1],
        "methods": [
            {"name": "Pretrained"},
            {"name": "MaC-Cal", "stage2": "maccal:epochs=2,batch_size=8"},
            {"name": "MaC-Cal γ=0.5", "stage2": "maccal:gamma=0.5,epochs=2,batch_size=8"},
        ],
        "baseline": "Pretrained",
        "datasets": [
            {
                "logits": str(root / "logits" / "zoo" / "cifar10_*.npz"),
                "methods": ["Pretrained"],
                "posthoc": ["ts", "hist-binning", "matrix", "dir-odir:folds=2,lambdas=[1],mus=[1]"],
            },
            {
                "logits": str(root / "logits" / "zoo" / "cifar100_*.npz"),
                "methods": ["Pretrained"],
                "seeds": [0],
                "posthoc": ["ts", "hist-binning"],
            },
            {
                "data": folder,
                "splits": exact,
                "models": [net],
                "methods": ["Pretrained"],
                "posthoc": ["ts", "neural-clamping:epochs=1,batch_size=7,gamma_pool=[1]"],
            },
            {
                "data": folder,
                "splits": exact,
                "models": [net],
                "methods": ["MaC-Cal", "MaC-Cal γ=0.5"],
                "seeds": [0],
            },
        ],
    }


def write_spec(tmp_path, spec: dict):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    return path


def test_the_real_kinds_of_run_on_the_one_harness(tmp_path, capsys):
    root = tmp_path / "data"
    root.mkdir()
    write_root(root)
    (root / "logits" / "zoo" / "cifar10_netC.npz").write_bytes(
        (root / "logits" / "zoo" / "cifar10_netA.npz").read_bytes()
    )
    path = write_spec(tmp_path, spec_for(root))
    plan = load_spec(path)
    # 2 zoo files × 2 seeds, 1 × 1, the pretrained network × 2 seeds, 2 MaC-Cal rows × 1
    assert len(plan.runs) == 4 + 1 + 2 + 2
    by = {(str(r.dataset), str(r.model), r.method, r.seed): r for r in plan.runs}
    assert by["cifar10", "netA", "Pretrained", 0].logits.endswith("cifar10_netA.npz")
    assert "matrix" not in map(str, by["cifar100", "netB", "Pretrained", 0].posthoc)
    out, doc = tmp_path / "out", tmp_path / "real.md"
    main(["bench", str(path), "-o", str(out), "--workers", "1", "--doc", str(doc), "--json"])
    store = Store(out / "results.sqlite", create=False)
    assert len(store.runs()) == len(plan.runs) and not store.runs("failed")
    ece = {
        (r["dataset"], r["model"], r["method"], r["seed"], cal): v
        for r in store.runs()
        for k, split, cal, _, m, v in store.metrics()
        if k == r["key"] and m == "ece" and split == "test"
    }
    # a zoo run is its file split 50/50 per class with the run's seed, calibrated on one half
    from calibkit.metrics import evaluate
    from calibkit.posthoc._compare import stratified_split

    with np.load(root / "logits" / "zoo" / "cifar10_netA.npz") as f:
        z, y = f["logits"], f["labels"]
    _, test = stratified_split(y, 0.5, 1)
    want = evaluate(z[test].astype(np.float64), y[test], smooth=False).metrics["ece"]
    assert ece["cifar10", "netA", "Pretrained", 1, "uncalibrated"] == pytest.approx(want, 1e-9)
    # the pretrained network: its logits on the exact images and their JPEG versions
    splits = {split for _, split, *_ in store.metrics()}
    assert {"test", "cifar10_exact", "cifar10_exact_jpeg"} <= splits
    assert any(c.startswith("neural-clamping") for *_, c in ece)
    assert ("folder", "resnet20", "MaC-Cal", 0, "uncalibrated") in {
        (d.split(":")[0], *rest) for d, *rest in ece
    }
    # the doc section: tables over networks, per pretrained network, splits and methods
    md = doc.read_text()
    for title in (
        "### Verdicts",
        "### Average ranks over every network (3;",
        "### Per network",
        "### Refinement (Dark Side)",
        "### Calibrators on resnet20",
        "### Evaluation splits",
        "### Methods on resnet20",
        "### Anomalies",
        "### Fit objective by epoch on resnet20",
    ):
        assert title in md, title
    assert "Kull et al. 2019" in md and "networks (logits files)" in md
    assert "BSCE-GRA" not in md  # no line for a claim whose sides the sweep lacks
    assert "### Training rate" not in md  # nothing was trained
    report = (out / "report.md").read_text()  # the report has the same tables
    assert "## Average ranks over every network" in report
    assert "## Calibrators on resnet20" in report
    capsys.readouterr()
    main(["bench", str(path), "-o", str(out), "--workers", "1", "--json"])  # resume: nothing
    assert '"skipped": 9' in capsys.readouterr().out


def test_the_exact_images_and_their_jpeg_versions(tmp_path):
    write_root(tmp_path)
    tree = tmp_path / "cifar10-jpeg"
    exact = data.create(f"cifar10-exact:root={tree}").test
    jpeg = data.create(f"cifar10-exact-jpeg:root={tree}").test
    assert torch.equal(exact.y, jpeg.y) and exact.x.shape == jpeg.x.shape == (20, 3, 32, 32)
    # the JPEG file of exact image j holds (up to JPEG's loss) the same picture
    err = (jpeg.x.float() - exact.x.float()).abs().mean((1, 2, 3))
    other = (jpeg.x.float() - exact.x.roll(1, 0).float()).abs().mean((1, 2, 3))
    assert bool((err < other).all())
    with pytest.raises(ValueError, match=r"test_exact_first1017\.npz"):
        data.create(f"cifar10-exact:root={tmp_path}")


def test_a_folder_calibrates_on_test_images_when_asked(tmp_path):
    write_root(tmp_path)
    tree = tmp_path / "cifar10-jpeg"
    d = data.create(f"folder:root={tree},val_from=test,val_size=10,augment=none")
    assert (len(d.train), len(d.val), len(d.test)) == (60, 10, 30)
    default = data.create(f"folder:root={tree},val_size=10,augment=none")
    assert (len(default.train), len(default.val), len(default.test)) == (50, 10, 40)
    with pytest.raises(ValueError, match="val_from: expected one of 'train', 'test'; got 'val'"):
        data.create(f"folder:root={tree},val_from=val")


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda s: s["datasets"][0].update(logits="/nowhere/*.npz"),
            r"datasets\[0\]\.logits: no file",
        ),
        (
            lambda s: s["datasets"][2]["models"][0].update(checkpoint="/nowhere.th"),
            r"datasets\[2\]\.models\[0\]\.checkpoint: /nowhere\.th: no such checkpoint file",
        ),
        (  # issue 65 §5: a file of the system is not read as a checkpoint
            lambda s: s["datasets"][2]["models"][0].update(checkpoint="/proc/self/environ"),
            r"models\[0\]\.checkpoint: /proc/self/environ: not a checkpoint \(neither",
        ),
        (lambda s: s["methods"][0].update(loss="focal"), r"methods\[0\]: .*given networks"),
        (lambda s: s["datasets"][0].update(methods=["MaC-Cal"]), r"methods\[1\]: .*logits files"),
        (lambda s: s["datasets"][0].update(methods=["Nope"]), r"datasets\[0\]\.methods: expected"),
        (
            lambda s: s["datasets"][0].update(calibration_fraction=1.5),
            r"calibration_fraction: expected a number in \(0, 1\), got 1\.5",
        ),
        (lambda s: s["datasets"][2].update(calibration_fraction=0.5), "belongs to a logits entry"),
        (
            lambda s: s["datasets"][0].update(data="digits"),
            "either 'data' and 'models' or 'logits'",
        ),
        (lambda s: s["datasets"][1].update(seeds=[-1]), r"datasets\[1\]\.seeds\[0\]"),
    ],
)
def test_given_network_entries_are_checked_before_running(tmp_path, change, message):
    root = tmp_path / "data"
    root.mkdir()
    write_root(root)
    spec = spec_for(root)
    change(spec)
    with pytest.raises(SpecError, match=message):
        load_spec(write_spec(tmp_path, spec))


def test_a_logits_entry_reads_any_score_file_and_records_its_classes(tmp_path):
    """A CSV holds its labels as floats: the run checks them like every fit does, and records
    the number of classes, so that reports need not open the file again."""
    from calibkit.bench._execute import execute
    from calibkit.bench._spec import resolve

    z, y = make_logits(200, 4, 3)
    header = ",".join(f"c{i}" for i in range(4)) + ",labels"
    rows = "\n".join(",".join(map(str, r)) + f",{t}" for r, t in zip(z, y, strict=True))
    (tmp_path / "toy_net.csv").write_text(header + "\n" + rows + "\n")
    spec = resolve(
        {
            "seeds": [1],
            "methods": [{"name": "Pretrained"}],
            "posthoc": ["ts"],
            "datasets": [{"logits": str(tmp_path / "toy_net.csv")}],
        }
    )
    result = execute(spec.runs[0], tmp_path / "out")
    assert result["run"]["provenance"]["n_classes"] == 4
    assert (result["run"]["dataset"], result["run"]["model"]) == ("toy", "net")
    assert any(cal == "ts" and m == "ece" for _, cal, _, m, _ in result["metrics"])


def test_a_bad_logits_file_fails_at_its_line_before_anything_runs(tmp_path):
    z, y = make_logits(100, 5, 2)
    y[7] = 9  # a label beyond the 5 classes
    np.savez(tmp_path / "x_bad.npz", logits=z, labels=y)
    spec = {
        "methods": [{"name": "Pretrained"}],
        "posthoc": ["ts"],
        "datasets": [{"logits": str(tmp_path / "x_bad.npz")}],
    }
    with pytest.raises(
        SpecError, match=r"datasets\[0\]\.logits: .*x_bad\.npz: labels: class index 9"
    ):
        load_spec(write_spec(tmp_path, spec))


def test_network_verdicts_split_by_class_count(tmp_path, capsys):
    """Issue 44: the Kull et al. claims get a row over every network and one per class
    count (10 or fewer, more), each naming the grid its calibrator used."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for i, k in enumerate((10, 10, 20, 20)):
        z, y = make_logits(400, k, i)
        y[: 2 * k] = np.repeat(np.arange(k), 2)
        np.savez(zoo / f"net{i}_k{k}.npz", logits=z.astype(np.float32), labels=y)
    odir = "dir-odir:folds=2,lambdas=[1],mus=[1]"
    spec = {
        "name": "zoo-mini",
        "seeds": [0],
        "methods": [{"name": "Pretrained"}],
        "baseline": "Pretrained",
        "datasets": [{"logits": str(zoo / "*.npz"), "posthoc": ["ts", odir]}],
    }
    out = tmp_path / "out"
    main(["bench", str(write_spec(tmp_path, spec)), "-o", str(out), "--workers", "1", "--json"])
    capsys.readouterr()
    from calibkit.bench._results import Results
    from calibkit.bench._verdicts import verdict_table

    rows = [
        r
        for r in verdict_table(Results(Store(out / "results.sqlite", create=False)))
        if r[1] == "Dir-ODIR has a lower classwise ECE than TS"
    ]
    assert [r[2].split(";")[0] for r in rows] == [
        "4 networks (logits files)",
        "2 networks with 10 classes or fewer (logits files)",
        "2 networks with more than 10 classes (logits files)",
    ]
    assert all(f"`{odir}`" in r[2] for r in rows)
