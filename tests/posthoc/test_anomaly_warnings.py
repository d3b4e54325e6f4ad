"""Issue 30.1: the checks bench runs (not converged, insane temperature, accuracy lost,
worse ECE or NLL) run on every fit: Python ``.fit`` (a CalibrationWarning users can filter,
and ``fit_report_.anomalies``), ``calibkit fit``, ``calibkit calibrate`` / ``train --stage2``
(on the test split) and ``compare``; the CLI prints each warning as one line."""

from __future__ import annotations

import json
import warnings

import click
import numpy as np
import pytest

from calibkit import posthoc
from calibkit.cli import cli, main
from calibkit.posthoc._anomalies import CalibrationWarning
from calibkit.posthoc._compare import compare_methods
from calibkit.training import TrainConfig, train


def run(argv, capsys):
    """(exit code, stdout, stderr) of a command that may succeed."""
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


#: a temperature bounded below the sane range: not converged (it hits the bound), insane,
#: and NLL several times worse, on any network
BAD = "ts:t_max=0.04"


def test_a_fit_that_went_wrong_warns_once_and_keeps_what_it_found(real_logits, tmp_path):
    z, y = real_logits[:2]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        cal = posthoc.create(BAD).fit(z, y)
    flagged = [w for w in said if w.category is CalibrationWarning]
    assert len(flagged) == 1 and flagged[0].filename == __file__  # points at the caller
    assert str(flagged[0].message).startswith(
        "ts: not-converged on the calibration split (the fit did not converge); temperature "
        "on the calibration split (T = 0.04 outside (0.05, 20.0)); worse-nll on the "
        "calibration split (NLL 0.3002 → "
    )
    assert [a["kind"] for a in cal.fit_report_.anomalies] == [
        "not-converged",
        "temperature",
        "worse-nll",
    ]
    assert str(cal.fit_report_).endswith(
        "flagged on the calibration split: not-converged, temperature, worse-nll"
    )
    back = posthoc.load(cal.save(tmp_path / "bad.calib"))
    assert back.fit_report_.anomalies == cal.fit_report_.anomalies
    with warnings.catch_warnings():  # filtered as any warning: here made fatal
        warnings.simplefilter("error", CalibrationWarning)
        with pytest.raises(CalibrationWarning, match="ts: not-converged"):
            posthoc.create(BAD).fit(z, y)


@pytest.mark.parametrize("spec", ["ts", "vector", "hist-binning", "isotonic"])
def test_a_good_fit_is_silent(real_logits, spec):
    z, y = real_logits[:2]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        cal = posthoc.create(spec).fit(z, y)
    assert cal.fit_report_.anomalies == []


def test_fit_command_prints_one_warning_line_and_the_json_field(real_logits, tmp_path, capsys):
    z, y = real_logits[:2]
    np.savez(tmp_path / "val.npz", logits_val=z, labels_val=y)
    argv = ["fit", "--method", BAD, "--val", str(tmp_path / "val.npz"), "-o", str(tmp_path / "c")]
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0 and err.count("\n") == 1 and err.startswith("warning: ts: not-converged")
    found = json.loads(out)["fit"]["anomalies"]
    assert {a["kind"] for a in found} == {"not-converged", "temperature", "worse-nll"}
    assert {a["split"] for a in found} == {"calibration"}
    code, out, err = run(argv, capsys)
    assert code == 0 and "flagged on the calibration split" in out and err.startswith("warning:")


def test_calibrate_checks_the_test_split_and_records_it(tmp_path, capsys):
    train(TrainConfig(epochs=1), tmp_path / "run")
    code, out, err = run(
        ["calibrate", BAD, str(tmp_path / "run"), "-o", str(tmp_path / "o"), "--json"], capsys
    )
    assert code == 0 and err.count("warning: ts:") == 2, err  # the fit's split, then test
    test = [a for a in json.loads(out)["fit"]["anomalies"] if a["split"] == "test"]
    assert {a["kind"] for a in test} >= {"not-converged", "temperature"}
    record = json.loads((tmp_path / "o" / "run.json").read_text())["calibration"]
    assert record["anomalies"] == json.loads(out)["fit"]["anomalies"]
    code, out, err = run(
        ["calibrate", "ts", str(tmp_path / "run"), "-o", str(tmp_path / "g")], capsys
    )
    assert code == 0 and err == ""


def test_compare_flags_on_its_test_split_and_does_not_repeat_the_fit_warning(real_logits):
    zv, yv, zt, yt = real_logits
    out = compare_methods((zv, yv), (zt, yt), [BAD, "ts"], bootstrap=0)["methods"]
    kinds = [a["kind"] for a in out[BAD]["anomalies"]]
    assert "temperature" in kinds and "warning" not in kinds
    assert out["ts"]["anomalies"] == []


def test_any_warning_is_one_line_on_the_terminal(capsys):
    @click.command("warns")
    def warns() -> None:
        warnings.warn("first line\nsecond line", UserWarning, stacklevel=1)

    cli.add_command(warns)
    try:
        code, _, err = run(["warns"], capsys)
    finally:
        del cli.commands["warns"]
    assert code == 0 and err == "warning: first line\n"


def test_compare_checks_the_test_split_and_keeps_the_fits_own_checks_in_their_reports(
    real_logits,
):
    """compare checks each fit on its test split; each fit still checks its calibration
    split (no flag turns that off), whose findings stay in the fit's report and are not
    leaked as raw warnings beside the test split's."""
    z, y = real_logits[:2]
    with pytest.warns(CalibrationWarning):  # a fit alone checks its calibration split
        posthoc.create(BAD).fit(z, y)
    zv, yv, zt, yt = real_logits
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)  # none escapes compare
        out = compare_methods((zv, yv), (zt, yt), [BAD], bootstrap=0)["methods"][BAD]
    assert all(
        {a["split"] for a in f["report"]["anomalies"]} == {"calibration"} for f in out["fit"]
    )
    kinds = {a["kind"] for a in out["anomalies"]}
    assert kinds >= {"temperature", "not-converged"} and "warning" not in kinds
