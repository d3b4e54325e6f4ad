"""Inputs that ended in a traceback or ran silently (issue 41 §4 and §6): each now gets one
line and exit code 2 (or, for the YAML merge key, is read as YAML means it)."""

from __future__ import annotations

import pytest
import torch

from calibkit.bench._spec import load_spec
from tests.test_cli import run

SPEC = """seeds: [1]
train: {epochs: 1%s}
datasets:
  - data: digits
    models: [mlp]
methods:
  - &m {name: CE, loss: ce}
%s
posthoc: [ts]
"""


def test_a_yaml_merge_key_in_a_spec_is_read_as_yaml_means_it(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC % ("", "  - {<<: *m, name: CE2, mixup: 0.2}"))
    runs = load_spec(path).runs
    assert sorted(r.method for r in runs) == ["CE", "CE2"]
    assert {r.method: r.mixup for r in runs} == {"CE": 0.0, "CE2": 0.2}
    assert {str(r.loss) for r in runs} == {"ce"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--lr", "1e308"], "lr: expected a number in (0, 100]"),
        (["--weight-decay", "1e308"], "weight-decay: expected a number in [0, 1]"),
        (["--mixup", "1e308"], "mixup: expected a number in [0, 100]"),
        (["--epochs", str(10**30)], "epochs: expected an integer in 1..1,000,000"),
        (["--model", "mlp:hidden=100000000000"], "hidden: expected an integer in 1..1,000,000"),
    ],
)
def test_train_settings_beyond_reason_are_one_line(tmp_path, capsys, argv, says):
    code, _, err = run(
        ["train", "--data", "digits", "--epochs", "1", *argv, "-o", str(tmp_path / "r")], capsys
    )
    assert code == 2 and says in err and len(err.splitlines()) == 1, err


def test_a_400_digit_learning_rate_in_a_spec_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC % (", lr: 1" + "0" * 400, ""))
    code, _, err = run(["bench", str(path), "--estimate"], capsys)
    assert code == 2 and "lr: expected a number in (0, 100]" in err and len(err) < 300


def test_metrics_refuse_a_meta_tensor_in_one_line():
    from calibkit.metrics import ece

    with pytest.raises(TypeError, match="meta device holds no values"):
        ece(torch.empty(3, 2, device="meta"), torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["train", "--schedule", "step:milestones=[5,2]", "--epochs", "1"],
            "milestones must increase",
        ),
        (["bench", "--estimate", "--workers", "0"], "--workers"),
    ],
)
def test_silent_acceptances_are_refused(tmp_path, capsys, argv, says):
    """Issue 41 §6: these ran as if given something else."""
    code, _, err = run([*argv, "-o", str(tmp_path / "o")], capsys)
    assert code == 2 and says in err and len(err.splitlines()) == 1, err


def test_integer_weights_in_a_checkpoint_are_refused(tmp_path):
    from safetensors.torch import save_file

    from calibkit import models
    from calibkit.models import CheckpointError

    net = models.create("mlp", num_classes=10, input_shape=(1, 8, 8))
    save_file(
        {k: v.round().int() if v.is_floating_point() else v for k, v in net.state_dict().items()},
        tmp_path / "w.safetensors",
    )
    with pytest.raises(CheckpointError, match=r"holds torch\.int32 values where the model has"):
        models.create("mlp", tmp_path / "w.safetensors", num_classes=10, input_shape=(1, 8, 8))


def test_misleading_messages_now_name_the_cause(tmp_path, capsys):
    """Issue 41 §5: each message names what is wrong and where."""
    import numpy as np

    from calibkit import posthoc
    from calibkit._outputs import atomic_write
    from calibkit.io import load_scores, load_split

    z = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    y = np.arange(40) % 3
    np.savez(tmp_path / "s.npz", logits_val=z, labels_val=y, logits_test=z, labels_test=y)
    with pytest.raises(ValueError, match=r"no split 'tset' \(the file has: test, val\)"):
        load_split(tmp_path / "s.npz", "tset")
    torch.save({"logits": {"a": torch.zeros(2)}}, tmp_path / "nested.pt")
    with pytest.raises(ValueError, match="key 'logits' holds a dict, not a tensor"):
        load_scores(tmp_path / "nested.pt")
    torch.save(
        {"logits": torch.from_numpy(z).to(torch.float8_e4m3fn), "labels": torch.from_numpy(y)},
        tmp_path / "f8.pt",
    )
    got, _ = load_scores(tmp_path / "f8.pt")  # widened to float32, as bfloat16 is
    assert got.dtype == np.float32 and got.shape == (40, 3)
    big = np.full(40, 2**63 + 7, dtype=np.uint64)
    with pytest.raises(ValueError, match=f"found {2**63 + 7}"):
        from calibkit.metrics import ece

        ece(z, big)
    with pytest.raises(ValueError, match="neural-clamping calibrates a network, not logits"):
        from calibkit.posthoc._compare import compare_methods

        compare_methods((z, y), (z, y), ["neural-clamping"])
    code, _, err = run(
        ["compare", "--file", str(tmp_path / "s.npz"), "--methods", "ts,neural-clamping"], capsys
    )
    assert code == 2 and "use calibkit calibrate neural-clamping RUN_DIR" in err

    def named(tmp):
        raise ValueError(f"Error while serializing: disk full at {tmp}")

    with pytest.raises(OSError) as failed:
        atomic_write(tmp_path / "c.calib", named)
    assert str(tmp_path / "c.calib") in str(failed.value) and ".c.calib." not in str(failed.value)
    assert posthoc  # imported for its registry


def test_a_path_with_a_newline_is_shown_whole(tmp_path, capsys):
    odd = tmp_path / "a\nb"
    code, _, err = run(["evaluate", str(odd / "x.npz")], capsys)
    assert code == 2 and err.strip().endswith("a\\nb/x.npz: no such file"), err
