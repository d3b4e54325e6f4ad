"""File writing: atomic, and with the permissions any new file of the user's gets."""

import os
import stat

import numpy as np
import pytest

from calibkit._outputs import save_npz, write_text


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_written_files_honour_the_umask(tmp_path, mask):
    """Issue 11.8: mkstemp's 0600 used to leak into every file calibkit wrote."""
    old = os.umask(mask)
    try:
        text = write_text(tmp_path / "report.md", "x")
        arrays = save_npz(tmp_path / "logits.npz", logits=np.zeros((2, 3)))
    finally:
        os.umask(old)
    for path in (text, arrays):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_write_section_replaces_its_block_and_keeps_what_people_wrote(tmp_path):
    from calibkit._outputs import write_section

    doc = tmp_path / "real.md"
    write_section(doc, "study", "first")  # a missing file is created
    assert doc.read_text() == "<!-- calibkit:study -->\nfirst\n<!-- /calibkit:study -->\n"
    doc.write_text("# Title\n\nby hand\n\n" + doc.read_text() + "\nafter, by hand\n")
    write_section(doc, "other", "appended")
    write_section(doc, "study", "second\n")
    text = doc.read_text()
    assert text.startswith("# Title\n\nby hand\n\n<!-- calibkit:study -->\nsecond\n<!-- /")
    assert "first" not in text and "\nafter, by hand\n" in text
    assert text.rstrip().endswith("<!-- calibkit:other -->\nappended\n<!-- /calibkit:other -->")


@pytest.mark.parametrize(
    "name",
    ["x --><script>alert(1)</script><!--", "a--!>b", "<!-- nested", "end-", "--", "é—-->"],
)
def test_a_section_name_cannot_close_its_markers_comment(tmp_path, name):
    """Issue 65 §2: a spec name holding ``-->`` closed the HTML comment around the --doc
    markers and put a live ``<script>`` into the Markdown; the name is written encoded, the
    file parses as the two comments and the section alone, and rewriting finds it again."""
    from markdown_it import MarkdownIt

    from calibkit._outputs import write_section

    doc = tmp_path / "real.md"
    write_section(doc, name, "body")
    write_section(doc, name, "body again")
    text = doc.read_text()
    assert text.count("<!--") == 2 and text.count("-->") == 2 and "body again" in text
    assert "body\n" not in text and "<script" not in text
    lines = text.splitlines()
    assert lines[1] == "body again" and all("--" not in line[4:-3] for line in (lines[0], lines[2]))
    html = MarkdownIt().render(text)
    assert "<script" not in html and html.count("<!--") == 2


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("dup.csv", b"c0,c0,labels\n1,2,0\n3,1,1\n", "names column 'c0' more than once"),
        ("latin.csv", b"c0,c\xe91,labels\n1,2,0\n", r"not UTF-8 text \(byte 4\)"),
        ("empty.pt", b"", r"not a readable torch file \(empty or truncated\)"),
    ],
)
def test_files_that_would_read_wrongly_are_refused_naming_them(tmp_path, name, content, message):
    from calibkit.io import FileFormatError, load_scores

    (tmp_path / name).write_bytes(content)
    with pytest.raises(FileFormatError, match=message) as err:
        load_scores(tmp_path / name)
    assert str(err.value).startswith(str(tmp_path / name))


def test_bfloat16_tensors_are_read_exactly_as_float32(tmp_path):
    import torch

    from calibkit.io import load_scores

    z = torch.randn(20, 4).bfloat16()
    torch.save({"logits": z, "labels": torch.arange(20) % 4}, tmp_path / "bf.pt")
    scores, labels = load_scores(tmp_path / "bf.pt")
    assert scores.dtype == np.float32 and np.array_equal(scores, z.float().numpy())
    assert labels.tolist() == (torch.arange(20) % 4).tolist()


def test_a_full_disk_under_torch_save_names_the_users_file(tmp_path, monkeypatch):
    """Issue 41 §4: torch.save onto a full disk raised RuntimeError('unexpected pos') with
    no errno; atomic_write reports it as 'No space left on device' naming the user's path,
    and leaves no temporary file."""
    import errno
    import shutil

    from calibkit._outputs import atomic_write

    def write(tmp):
        raise RuntimeError("[enforce fail at inline_container.cc] . unexpected pos 64")

    full = shutil.disk_usage(tmp_path)._replace(free=0)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: full)
    with pytest.raises(OSError) as err:
        atomic_write(tmp_path / "checkpoint.pt", write)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "checkpoint.pt")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="unexpected pos"):  # not full: the error as it was
        atomic_write(tmp_path / "checkpoint.pt", write)


def test_several_files_are_written_all_or_none(tmp_path, monkeypatch):
    """Issue 41 §7: a report onto a full disk left a partial folder and named no file."""
    import errno

    from calibkit import _outputs as cio

    out = tmp_path / "report"
    files = {out / "figures" / "a.png": b"png", out / "report.md": "md", out / "report.html": "x"}
    real, calls = cio.os.fdopen, {"n": 0}

    def full(fd, mode):
        calls["n"] += 1
        if calls["n"] == 3:
            os.close(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, mode)

    monkeypatch.setattr(cio.os, "fdopen", full)
    with pytest.raises(OSError) as err:
        cio.write_files(files, out)
    assert err.value.filename == str(out / "report.html") and err.value.errno == errno.ENOSPC
    assert not out.exists()  # nothing written, the folders made removed again
    monkeypatch.undo()
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "report.md").write_text("old")
    keep = tmp_path / "keep"
    cio.write_files({keep / "report.md": "new", keep / "b.md": "b"}, keep)
    assert (tmp_path / "keep" / "report.md").read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == ["b.md", "report.md"]


def test_a_read_only_folder_names_the_users_file_not_the_hidden_one(tmp_path, monkeypatch):
    """Issue 53: as root the folder's mode does not stop a write, so the refusal of a
    read-only folder is made by the OS call itself here (mkstemp's PermissionError)."""
    import tempfile

    from calibkit import _outputs as outputs

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".t.calib.abc123"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(PermissionError) as err:
        outputs.write_text(tmp_path / "t.calib", "x")
    assert err.value.filename == str(tmp_path / "t.calib")


def test_an_npz_header_declaring_terabytes_is_refused_before_allocating(tmp_path):
    """Issue 53 §6: a crafted .npy header inside an .npz declared 4 TB."""
    import io as bytes_io
    import zipfile

    from calibkit.io import FileFormatError, load_scores

    buf = bytes_io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": (1_000_000, 500_000)}
    np.lib.format.write_array_header_1_0(buf, header)
    buf.write(bytes(64))
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:
        z.writestr("logits.npy", buf.getvalue())
        z.writestr("labels.npy", buf.getvalue())
    with pytest.raises(FileFormatError, match=r"declares shape \(1000000, 500000\)"):
        load_scores(tmp_path / "huge.npz")


def swapped_while_writing(cio, tmp_path, monkeypatch, when: str) -> dict[str, object]:
    """Write a report's files (``cio.write_files``) while its ``figures`` folder is swapped
    for a link to a folder outside the report at the moment ``when``: right after the
    checks, or once the first temporary file is written and before any rename (issue 65
    §1). What came out: the error (None), the files outside, the hidden files left."""
    out, outside = tmp_path / "report", tmp_path / "outside"
    (out / "figures").mkdir(parents=True)
    outside.mkdir()

    def swap() -> None:
        if (out / "figures").is_symlink():  # swapped once
            return
        os.rename(out / "figures", out / "aside")
        os.symlink(outside, out / "figures")

    if when == "after the check":
        checked = cio.inside
        monkeypatch.setattr(cio, "inside", lambda *a: (checked(*a), swap())[0])
    else:
        real = cio.os.fdopen

        def fdopen(fd, mode):
            f = real(fd, mode)
            swap()
            return f

        monkeypatch.setattr(cio.os, "fdopen", fdopen)
    files = {out / "figures" / "a.png": b"png", out / "report.md": "md"}
    try:
        cio.write_files(files, out)
        error = None
    except (OSError, ValueError) as err:
        error = str(err)
    monkeypatch.undo()
    return {
        "error": error,
        "outside": sorted(p.name for p in outside.iterdir()),
        "hidden": sorted(p.name for p in out.rglob(".*") if not p.is_symlink()),
    }


@pytest.mark.parametrize("when", ["after the check", "after the first temporary file"])
def test_a_folder_swapped_for_a_link_while_writing_takes_no_write_outside(
    tmp_path, monkeypatch, when
):
    """Issue 65 §1: with the folder swapped for a link between the check and the write,
    report wrote its figures into the link's target (1 of 5 tries there; here, where the
    swap is placed, every time before the fix), or named a hidden temporary file and left
    it. Every create and rename is now made from a handle on the folder opened without
    following links: nothing lands outside, and nothing hidden is left."""
    from calibkit import _outputs as cio

    got = swapped_while_writing(cio, tmp_path, monkeypatch, when)
    assert got["outside"] == [] and got["hidden"] == [], got
    if got["error"] is not None:
        assert ".a.png" not in got["error"] and ".report.md" not in got["error"], got
