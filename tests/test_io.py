"""File writing: atomic, and with the permissions any new file of the user's gets."""

import os
import stat

import numpy as np
import pytest

from calibkit.io import save_npz, write_text


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
