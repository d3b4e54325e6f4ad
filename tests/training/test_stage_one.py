"""Stage 1, shared by ``calibkit train`` and the bench harness: a given (pretrained)
network is evaluated as it is, any other is trained (from the checkpoint's weights where
one is given)."""

from __future__ import annotations

import json

import numpy as np

from calibkit.runs import stage_one
from calibkit.training import TrainConfig, train


def test_a_given_network_is_evaluated_as_it_is_and_another_is_trained_from_it(tmp_path):
    source = tmp_path / "source"
    train(TrainConfig(epochs=1), source)
    ckpt = str(source / "model.safetensors")
    config = TrainConfig(epochs=1, checkpoint=ckpt)

    assert stage_one(config, tmp_path / "given", given=True) is None
    run = json.loads((tmp_path / "given" / "run.json").read_text())
    assert run["pretrained"].endswith("model.safetensors")
    assert json.loads((tmp_path / "given" / "history.json").read_text()) == []  # not trained
    with np.load(source / "logits.npz") as a, np.load(tmp_path / "given" / "logits.npz") as b:
        np.testing.assert_allclose(a["logits_test"], b["logits_test"], rtol=1e-5, atol=1e-5)

    result = stage_one(config, tmp_path / "trained", given=False)
    assert result is not None and len(result.history) == 1
    with np.load(source / "logits.npz") as a, np.load(tmp_path / "trained" / "logits.npz") as b:
        assert not np.allclose(a["logits_test"], b["logits_test"])  # one more epoch moved it
