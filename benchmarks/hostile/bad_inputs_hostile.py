"""The fourth round of the bad-input sweep (issue 53): what someone who shares a folder or
a file with the user can plant, and inputs that mean something else than they say. Each
case names the cause its one-line error must give (else it is *misleading*), and the
accepted report cases check what they wrote (a name rendered as markup is *silent*).

Families (each family's name starts with "4 "):

- **symlinks**: a link planted where a command writes (lock files, the store, train/ and
  runs/ below a bench folder, figures/ and the report files, -o, --plot, --onnx, --doc),
  pointing at a file of the user's, at nothing, or at a folder; the target must survive;
- **names**: markup, table syntax, line breaks, rich markup, mathtext and escape sequences in
  the method, model, dataset, anomaly and error texts of a store, reported; report.md is
  rendered by markdown-it with raw HTML on and report.html parsed;
- **tables**: a named index, row numbers from 1, a CSV without a header, malformed CSV, text,
  date and decimal columns, unsigned labels past int64, --logits-key on a table;
- **dtypes**: .npz arrays of dates, durations, text, bytes and records;
- **forged**: every registered calibrator's file with its learned values scaled by 1e300, and
  metadata nested 100,000 deep;
- **yaml**: YAML 1.1's surprises (sexagesimal, binary, yes/on) and depth bombs in a spec;
- **stores**: a store whose JSON or values are crafted;
- **bombs**: an .npz whose header declares 4 TB.
"""

from __future__ import annotations

import io
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from tests.bench.rows import write as write_rows
from tests.bench.test_hostile_folders import HOSTILE, Page, rendered
from tests.posthoc.test_forged_files import contents

from calibkit import posthoc
from calibkit.bench._store import ALL, Store
from calibkit.posthoc._files import write_checked


def fourth_round(d: Path, make: Callable) -> list:
    """Issue 53's families; ``make(command, argv, ok, what, family, inputs, cause, verify)``
    builds a case."""
    out: list = []

    def case(command, argv, ok, what, family, inputs=(), cause=None, verify=None):
        out.append(
            make(
                command,
                [str(a) for a in argv],
                ok,
                what,
                "4 " + family,
                tuple(str(p) for p in inputs),
                cause,
                verify,
            )
        )

    h = d / "hostile"
    h.mkdir()
    victim = h / "thesis.tex"
    victim.write_text("three years of work\n")
    shelter = h / "shelter"
    shelter.mkdir()
    (shelter / "keep.txt").write_text("keep")
    spec = h / "spec.yaml"
    spec.write_text(
        "seeds: [1]\ntrain: {epochs: 1}\ndatasets:\n  - data: digits\n"
        "    models: [mlp]\nmethods:\n  - {name: CE, loss: ce}\nposthoc: [ts]\n"
    )
    good, ts = d / "good.npz", d / "ts.calib"
    store = _store(h / "plain.sqlite", "CE", "mlp")
    chained = h / "chain"
    chained.symlink_to(victim)
    targets = {
        "a file": victim,
        "nothing": h / "nowhere",
        "a folder": shelter,
        "a link to a file": chained,
    }
    n = iter(range(10_000))

    def planted(at: Path, target: Path) -> Path:
        at.parent.mkdir(parents=True, exist_ok=True)
        at.symlink_to(target, target_is_directory=target.is_dir())
        return at

    # symlinks: every place a command writes, pointing at a file, at nothing, at a folder
    for where, target in targets.items():
        guard = [victim, shelter]
        for command, names, source in (
            (
                "bench",
                (".bench.lock", "results.sqlite.lock", "results.sqlite", "train", "runs"),
                spec,
            ),
            ("report", ("figures", "report.md", "report.html"), store),
        ):  # a link below the folder
            for name in names:
                folder = h / f"{command}{next(n)}"
                planted(folder / name, target)
                case(
                    command,
                    [command, source, "-o", folder],
                    False,
                    f"{name} -> {where}",
                    "symlinks",
                    guard,
                    "is a symbolic link",
                )
        for command, args, suffix in (
            ("fit", ["--method", "ts", "--val", good, "-o"], ".calib"),
            ("apply", [ts, good, "-o"], ".npz"),
            ("apply", [ts, "--onnx"], ".onnx"),
            ("evaluate", [good, "--plot"], ".png"),
            ("bench", [spec, "-o", h / f"b{next(n)}", "--doc"], ".md"),
        ):
            link = planted(h / f"out{next(n)}{suffix}", target)
            case(
                command,
                [command, *args, link],
                False,
                f"{args[-1]} -> {where}",
                "symlinks",
                guard,
                "is a symbolic link",
            )

    # names: each hostile text in each place a store keeps one, reported
    for label, name in HOSTILE.items():
        for place in ("method", "model", "dataset", "anomaly", "error", "split"):
            db = _store(h / f"names{next(n)}.sqlite", **({"method": "CE"} | {place: name}))
            folder = h / f"names-report{next(n)}"
            case(
                "report",
                ["report", db, "-o", folder],
                True,
                f"{label} as the {place}",
                "names",
                [db],
                verify=_rendered(folder),
            )

    # tables
    for file, cause in _tables(h).items():  # cause None: a good table
        f = h / file
        # "no labels …": refused by the commands that need labels; "labels …": by every
        # command that reads labels (an --ood file's labels are not read)
        no_labels = cause is not None and cause.startswith("no labels ")
        bad_labels = cause is not None and cause.startswith("labels ")
        for command, argv in _readers(f, good, ts, h):
            ok = (
                cause is None
                or ((no_labels or bad_labels) and "--ood" in argv)
                or (no_labels and command == "apply")
            )
            case(
                command,
                argv,
                ok,
                f"{file} ({' '.join(map(str, argv[:2]))})",
                "tables",
                [f],
                None if ok else cause.removeprefix("no labels ").removeprefix("labels "),
            )
    for file in ("plain.csv", "plain.parquet"):
        for command, argv in (
            ("evaluate", ["evaluate", h / file, "--logits-key", "scores"]),
            (
                "fit",
                [
                    "fit",
                    "--method",
                    "ts",
                    "--val",
                    h / file,
                    "--logits-key",
                    "scores",
                    "-o",
                    h / "t.calib",
                ],
            ),
            ("apply", ["apply", ts, h / file, "--logits-key", "scores", "-o", h / "t.npz"]),
        ):
            case(
                command,
                argv,
                False,
                f"--logits-key on {file}",
                "tables",
                [h / file],
                "a table has no array 'scores'",
            )

    # dtypes in an .npz
    z, y = np.random.default_rng(0).normal(size=(300, 10)), np.arange(300) % 10
    for name, arrays, cause in (
        (
            "dates",
            {
                "logits": np.datetime64("2020-01-01") + np.zeros((300, 10), "timedelta64[D]"),
                "labels": y,
            },
            "datetime64",
        ),
        (
            "durations",
            {"logits": np.zeros((300, 10), "timedelta64[s]"), "labels": y},
            "timedelta64",
        ),
        ("text", {"logits": z.astype(str), "labels": y}, "<U"),
        ("bytes", {"logits": z.astype("S8"), "labels": y}, "|S8"),
        (
            "records",
            {"logits": np.zeros(300, dtype=[("a", "f8"), ("b", "f8")]), "labels": y},
            "expected a numeric array",
        ),
        (
            "label-dates",
            {"logits": z, "labels": np.datetime64("2020-01-01") + y.astype("timedelta64[D]")},
            "datetime64",
        ),
        ("label-text", {"logits": z, "labels": np.array([f"c{i}" for i in y])}, "<U"),
        ("label-bytes", {"logits": z, "labels": y.astype("S2")}, "|S2"),
    ):
        f = h / f"{name}.npz"
        np.savez(f, **arrays)
        labels_only = name.startswith("label-")
        for command, argv in _readers(f, good, ts, h):
            ok = labels_only and "--ood" in argv
            case(
                command,
                argv,
                ok,
                f"{name}.npz ({' '.join(map(str, argv[:2]))})",
                "dtypes",
                [f],
                None if ok else cause,
            )

    # forged: every registered logits calibrator's file, learned values × 1e300
    for name in posthoc.REGISTRY.names():
        if posthoc.REGISTRY.create(name).level == "model":
            continue
        path = h / f"forged-{name}.calib"
        _forge_huge(name, path)
        case(
            "apply",
            ["apply", path, good, "-o", h / "f.npz"],
            False,
            f"{name} × 1e300",
            "forged",
            [path],
            str(path),
        )
        case(
            "apply",
            ["apply", path, "--onnx", h / "f.onnx"],
            False,
            f"{name} × 1e300 exported",
            "forged",
            [path],
            str(path),
        )
    deep = h / "deep-meta.calib"
    meta, tensors = contents(ts)
    write_checked(deep, tensors, meta)
    _nest_metadata(deep, tensors)
    for argv in (["apply", deep, good, "-o", h / "f.npz"], ["apply", deep, "--onnx", h / "f.onnx"]):
        case("apply", argv, False, "metadata nested 100,000 deep", "forged", [deep], str(deep))

    # yaml: YAML 1.1's surprises and depth bombs, read by the bench
    body = "datasets:\n  - data: digits\n    models: [mlp]\nmethods:\n  - {name: CE, loss: ce}\n"
    for what, head, ok, cause in (
        ("sexagesimal seed 1:30", "seeds: [1:30]\n", False, "got '1:30'"),
        ("sexagesimal seed 190:20:30", "seeds: [190:20:30]\n", False, "got '190:20:30'"),
        ("binary seed 0b11", "seeds: [0b11]\n", False, "got '0b11'"),
        ("seed with underscores 1_000", "seeds: [1_000]\n", False, "got '1_000'"),
        ("octal-looking seed 010 (ten)", "seeds: [010]\n", True, None),
        ("record: yes", "seeds: [1]\nrecord: yes\n", False, "record"),
        ("record: on", "seeds: [1]\nrecord: on\n", False, "record"),
        ("record: n", "seeds: [1]\nrecord: n\n", False, "record"),
        ("train epochs 0x2", "seeds: [1]\ntrain: {epochs: 0x2}\n", True, None),
        ("seed list that holds itself", "seeds: &s [1, *s]\n", False, "nested deeper"),
        ("mapping that holds itself", "seeds: [1]\ntrain: &t {x: *t}\n", False, "nested deeper"),
        ("nesting 60 deep", "seeds: " + "[" * 60 + "]" * 60 + "\n", False, "nested"),
        ("nesting 600 deep", "seeds: " + "[" * 600 + "]" * 600 + "\n", False, "nested"),
        ("nesting 3000 deep", "seeds: " + "[" * 3000 + "]" * 3000 + "\n", False, "nested"),
        ("alias bomb", _alias_bomb(), False, "expands to more than"),
    ):
        f = h / f"spec{next(n)}.yaml"
        f.write_text(head + (body if "datasets" not in head else ""))
        argv = ["bench", f, "-o", h / f"yb{next(n)}", "--estimate"]
        case("bench", argv, ok, what, "yaml", [f], cause)

    # stores: crafted JSON or values, reported
    for what, sql, cause in (
        ("a null spec", "UPDATE runs SET spec = 'null'", "is NoneType, not a dict"),
        ("a list spec", "UPDATE runs SET spec = '[1, 2]'", "is list, not a dict"),
        ("garbage spec JSON", "UPDATE runs SET spec = '{oops'", "is not valid JSON"),
        ("text in a value", "UPDATE metrics SET value = 'twenty'", "holds 'twenty', not a number"),
        ("garbage history", "UPDATE history SET record = '[['", "is not valid JSON"),
        ("garbage provenance", "UPDATE runs SET provenance = '{'", "is not valid JSON"),
        (
            "garbage sweep meta",
            "UPDATE meta SET value = '{' WHERE key = 'sweep'",
            "is not valid JSON",
        ),
        ("garbage spec settings", "UPDATE specs SET settings = 'x'", "is not valid JSON"),
        ("a list of settings", "UPDATE specs SET settings = '[]'", "is list, not a dict"),
        (
            "deep JSON spec",
            "UPDATE runs SET spec = '" + "[" * 100_000 + "]" * 100_000 + "'",
            "is not valid JSON",
        ),
    ):
        db = _store(h / f"crafted{next(n)}.sqlite", "CE", "mlp")
        with sqlite3.connect(db) as con:
            con.execute("INSERT INTO history VALUES ('k1', 1, 1, '{\"epoch\": 1}')")
            con.execute(sql)
        case("report", ["report", db, "-o", h / f"cr{next(n)}"], False, what, "stores", [db], cause)

    # bombs: a header that declares 4 TB
    bomb = h / "bomb.npz"
    _declare_terabytes(bomb)
    for command, argv in (
        ("evaluate", ["evaluate", bomb]),
        ("fit", ["fit", "--method", "ts", "--val", bomb, "-o", h / "t.calib"]),
        ("apply", ["apply", ts, bomb, "-o", h / "t.npz"]),
        ("compare", ["compare", "--file", bomb, "--split", "0.5", "--methods", "ts"]),
        ("evaluate", ["evaluate", good, "--ood", bomb]),
    ):
        case(command, argv, False, "an .npz declaring 4 TB", "bombs", [bomb], "declares shape")
    return out


def _readers(f: Path, good: Path, ts: Path, h: Path) -> list[tuple[str, list]]:
    """(command, argv) of every command that reads the scores file ``f``: as the data, as
    the calibration split, to apply a calibrator to, to compare on, and as OOD scores."""
    return [
        ("evaluate", ["evaluate", f, "--no-smooth", "--no-optimal"]),
        ("fit", ["fit", "--method", "ts", "--val", f, "-o", h / "t.calib"]),
        ("apply", ["apply", ts, f, "-o", h / "t.npz"]),
        ("compare", ["compare", "--file", f, "--split", "0.5", "--methods", "ts"]),
        ("evaluate", ["evaluate", good, "--ood", f, "--no-smooth", "--no-optimal"]),
    ]


def _store(
    path: Path,
    method: str = "CE",
    model: str = "mlp",
    dataset: str = "digits",
    anomaly: str = "T = 1e19",
    error: str = "out of memory",
    split: str = "svhn",
) -> Path:
    """A finished two-seed store with one method, one failed run, one anomaly and one
    out-of-distribution split."""
    store = Store(path)
    for seed in (1, 2):
        run = {
            "key": f"k{seed}",
            "spec": {"loss": "ce", "stage2": None, "mixup": 0.0},
            "dataset": dataset,
            "model": model,
            "method": method,
            "seed": seed,
        }
        metrics = [
            ("test", "uncalibrated", ALL, "ece", 0.2 + seed / 100),
            ("test", "uncalibrated", ALL, "accuracy", 0.9),
            ("test", "ts", ALL, "ece", 0.1),
            ("test", "ts", ALL, "temperature", 1.5),
            ("test", "uncalibrated", ALL, f"ood_auroc:{split}", 0.8),
        ]
        write_rows(store, run, metrics, anomalies=[("ts", ALL, "temperature", anomaly)])
    failed = {
        "key": "k3",
        "dataset": dataset,
        "model": model,
        "method": method,
        "seed": 3,
        "spec": {"loss": "ce"},
        "status": "failed",
        "error": error,
    }
    write_rows(store, failed)
    store.set_sweep([method], method)
    return path


def _rendered(folder: Path) -> Callable[[], str | None]:
    """A check of a report: report.md rendered with raw HTML on, and report.html, hold no
    script and no image but the figures, and every table has rows of one width (a name
    adds no cell and no row)."""

    def check() -> str | None:
        md = (folder / "report.md").read_text()
        page = (folder / "report.html").read_text()
        html = Page()
        html.feed(page)
        for what, found, figures in (
            ("report.md", rendered(md), md.count("](figures/")),
            ("report.html", html, page.count("data:image/png")),
        ):
            if "script" in found.tags or found.tags.count("img") != figures:
                return f"{what}: a name became markup"
            if any(len({len(row) for row in table}) > 1 for table in found.tables):
                return f"{what}: a name added or removed a table cell"
        return None

    return check


def _tables(h: Path) -> dict[str, str | None]:
    """Table files by name, each with the cause its refusal names (None: a good table; a
    cause starting with "labels " is in the label column only)."""
    import pandas as pd

    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(300, 10)), np.arange(300) % 10
    df = pd.DataFrame(z, columns=[f"c{i}" for i in range(10)])
    df["labels"] = y
    df.to_csv(h / "plain.csv", index=False)
    df.to_parquet(h / "plain.parquet", index=False)
    df.rename_axis("sample_id").to_csv(h / "named-index.csv")
    df.rename_axis("sample_id").reset_index().to_parquet(h / "named-index.parquet", index=False)
    df.set_index(pd.Index(np.arange(1, 301), name="n")).to_csv(h / "index-from-1.csv")
    df.iloc[rng.permutation(300)].rename_axis("idx").reset_index().to_csv(
        h / "shuffled-index.csv", index=False
    )
    df.to_csv(h / "no-header.csv", index=False, header=False)
    df.assign(c0=np.arange(1000, 1300)).rename(columns={"c0": "id"}).to_csv(
        h / "id-column.csv", index=False
    )
    (h / "trailing-comma.csv").write_text(
        "\n".join(line + "," for line in df.to_csv(index=False).splitlines()) + "\n"
    )
    (h / "crlf.csv").write_text(df.to_csv(index=False).replace("\n", "\r\n"))
    df.assign(c0=np.where(np.arange(300) == 5, np.nan, z[:, 0])).to_csv(
        h / "nan-cell.csv", index=False, na_rep="nan"
    )
    head, rest = df.to_csv(index=False).split("\n", 1)
    (h / "extra-cell.csv").write_text(head + "\n" + rest.replace(",", ",,", 1))
    (h / "quoted-numbers.csv").write_text(
        "\n".join(
            ",".join(f'"{v}"' for v in line.split(","))
            for line in df.to_csv(index=False).splitlines()
        )
        + "\n"
    )
    pd.DataFrame(z).to_csv(h / "default-header.csv", index=False)
    (h / "unclosed-quote.csv").write_text(df.to_csv(index=False).replace("\n1", '\n"1', 1))
    (h / "huge-field.csv").write_text("c0,c1,labels\n" + "1" * 140_000 + ",2,0\n")
    df.assign(c0=np.array(["a", "b", "c"] * 100, dtype=object)).to_parquet(
        h / "text-column.parquet", index=False
    )
    df.assign(c0=pd.date_range("2020-01-01", periods=300)).to_parquet(
        h / "date-column.parquet", index=False
    )
    from decimal import Decimal

    df.assign(c0=[Decimal("1.5")] * 300).to_parquet(h / "decimal-column.parquet", index=False)
    df.assign(labels=np.full(300, 2**63 + 5, dtype=np.uint64)).to_parquet(
        h / "uint64-labels.parquet", index=False
    )
    return {
        "plain.csv": None,
        "plain.parquet": None,
        "default-header.csv": "no labels no label column array 'labels'",
        "named-index.csv": "holds the row numbers",
        "named-index.parquet": "holds the row numbers",
        "index-from-1.csv": "holds the row numbers",
        "shuffled-index.csv": "holds the row numbers",
        "no-header.csv": "the CSV has no header",
        "id-column.csv": "column 'id' looks like a row index",
        "trailing-comma.csv": "an unnamed column",
        "crlf.csv": None,
        "nan-cell.csv": "NaN",
        "extra-cell.csv": "row 2 has 12 columns, the header 11",
        "quoted-numbers.csv": None,
        "unclosed-quote.csv": "not a readable CSV file",
        "huge-field.csv": "not a readable CSV file",
        "text-column.parquet": "column 'c0' holds object values",
        "date-column.parquet": "column 'c0' holds datetime64",
        "decimal-column.parquet": "column 'c0' holds object values",
        "uint64-labels.parquet": "labels 9223372036854775813",
    }


def _forge_huge(name: str, path: Path) -> None:
    from tests.posthoc.test_forged_files import fitted

    fitted(name).save(path)
    meta, tensors = contents(path)
    tensors = {k: t * 1e300 if t.is_floating_point() else t for k, t in tensors.items()}
    write_checked(path, tensors, meta)


def _nest_metadata(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Rewrite ``path``'s metadata as JSON nested 100,000 deep, checksum recomputed."""
    from safetensors.torch import save_file

    from calibkit.posthoc._files import _digest

    text = "[" * 100_000 + "]" * 100_000
    save_file(tensors, str(path), metadata={"calibkit": text, "sha256": _digest(text, tensors)})


def _alias_bomb() -> str:
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    return "\n".join(lines) + "\nseeds: [1]\n"


def _declare_terabytes(path: Path) -> None:
    buf = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": (1_000_000, 500_000)}
    np.lib.format.write_array_header_1_0(buf, header)
    buf.write(bytes(64))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("logits.npy", buf.getvalue())
        archive.writestr("labels.npy", buf.getvalue())


__all__ = ["fourth_round"]
