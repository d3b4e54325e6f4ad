"""Read logits and labels from the files users already have (writing: :mod:`calibkit._outputs`).

Formats, by extension:

``.npz``
    arrays by key (default ``logits`` and ``labels``), loaded with ``allow_pickle=False``.
``.npy``
    a pair of files: scores, then labels.
``.csv`` / ``.parquet``
    one column per class plus a label column (default ``labels``; ``label`` also found);
    every other column is a class score, in file order (:func:`table_columns`). Refused in
    one line: two label-like columns, a column named like a row index (pandas writes one
    unless ``index=False``), a CSV separated by anything but commas. A UTF-8 byte-order
    mark is dropped. Parquet needs the ``parquet`` extra (pyarrow).
``.pt`` / ``.pth``
    a dict of tensors, read with ``torch.load(weights_only=True)``.

No user file is ever unpickled: a file that needs pickle gets an error naming the fix.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
import zipfile
from pathlib import Path

import numpy as np

from ._docs import Described, documented

__all__ = ["FileFormatError", "load_scores", "load_split"]

#: the parameters the score readers share, described once for their docstrings
_FILE_PARAMETERS: dict[str, Described] = {
    "path": ("str or PathLike", "A scores file: .npz, .npy, .csv, .parquet, .pt or .pth."),
}

SCORE_EXTENSIONS = (".npz", ".npy", ".csv", ".parquet", ".pt", ".pth")


class FileFormatError(ValueError):
    """A file that cannot be read as logits and labels (one-line message).

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.io import load_scores
    >>> path = getfixture("tmp_path") / "only_logits.npy"
    >>> np.save(path, np.zeros((4, 3)))
    >>> load_scores(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calibkit.io.FileFormatError: .../only_logits.npy: a .npy file holds one array; pass the ...
    """


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise FileFormatError(f"{path}: is a folder; pass a file ({', '.join(SCORE_EXTENSIONS)})")


def _pickle_error(path: Path) -> FileFormatError:
    return FileFormatError(
        f"{path}: holds Python objects that only pickle could load; calibkit never unpickles "
        "user files. Re-save plain numeric arrays (np.savez, or torch.save of a dict of tensors)"
    )


#: the first bytes of a zip (.npz) and a .npy file; anything else np.load would try to unpickle
_MAGIC = {".npz": b"PK", ".npy": b"\x93NUMPY"}


def _check_magic(path: Path, ext: str) -> None:
    """Tell a pickle apart from a file that is simply not a NumPy file (np.load calls both
    "pickled data")."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(_MAGIC[ext]):
        return
    if head[:1] == b"\x80":  # the pickle protocol marker
        raise _pickle_error(path)
    raise FileFormatError(f"{path}: not a {ext} file (it does not start as one); is it damaged?")


def read_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array in a ``.npz``, ``.pt``, ``.csv`` or ``.parquet`` file, by name."""
    path = Path(path)
    _check_exists(path)
    ext = path.suffix.lower()
    if ext == ".npz":
        _check_magic(path, ext)
        try:
            _check_npz_sizes(path)
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except FileFormatError:
            raise
        except ValueError as e:
            if "pickle" in str(e):
                raise _pickle_error(path) from None
            raise FileFormatError(f"{path}: not a readable .npz file ({e})") from None
        except (OSError, EOFError, zipfile.BadZipFile) as e:
            raise FileFormatError(f"{path}: not a readable .npz file ({e})") from None
    if ext in (".pt", ".pth"):
        return _read_torch(path)
    if ext == ".csv":
        return _read_csv(path)
    if ext == ".parquet":
        return _read_parquet(path)
    if ext == ".npy":
        return {"array": _read_npy(path)}
    raise FileFormatError(
        f"{path}: unknown extension {ext!r}; use one of {', '.join(SCORE_EXTENSIONS)}"
    )


def _check_npz_sizes(path: Path) -> None:
    """Refuse, before any allocation, an array whose header declares more bytes than its
    member of the archive holds (a crafted header can declare terabytes)."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                try:
                    fmt = np.lib.format
                    read = {(1, 0): fmt.read_array_header_1_0}.get(
                        fmt.read_magic(member), fmt.read_array_header_2_0
                    )
                    shape, _, dtype = read(member, max_header_size=10_000)
                except ValueError:
                    continue  # np.load names what is wrong with it
                declared = math.prod(shape) * dtype.itemsize
            if declared > info.file_size:
                raise FileFormatError(
                    f"{path}: array {info.filename[:-4]!r} declares shape {shape} "
                    f"({declared:,} bytes) but holds {info.file_size:,} bytes; the file is "
                    "damaged or crafted"
                )


def _read_npy(path: Path) -> np.ndarray:
    _check_magic(path, ".npy")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):
            raise _pickle_error(path) from None
        raise FileFormatError(f"{path}: not a readable .npy file ({e})") from None
    except (OSError, EOFError) as e:
        raise FileFormatError(f"{path}: not a readable .npy file ({e})") from None


def _read_torch(path: Path) -> dict[str, np.ndarray]:
    import pickle

    import torch

    try:
        with warnings.catch_warnings():  # torch warns about protocols before refusing a pickle
            warnings.simplefilter("ignore", UserWarning)
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise _pickle_error(path) from None
    except (RuntimeError, EOFError, OSError) as e:
        why = (str(e).splitlines() or ["empty or truncated"])[0] or "empty or truncated"
        raise FileFormatError(f"{path}: not a readable torch file ({why})") from None
    if not isinstance(obj, dict):
        raise FileFormatError(f"{path}: expected a dict of tensors, got a {type(obj).__name__}")
    for k, v in obj.items():
        if not isinstance(v, torch.Tensor):
            raise FileFormatError(
                f"{path}: key {k!r} holds a {type(v).__name__}, not a tensor; save a flat dict "
                "of tensors"
            )

    # bfloat16 and the float8 types have no NumPy type: widened to float32, which holds
    # every value of theirs exactly
    def narrow(v: torch.Tensor) -> bool:
        return v.is_floating_point() and v.dtype not in (
            torch.float16,
            torch.float32,
            torch.float64,
        )

    return {str(k): (v.float() if narrow(v) else v).detach().cpu().numpy() for k, v in obj.items()}


def _table_to_arrays(header: list[str], columns: list[np.ndarray]) -> dict[str, np.ndarray]:
    return {name: col for name, col in zip(header, columns, strict=True)} | {
        "__columns__": np.array(header)
    }


#: other separators a CSV header may use, named in the error that refuses them
_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    try:  # utf-8-sig: a byte-order mark (Excel writes one) is not part of the first name
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f, strict=True))
    except UnicodeDecodeError as err:
        raise FileFormatError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except csv.Error as err:  # an unclosed quote, a field past csv's size limit
        raise FileFormatError(f"{path}: not a readable CSV file ({err})") from None
    if not rows:
        raise FileFormatError(f"{path}: empty CSV file")
    header, body = rows[0], [r for r in rows[1:] if r]
    if all(_is_number(c) for c in header) and header != [str(i) for i in range(len(header))]:
        raise FileFormatError(
            f"{path}: the first row holds numbers ({', '.join(header[:3])}, ...), not column "
            "names: the CSV has no header; add one (the class columns, then 'labels'; "
            "pandas: to_csv(header=True, index=False)), so that no row is lost"
        )
    if len(header) == 1:
        for sep, name in _SEPARATORS.items():
            if sep in header[0]:
                raise FileFormatError(
                    f"{path}: the header is separated by {name}, not commas; write the CSV "
                    "with commas (pandas: to_csv(sep=','))"
                )
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise FileFormatError(f"{path}: the header names column {twice[0]!r} more than once")
    if not body:
        raise FileFormatError(f"{path}: CSV file has a header but no rows")
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise FileFormatError(
                f"{path}: row {i + 2} has {len(row)} columns, the header {len(header)}"
            )
    for j, name in enumerate(header):
        if not name.strip() and all(not row[j].strip() for row in body):
            raise FileFormatError(
                f"{path}: an unnamed column (column {j + 1}) holds no values (a comma at the "
                "end of every line?); remove it"
            )
    try:
        data = np.array(body, dtype=np.float64)
    except ValueError:
        i, j = next(
            (i, j) for i, row in enumerate(body) for j, v in enumerate(row) if not _is_number(v)
        )
        raise FileFormatError(
            f"{path}: row {i + 2}, column {header[j]!r}: {body[i][j]!r} is not a number"
        ) from None
    return _table_to_arrays(header, list(data.T))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_parquet(path: Path) -> dict[str, np.ndarray]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise FileFormatError(
            "reading .parquet needs pyarrow: pip install 'calibkit[parquet]'"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises its own types for corrupt files
        raise FileFormatError(f"{path}: not a readable parquet file ({e})") from None
    header = list(table.column_names)
    meta = table.schema.pandas_metadata or {}
    stored = [c for c in meta.get("index_columns", []) if isinstance(c, str)]
    if stored:  # a pandas index kept as a column (a range index is metadata only)
        raise FileFormatError(
            f"{path}: column {stored[0]!r} is the pandas index of the table, not a class "
            "score; write it with to_parquet(index=False)"
        )
    return _table_to_arrays(header, [table.column(c).to_numpy() for c in header])


def _missing_key(
    path: Path, key: str, what: str, keys: list[str], parameter: str
) -> FileFormatError:
    return FileFormatError(
        f"{path}: no {what} array {key!r} (found: {', '.join(keys) or 'nothing'}); "
        f"name the right one with {parameter}="
    )


#: names of a label column found without ``labels_key``
LABEL_NAMES = ("labels", "label")
#: column names that pandas and spreadsheets give a row index
_INDEX_NAMES = ("", "index", "__index_level_0__", "level_0", "id")


def table_columns(
    path: Path,
    header: list[str],
    labels_key: str,
    need_labels: bool,
    columns: dict[str, np.ndarray] | None = None,
) -> tuple[str | None, list[str]]:
    """(label column, class columns in file order) of a CSV or parquet table, by the rule
    the tour's file formats give (docs/tour.md): the label column is ``labels_key`` (default
    ``labels``, which finds ``label`` too; a key given is looked for alone), and every
    other column is a class score. Ambiguous tables are
    refused in one line naming the columns: two label-like columns, and a column named like
    a row index (``""``, ``Unnamed: 0``, ``index``, ``__index_level_0__``, ...: pandas
    writes one unless ``index=False``), which would be read as class 0 and shift every
    class by one. With the ``columns``' values, a first class column under any name (a named
    index: ``rename_axis("sample_id")``) whose values are the row numbers 0..N−1 or 1..N, in
    any order, is refused too: no class score is that."""
    present = [c for c in LABEL_NAMES if c in header]
    if len(present) > 1 and labels_key in LABEL_NAMES:
        raise FileFormatError(
            f"{path}: two label-like columns, {present[0]!r} and {present[1]!r}; keep one (the "
            "other would be read as a class score)"
        )
    if labels_key in header:
        label_col: str | None = labels_key
    elif labels_key == LABEL_NAMES[0] and present:  # the default finds `label` too
        label_col = present[0]
    else:
        label_col = None
    if label_col is None and need_labels:
        raise _missing_key(path, labels_key, "label column", header, "labels_key")
    for c in header:
        if c.strip().lower() in _INDEX_NAMES or c.startswith("Unnamed: "):
            shown = repr(c) if c else f"an unnamed column (column {header.index(c) + 1})"
            raise FileFormatError(
                f"{path}: column {shown} looks like a row index, not a class score; drop "
                "it (pandas: to_csv(index=False) or to_parquet(index=False))"
            )
    classes = [c for c in header if c != label_col]
    if not classes:
        raise FileFormatError(f"{path}: no class-score columns besides {label_col!r}")
    if columns is not None and len(classes) > 1 and _row_numbers(columns[classes[0]]):
        raise FileFormatError(
            f"{path}: column {classes[0]!r} holds the row numbers 0..N-1 (or 1..N), so it is a "
            "row index, not a class score; drop it (pandas: to_csv(index=False) or "
            "to_parquet(index=False))"
        )
    return label_col, classes


def _row_numbers(values: np.ndarray) -> bool:
    """Whether ``values`` are the row numbers 0..N−1 or 1..N in some order (N >= 3)."""
    v = np.asarray(values)
    if v.ndim != 1 or v.size < 3 or v.dtype.kind not in "iuf":
        return False
    if v.dtype.kind == "f" and not np.array_equal(v, np.round(v)):
        return False
    ranks = np.sort(v.astype(np.float64))
    return bool(
        np.array_equal(ranks, np.arange(v.size)) or np.array_equal(ranks, np.arange(1, v.size + 1))
    )


@documented(
    _FILE_PARAMETERS,
    "tuple: (scores (N, K) ndarray, labels (N,) ndarray or None).",
    labels_path=(
        "str, PathLike or None, default None",
        "A .npy of labels beside a .npy of scores.",
    ),
    logits_key=("str, default 'logits'", "The scores' array in an .npz or .pt file."),
    labels_key=("str, default 'labels'", "The labels' array, or a table's label column."),
    need_labels=("bool, default True", "False: a file without labels gives (scores, None)."),
    scores_parameter=(
        "str, default 'logits_key'",
        "The parameter an error names for a missing scores array.",
    ),
)
def load_scores(
    path: str | os.PathLike,
    labels_path: str | os.PathLike | None = None,
    *,
    logits_key: str = "logits",
    labels_key: str = "labels",
    need_labels: bool = True,
    scores_parameter: str = "logits_key",
) -> tuple[np.ndarray, np.ndarray | None]:
    r"""(scores (N, K), labels (N,)) from one file, or from a pair of ``.npy`` files; with
    ``need_labels=False`` a file without labels gives ``(scores, None)``.

    For CSV and parquet the label column is ``labels_key`` (or ``label``) and every other
    column is a class score, in file order. ``scores_parameter`` names the parameter that
    picks the scores array in the error for a missing one (the command line names its
    option).

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.io import load_scores
    >>> folder = getfixture("tmp_path")
    >>> logits, labels = np.array([[2.0, 0.0], [0.5, 1.5], [1.0, 3.0]]), np.array([0, 1, 1])
    >>> np.savez(folder / "test.npz", logits=logits, labels=labels)
    >>> z, y = load_scores(folder / "test.npz")
    >>> z.shape, y
    ((3, 2), array([0, 1, 1]))
    >>> _ = (folder / "test.csv").write_text("label,cat,dog\n0,2.0,0.0\n1,0.5,1.5\n")
    >>> z, y = load_scores(folder / "test.csv")  # the label column, then a column per class
    >>> z, y  # a table's columns are read as floats; the metrics take whole-number labels
    (array([[2. , 0. ],
           [0.5, 1.5]]), array([0., 1.]))
    """
    path = Path(path)
    if path.suffix.lower() == ".npy" or labels_path is not None:
        if labels_path is None:
            if not need_labels:
                _check_exists(path)
                return _read_npy(path), None
            raise FileFormatError(f"{path}: a .npy file holds one array; pass the labels .npy too")
        _check_exists(path)
        _check_exists(Path(labels_path))
        return _read_npy(path), _read_npy(Path(labels_path))
    arrays = read_arrays(path)
    if "__columns__" in arrays:
        header = [str(c) for c in arrays.pop("__columns__")]
        if logits_key != "logits":  # a table's scores are its columns, not an array by name
            raise FileFormatError(
                f"{path}: a table has no array {logits_key!r}: its class scores are every "
                f"column but the label column ({', '.join(header)}); drop {scores_parameter}="
            )
        label_col, classes = table_columns(path, header, labels_key, need_labels, arrays)
        for c in [*classes, *([label_col] if label_col else [])]:
            if arrays[c].dtype.kind not in "biuf":  # text, dates, decimals: named here
                raise FileFormatError(
                    f"{path}: column {c!r} holds {arrays[c].dtype} values, not numbers"
                )
        labels = None if label_col is None else arrays[label_col]
        return np.stack([arrays[c] for c in classes], 1), labels
    keys = sorted(arrays)
    if logits_key not in arrays:
        raise _missing_key(path, logits_key, "scores", keys, scores_parameter)
    if labels_key not in arrays and need_labels:
        raise _missing_key(path, labels_key, "labels", keys, "labels_key")
    return arrays[logits_key], arrays.get(labels_key)


def split_keys(
    path: str | os.PathLike,
    split: str,
    logits_key: str | None = None,
    labels_key: str | None = None,
) -> dict[str, str]:
    """The keys of one split in ``path``: ``logits_<split>``/``labels_<split>`` when the file
    has them (the layout of published logits files), else ``logits``/``labels``; explicit
    keys win. Returned as ``load_scores`` keyword arguments."""
    if logits_key is None or labels_key is None:
        keys = (
            set(read_arrays(path))
            if Path(path).suffix.lower() in (".npz", ".pt", ".pth")
            else set()
        )
        splits = sorted(k.removeprefix("logits_") for k in keys if k.startswith("logits_"))
        if logits_key is None and splits and f"logits_{split}" not in keys and "logits" not in keys:
            raise FileFormatError(
                f"{path}: no split {split!r} (the file has: {', '.join(splits)}); choose one "
                "with split="
            )
        logits_key = logits_key or (f"logits_{split}" if f"logits_{split}" in keys else "logits")
        labels_key = labels_key or (f"labels_{split}" if f"labels_{split}" in keys else "labels")
    return {"logits_key": logits_key, "labels_key": labels_key}


@documented(
    _FILE_PARAMETERS,
    "tuple: (scores (N, K) ndarray, labels (N,) ndarray).",
    split=("str", "'val' or 'test' (keys ``logits_val`` / ``labels_val``, ...)."),
    logits_key=("str or None, default None", "The scores' array; None: the split's."),
    labels_key=("str or None, default None", "The labels' array; None: the split's."),
)
def load_split(
    path: str | os.PathLike,
    split: str,
    *,
    logits_key: str | None = None,
    labels_key: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, labels) of one split (keys from :func:`split_keys`).

    Examples
    --------
    The file ``calibkit demo`` writes holds both splits:

    >>> import numpy as np
    >>> from calibkit.data import demo_logits
    >>> from calibkit.io import load_split
    >>> path = getfixture("tmp_path") / "demo.npz"
    >>> np.savez(path, **demo_logits())
    >>> z, y = load_split(path, "val")  # logits_val and labels_val
    >>> z.shape, y.shape
    ((300, 10), (300,))
    """
    return load_scores(path, **split_keys(path, split, logits_key, labels_key))


def has_both_splits(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a calibration split and a test split (``logits_val``,
    ``logits_test``)."""
    val, test = split_keys(path, "val"), split_keys(path, "test")
    return val["logits_key"] == "logits_val" and test["logits_key"] == "logits_test"


def check_distinct_splits(val: str | os.PathLike, test: str | os.PathLike) -> None:
    """Refuse a calibration split that is the test split (the same rows of the same file):
    every number would be measured in-sample."""
    keys = split_keys(val, "val")
    if Path(val).resolve() == Path(test).resolve() and keys == split_keys(test, "test"):
        raise FileFormatError(
            f"{val} holds one split ({keys['logits_key']}): fitting and testing on the same rows "
            "measures nothing; pass fraction=0.5 to calibrate on half and test on the rest"
        )
