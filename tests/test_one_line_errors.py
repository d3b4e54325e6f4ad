"""Inputs that ended in a traceback or ran silently (issue 41 §4 and §6): each now gets one
line and exit code 2 (or, for the YAML merge key, is read as YAML means it)."""

from __future__ import annotations

import pytest
import torch

from calibkit.bench.spec import load_spec
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
        (["--lr", "1e308"], "lr: expected a number in [0, 100]"),
        (["--weight-decay", "1e308"], "weight-decay: expected a number in [0, 1]"),
        (["--mixup", "1e308"], "mixup: expected a number in [0, 100]"),
        (["--epochs", str(10**30)], "epochs: expected an integer in 1..1,000,000"),
        (["--model", "mlp:hidden=100000000000"], "cannot be built in this machine's memory"),
    ],
)
def test_train_settings_beyond_reason_are_one_line(tmp_path, capsys, argv, says):
    code, _, err = run(["train", "--data", "digits", "--epochs", "1", *argv,
                        "-o", str(tmp_path / "r")], capsys)  # fmt: skip
    assert code == 2 and says in err and len(err.splitlines()) == 1, err


def test_a_400_digit_learning_rate_in_a_spec_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC % (", lr: 1" + "0" * 400, ""))
    code, _, err = run(["bench", str(path), "--estimate"], capsys)
    assert code == 2 and "lr: expected a number in [0, 100]" in err and len(err) < 300


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
    save_file({k: v.round().int() if v.is_floating_point() else v
               for k, v in net.state_dict().items()}, tmp_path / "w.safetensors")  # fmt: skip
    with pytest.raises(CheckpointError, match=r"holds torch\.int32 values where the model has"):
        models.create("mlp", tmp_path / "w.safetensors", num_classes=10, input_shape=(1, 8, 8))
