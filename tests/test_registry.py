"""The spec grammar for lists of specs (issue 27 §2: --methods split at every comma)."""

from __future__ import annotations

import pytest


def test_a_list_of_specs_keeps_each_specs_own_settings():
    from calibkit.registry import SpecError, split_specs

    assert split_specs("dir-odir:folds=5,average_folds=true") == [
        "dir-odir:folds=5,average_folds=true"
    ]
    assert split_specs("ts, dir-odir:folds=5,average_folds=true,ts-grid") == [
        "ts", "dir-odir:folds=5,average_folds=true", "ts-grid"
    ]  # fmt: skip
    assert split_specs("dir-odir:lambdas=[0.01,1],mus=[1]") == ["dir-odir:lambdas=[0.01,1],mus=[1]"]
    with pytest.raises(SpecError, match="'folds=5' is a setting with no method before it"):
        split_specs("folds=5,ts")


def test_compare_methods_option_reads_settings_after_commas(tmp_path):
    import json

    import numpy as np
    from click.testing import CliRunner

    from calibkit.cli import cli

    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(400, 3)) * 3, rng.integers(0, 3, 400)
    np.savez(tmp_path / "f.npz", logits=z, labels=y)
    out = CliRunner().invoke(cli, ["compare", "--file", str(tmp_path / "f.npz"), "--split", "0.5",
                                   "--methods", "dir-odir:folds=3,lambdas=[1],mus=[1],ts",
                                   "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    names = [m for m in json.loads(out.output)["methods"]]
    assert any(n.startswith("dir-odir:") and "lambdas" in n for n in names) and "ts" in names
    assert not any(n.startswith("lambdas") or n.startswith("mus") for n in names)
    table = CliRunner().invoke(cli, ["compare", "--file", str(tmp_path / "f.npz"), "--split",
                                     "0.5", "--methods", "ts", "--seeds", "2"])  # fmt: skip
    assert table.exit_code == 0 and "ece (%) ± std" in table.output
    assert "± std over the splits" in table.output
