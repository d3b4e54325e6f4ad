"""Table files read by rule (issue 41 §2): which columns are classes is decided by one
rule (calibkit.io.table_columns), and what two readings fit is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from calibkit.io import FileFormatError, load_scores

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


@pytest.fixture
def frame():
    z = np.random.default_rng(0).normal(size=(30, 3))
    df = pd.DataFrame(z, columns=["cat", "dog", "bird"])
    df["labels"] = np.arange(30) % 3
    return df


def _read(path):
    return load_scores(path)


def test_a_plain_table_reads_its_classes_in_file_order(tmp_path, frame):
    frame.to_csv(tmp_path / "a.csv", index=False)
    frame.to_parquet(tmp_path / "a.parquet", index=False)
    for name in ("a.csv", "a.parquet"):
        z, y = _read(tmp_path / name)
        np.testing.assert_allclose(z, frame[["cat", "dog", "bird"]].to_numpy())
        assert (y == frame["labels"].to_numpy()).all()


def test_a_byte_order_mark_is_dropped(tmp_path, frame):
    (tmp_path / "bom.csv").write_text(frame.to_csv(index=False), encoding="utf-8-sig")
    z, y = _read(tmp_path / "bom.csv")
    assert z.shape == (30, 3) and len(y) == 30


@pytest.mark.parametrize(
    ("write", "says"),
    [
        (
            lambda df, p: df.to_csv(p / "t.csv"),
            r"an unnamed column \(column 1\) looks like a row index",
        ),
        (lambda df, p: df.rename_axis("index").to_csv(p / "t.csv"), "'index' looks like a row"),
        (lambda df, p: df.to_csv(p / "t.csv", index=False, sep=";"), "separated by semicolons"),
        (lambda df, p: df.to_csv(p / "t.csv", index=False, sep="\t"), "separated by tabs"),
        (
            lambda df, p: df.assign(label=df["labels"]).to_csv(p / "t.csv", index=False),
            "two label-like columns, 'labels' and 'label'",
        ),
        (
            lambda df, p: df.iloc[[2, 0, 1]].to_parquet(p / "t.parquet"),
            "'__index_level_0__' is the pandas index",
        ),
        (
            lambda df, p: df.set_index(
                pd.Index(np.random.default_rng(1).permutation(30), name="row")
            ).to_parquet(p / "t.parquet"),
            "'row' is the pandas index",
        ),
        (
            lambda df, p: (p / "t.csv").write_text(df.to_csv(index=False).replace("0.", "x.", 1)),
            "row 2, column 'cat'",
        ),
        # issue 53 §3: a named index, a table without a header, malformed CSV
        (
            lambda df, p: df.rename_axis("sample_id").to_csv(p / "t.csv"),
            "column 'sample_id' holds the row numbers",
        ),
        (
            lambda df, p: df.set_index(pd.Index(np.arange(1, 31), name="n")).to_csv(p / "t.csv"),
            "column 'n' holds the row numbers",
        ),
        (
            lambda df, p: df.to_csv(p / "t.csv", index=False, header=False),
            "the CSV has no header",
        ),
        (
            lambda df, p: (p / "t.csv").write_text("cat,dog,labels\n" + "1" * 140_000 + ",2,0\n"),
            "not a readable CSV file",
        ),
        (
            lambda df, p: (p / "t.csv").write_text('cat,dog,labels\n"1,2,0\n'),
            "not a readable CSV file",
        ),
    ],
)
def test_ambiguous_tables_are_refused_in_one_line(tmp_path, frame, write, says):
    write(frame, tmp_path)
    path = next(tmp_path.glob("t.*"))
    with pytest.raises(FileFormatError, match=says) as err:
        _read(path)
    assert "\n" not in str(err.value)


def test_the_command_line_refuses_a_pandas_index_without_a_traceback(tmp_path, frame, capsys):
    from tests.test_cli import run

    frame.to_csv(tmp_path / "t.csv")
    code, out, err = run(["evaluate", str(tmp_path / "t.csv")], capsys)
    assert code == 2 and out == "" and "row index" in err and len(err.splitlines()) == 1


def test_a_header_of_pandas_default_column_names_is_a_header(tmp_path):
    """``pd.DataFrame(logits).to_csv(index=False)`` writes the header 0,1,...,K-1: a header,
    not a first row of numbers."""
    z = np.random.default_rng(0).normal(size=(30, 3))
    pd.DataFrame(z).to_csv(tmp_path / "s.csv", index=False)
    scores, labels = load_scores(tmp_path / "s.csv", need_labels=False)
    assert scores.shape == (30, 3) and labels is None


def test_a_logits_key_on_a_table_is_refused(tmp_path, frame):
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(FileFormatError, match="a table has no array 'scores'"):
        load_scores(tmp_path / "t.csv", logits_key="scores")


def test_apply_refuses_a_headerless_table_rather_than_drop_a_row(tmp_path, capsys):
    """Issue 53 §3: ``apply`` on 300 rows without a header wrote 299 rows."""
    from tests.test_cli import run, run_ok

    z = np.random.default_rng(0).normal(size=(300, 3))
    y = np.arange(300) % 3
    np.savez(tmp_path / "val.npz", logits=z, labels=y)
    run_ok(
        [
            "fit",
            "--method",
            "ts",
            "--val",
            str(tmp_path / "val.npz"),
            "-o",
            str(tmp_path / "t.calib"),
        ],
        capsys,
    )
    pd.DataFrame(z).to_csv(tmp_path / "s.csv", index=False, header=False)
    code, _, err = run(
        [
            "apply",
            str(tmp_path / "t.calib"),
            str(tmp_path / "s.csv"),
            "-o",
            str(tmp_path / "o.npz"),
        ],
        capsys,
    )
    assert code == 2 and "no header" in err and not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize(
    ("column", "says"),
    [
        (
            np.array(["a", "b", "c"] * 10, dtype=object),
            "column 'a' holds object values, not numbers",
        ),
        (
            pd.date_range("2020-01-01", periods=30).to_numpy(),
            "column 'a' holds datetime64",
        ),
        (np.full(30, 2**63 + 5, dtype=np.uint64), "value 9223372036854775813 does not fit"),
    ],
)
def test_calibkit_checks_a_column_before_torch_sees_it(tmp_path, capsys, column, says):
    """Issue 53 §4: text, dates and unsigned integers past int64 are named by calibkit in
    one line (torch said "can't convert np.ndarray of type numpy.object_", or wrapped uint64
    labels to "found -9223372036854775801")."""
    from tests.test_cli import run

    z = np.random.default_rng(0).normal(size=(30, 3))
    df = pd.DataFrame(z, columns=["a", "b", "c"])
    if column.dtype.kind == "u":
        df["labels"] = column
    else:
        df["labels"] = np.arange(30) % 3
        df["a"] = column
    df.to_parquet(tmp_path / "t.parquet", index=False)
    code, out, err = run(["evaluate", str(tmp_path / "t.parquet")], capsys)
    assert code == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1, err


def test_an_ordinary_parquet_file_prints_no_torch_warning(tmp_path, frame, capsys):
    import warnings

    from tests.test_cli import run_ok

    frame.to_parquet(tmp_path / "t.parquet", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "NumPy array is not writable" would raise
        run_ok(["evaluate", str(tmp_path / "t.parquet")], capsys)
