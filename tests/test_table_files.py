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
        (lambda df, p: df.to_csv(p / "t.csv"), "an unnamed first column looks like a row index"),
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
