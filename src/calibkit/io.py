"""Read logits and labels from the files users already have; write results atomically.

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

import contextlib
import csv
import errno
import os
import shutil
import stat
import tempfile
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._docs import Described, documented

__all__ = [
    "LABEL_NAMES",
    "SCORE_EXTENSIONS",
    "FileFormatError",
    "atomic_write",
    "check_distinct_splits",
    "check_output",
    "check_writable",
    "file_lock",
    "has_both_splits",
    "load_scores",
    "load_split",
    "read_arrays",
    "save_npz",
    "split_keys",
    "table_columns",
    "write_files",
    "write_section",
    "write_text",
]

#: the parameters the score readers share, described once for their docstrings
_FILE_PARAMETERS: dict[str, Described] = {
    "path": ("str or PathLike", "A scores file: .npz, .npy, .csv, .parquet, .pt or .pth."),
}

SCORE_EXTENSIONS = (".npz", ".npy", ".csv", ".parquet", ".pt", ".pth")


class FileFormatError(ValueError):
    """A file that cannot be read as logits and labels (one-line message)."""


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
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
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
            rows = list(csv.reader(f))
    except UnicodeDecodeError as err:
        raise FileFormatError(f"{path}: not UTF-8 text (byte {err.start})") from None
    if not rows:
        raise FileFormatError(f"{path}: empty CSV file")
    header, body = rows[0], [r for r in rows[1:] if r]
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


def _missing_key(path: Path, key: str, what: str, keys: list[str], option: str) -> FileFormatError:
    return FileFormatError(
        f"{path}: no {what} array {key!r} (found: {', '.join(keys) or 'nothing'}); "
        f"name the right one with {option}"
    )


#: names of a label column found without --labels-key
LABEL_NAMES = ("labels", "label")
#: column names that pandas and spreadsheets give a row index
_INDEX_NAMES = ("", "index", "__index_level_0__", "level_0", "id")


def table_columns(
    path: Path, header: list[str], labels_key: str, need_labels: bool
) -> tuple[str | None, list[str]]:
    """(label column, class columns in file order) of a CSV or parquet table, by the rule
    the README's file formats give: the label column is ``labels_key`` (default
    ``labels``, which finds ``label`` too; a key given is looked for alone), and every
    other column is a class score. Ambiguous tables are
    refused in one line naming the columns: two label-like columns, and a column named like
    a row index (``""``, ``Unnamed: 0``, ``index``, ``__index_level_0__``, ...: pandas
    writes one unless ``index=False``), which would be read as class 0 and shift every
    class by one."""
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
        raise _missing_key(path, labels_key, "label column", header, "--labels-key")
    for c in header:
        if c.strip().lower() in _INDEX_NAMES or c.startswith("Unnamed: "):
            shown = repr(c) if c else "an unnamed first column"
            raise FileFormatError(
                f"{path}: column {shown} looks like a row index, not a class score; drop "
                "it (pandas: to_csv(index=False) or to_parquet(index=False))"
            )
    classes = [c for c in header if c != label_col]
    if not classes:
        raise FileFormatError(f"{path}: no class-score columns besides {label_col!r}")
    return label_col, classes


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
    scores_option=(
        "str, default '--logits-key'",
        "The option an error names for a missing scores array.",
    ),
)
def load_scores(
    path: str | os.PathLike,
    labels_path: str | os.PathLike | None = None,
    *,
    logits_key: str = "logits",
    labels_key: str = "labels",
    need_labels: bool = True,
    scores_option: str = "--logits-key",
) -> tuple[np.ndarray, np.ndarray | None]:
    """(scores (N, K), labels (N,)) from one file, or from a pair of ``.npy`` files; with
    ``need_labels=False`` a file without labels gives ``(scores, None)``.

    For CSV and parquet the label column is ``labels_key`` (or ``label``) and every other
    column is a class score, in file order. ``scores_option`` names the option that picks
    the scores array in the error for a missing one.
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
        label_col, classes = table_columns(path, header, labels_key, need_labels)
        labels = None if label_col is None else arrays[label_col]
        return np.stack([arrays[c] for c in classes], 1), labels
    keys = sorted(arrays)
    if logits_key not in arrays:
        raise _missing_key(path, logits_key, "scores", keys, scores_option)
    if labels_key not in arrays and need_labels:
        raise _missing_key(path, labels_key, "labels", keys, "--labels-key")
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
                "with --split"
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
    """(scores, labels) of one split (keys from :func:`split_keys`)."""
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
            "measures nothing; pass --split 0.5 to calibrate on half and test on the rest"
        )


def _umask() -> int:
    """The process's umask, read without changing it where the OS allows (Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting it, then put it back at once
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Any, *, suffix: str = "") -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``path`` only once it is complete."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(
            f"cannot write {path}: a part of {path.parent} is a file, not a folder"
        ) from None
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=suffix or path.suffix
    )
    os.close(fd)
    try:
        write(tmp)
        # mkstemp creates 0600; a rewritten file keeps its mode (a user's 0600 stays private),
        # a new one gets the mode any new file would (umask)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as err:  # name the user's file, not the hidden temporary one
        Path(tmp).unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
    except RuntimeError:  # torch.save on a full disk: "unexpected pos ...", no errno
        Path(tmp).unlink(missing_ok=True)
        if shutil.disk_usage(path.parent).free < 1 << 20:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
        raise
    except Exception as err:  # a library's own error (safetensors) that names the hidden file
        Path(tmp).unlink(missing_ok=True)
        if tmp in str(err):
            raise OSError(errno.EIO, str(err).replace(tmp, str(path)), str(path)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_files(files: dict[Path, bytes | str]) -> None:
    """Write several files as one: each to a hidden temporary file beside it first, and
    only when every one is written are they all moved into place. A failure (a full disk)
    leaves none of them changed and no temporary file, and names the file that failed;
    folders this call created are removed again."""
    made: list[Path] = []
    written: list[tuple[str, Path]] = []
    at = next(iter(files), Path("."))
    try:
        for path, content in files.items():
            for parent in reversed([path.parent, *path.parent.parents]):
                if not parent.exists():
                    at = parent
                    parent.mkdir()
                    made.append(parent)
            at = path
            data = content.encode() if isinstance(content, str) else content
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            written.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~_umask())
    except OSError as err:
        for tmp, _ in written:
            Path(tmp).unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise OSError(err.errno, err.strerror or str(err), str(at)) from None
    for tmp, path in written:
        os.replace(tmp, path)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_output(
    output: str | os.PathLike | None,
    inputs: Any = (),
    *,
    option: str = "-o",
) -> Path | None:
    """The one rule for every command that writes: ``output`` may not be empty, and may not
    be, or lie inside, any of ``inputs`` (the files and folders the command reads). Paths
    are compared resolved (links followed) and by device and inode (a hard link to an input
    is that input). Returns ``output`` as a :class:`~pathlib.Path` (None stays None); a
    one-line ``ValueError`` naming the option and the input otherwise. Checked before any
    work, so that nothing is read, trained or overwritten first.

    >>> check_output("a.calib", ["a.npz"])
    PosixPath('a.calib')
    >>> check_output("a.npz", ["a.npz"])
    Traceback (most recent call last):
    ...
    ValueError: -o a.npz is an input of this command: choose another path (nothing was written)
    """
    if output is None:
        return None
    if not str(output).strip():
        raise ValueError(f"{option}: an empty path; name the file or folder to write")
    out = Path(output)
    resolved = out.expanduser().resolve()
    same = _identity(resolved)
    for given in inputs:
        if given is None or not str(given).strip():
            continue
        source = Path(given).expanduser().resolve()
        if resolved == source or (same is not None and same == _identity(source)):
            raise ValueError(
                f"{option} {output} is an input of this command: choose another path "
                "(nothing was written)"
            )
        if source.is_dir() and resolved.is_relative_to(source):
            raise ValueError(
                f"{option} {output} lies inside the input folder {given}: write it elsewhere "
                "(nothing was written)"
            )
    return out


def check_writable(folder: str | os.PathLike) -> Path:
    """Create ``folder`` if needed and make sure a file can be written there, before any
    long work whose results would go there; a one-line ``ValueError`` otherwise."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except (FileExistsError, NotADirectoryError):
        raise ValueError(
            f"cannot write to {folder}: a part of it is a file, not a folder"
        ) from None
    except OSError as err:
        raise ValueError(f"cannot write to {folder}: {err.strerror}") from None
    return folder


def save_npz(path: str | os.PathLike, **arrays: Any) -> Path:
    """Write arrays to a ``.npz`` atomically (a killed process leaves the old file or none)."""
    return atomic_write(
        path,
        lambda tmp: np.savez(tmp, **{k: np.asarray(v) for k, v in arrays.items()}),
        suffix=".npz",
    )


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_section(path: str | os.PathLike, name: str, text: str) -> Path:
    """Replace the generated section ``name`` of the text file ``path`` (the lines between
    ``<!-- calibkit:name -->`` and ``<!-- /calibkit:name -->``) with ``text``, atomically;
    a file without the section gets it appended, a missing file is created. What lies
    outside the markers, written by people, is kept."""
    path = Path(path)
    start, end = f"<!-- calibkit:{name} -->", f"<!-- /calibkit:{name} -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if start in old and end in old.split(start, 1)[1]:
        before, rest = old.split(start, 1)
        new = before + block + rest.split(end, 1)[1]
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + block + "\n"
    return write_text(path, new)


@contextmanager
def file_lock(path: str | os.PathLike, *, wait: bool = True) -> Iterator[IO[str]]:
    """Hold an exclusive ``flock`` on ``path`` (created, with its folder) for the block and
    yield the open file (``a+``: its text is kept). With ``wait=False`` a lock another
    process holds raises :class:`BlockingIOError` at once instead of waiting."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
