"""Writing outputs without losing an input: every file calibkit writes is written
atomically (a temporary file beside it, then a rename: a killed process leaves the old file
or none), an output folder that is or holds an input is refused before anything is written
(:func:`check_output`), and a run folder is held by a lock while it is written.

A folder may be shared with someone hostile (a group-writable ``/tmp`` subfolder): calibkit
never writes through a symbolic link it did not make. A file it writes, a lock it takes and
every folder below the output folder the user named (:func:`inside`) is refused, naming the
link, where a link stands; a lock file is opened with ``O_NOFOLLOW`` and must be a plain
file of one link. The folder the user named may itself be a link: that one the user made."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._escape import comment_text


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


class LinkRefused(ValueError):
    """A symbolic link stands where calibkit would write (one-line message naming it)."""


def refuse_link(path: str | os.PathLike) -> Path:
    """``path``, refused with :class:`LinkRefused` where it is a symbolic link (dangling or
    not): calibkit writes neither through nor over a link it did not make."""
    path = Path(path)
    if path.is_symlink():
        raise LinkRefused(
            f"{path} is a symbolic link (to {os.readlink(path)}): calibkit does not write "
            "through links it did not make; remove it or choose another folder (nothing was "
            "written)"
        )
    return path


def inside(root: str | os.PathLike, *parts: str | os.PathLike) -> Path:
    """``root/parts…``, where none of the parts that exist below ``root`` is a symbolic link
    (:class:`LinkRefused` otherwise): the path calibkit writes to inside an output folder the
    user named (``root`` itself may be a link the user made).

    >>> inside("out", "figures", "a.png")
    PosixPath('out/figures/a.png')
    """
    path = Path(root)
    for part in Path(*parts).parts if parts else ():
        if part in ("..", "/"):
            raise ValueError(f"{root}: {Path(*parts)} leaves the output folder")
        path = refuse_link(path / part)
    return path


def atomic_write(path: str | os.PathLike, write: Any, *, suffix: str = "") -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``path`` only once it is complete.
    A symbolic link at ``path`` is refused (:func:`refuse_link`), not replaced."""
    path = refuse_link(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(
            f"cannot write {path}: a part of {path.parent} is a file, not a folder"
        ) from None
    try:
        fd, tmp = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=suffix or path.suffix
        )
    except OSError as err:  # a read-only folder: name the user's file, not the hidden one
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_below(fd: int, name: str, made: list[tuple[int, str]], shown: Path) -> int:
    """The folder ``name`` in the folder open as ``fd``, made where missing (recorded in
    ``made``), opened without following a link: a link swapped in after any check is refused
    by the kernel (``ELOOP``/``ENOTDIR``), never followed."""
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
        made.append((fd, name))
    except FileExistsError:
        pass
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LinkRefused(
                f"{shown} is not a folder of its own (a symbolic link or a file): calibkit does "
                "not write through links it did not make (nothing was written)"
            ) from None
        raise


def write_files(files: dict[Path, bytes | str], root: str | os.PathLike) -> None:
    """Write several files, each a path inside the folder ``root`` (:func:`inside`), as
    one: each to a hidden temporary file beside it first, and only when every one is
    written are they all moved into place. A failure (a full disk) leaves none of them
    changed and no temporary file, and names the file that failed; folders this call
    created are removed again.

    Every create, rename and removal is made relative to a handle on its folder, opened
    once from ``root``'s handle without following links (``O_DIRECTORY | O_NOFOLLOW`` and
    ``dir_fd=``): a folder below ``root`` swapped for a link between a check and a write
    cannot take the write elsewhere (issue 65 §1; ``root`` itself is the user's choice and
    may be a link they made)."""
    for path in files:
        inside(root, Path(path).relative_to(root))
    root = Path(root)
    new_roots = [p for p in (root, *root.parents) if not p.exists()]  # removed on failure
    root.mkdir(parents=True, exist_ok=True)
    handles: dict[Path, int] = {Path("."): os.open(root, os.O_RDONLY | os.O_DIRECTORY)}
    made: list[tuple[int, str]] = []
    written: list[tuple[int, str, str, Path]] = []  # (folder, temporary, name, the user's path)
    at = root
    try:
        try:
            for path, content in files.items():
                at = path
                rel = Path(path).relative_to(root)
                folder = Path(".")
                for part in rel.parent.parts:
                    below = folder / part
                    if below not in handles:
                        handles[below] = _open_below(handles[folder], part, made, root / below)
                    folder = below
                fd = handles[folder]
                tmp = f".{rel.name}.{secrets.token_hex(6)}"
                out = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=fd
                )
                written.append((fd, tmp, rel.name, path))
                with os.fdopen(out, "wb") as f:
                    f.write(content.encode() if isinstance(content, str) else content)
            for fd, tmp, name, path in list(written):  # the renames, inside the cleanup
                at = path
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                written.remove((fd, tmp, name, path))
        except BaseException as err:
            for fd, tmp, _, _ in written:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
            for fd, name in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=fd)
            for folder in new_roots:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            if isinstance(err, OSError) and not isinstance(err, LinkRefused):
                raise OSError(err.errno, err.strerror or str(err), str(at)) from None
            raise
    finally:
        for fd in handles.values():
            os.close(fd)


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
    name = comment_text(name)  # a name holding "-->" cannot close the marker's comment
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
    yield the open file (its text is kept; never through a symbolic link, nor into a file
    with another name: a hard link). With ``wait=False`` a lock another
    process holds raises :class:`BlockingIOError` at once instead of waiting."""
    import fcntl

    path = refuse_link(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # never through a link planted after the check above
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            refuse_link(path)
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise LinkRefused(
            f"{path}: the lock file is not a plain file of its own (a hard link or a special "
            "file); remove it (nothing was written)"
        )
    with os.fdopen(fd, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
