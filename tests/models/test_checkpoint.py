"""Checkpoint import: calibkit's own layout and the common CIFAR-ResNet layout, with one-line
errors naming what does not fit; the four shared pretrained ResNets score their recorded
accuracy on the byte-exact CIFAR-10 test images."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from calibkit import models
from calibkit.models import CheckpointError, load_checkpoint
from tests.conftest import shared


def published_layout(model) -> dict[str, torch.Tensor]:
    """The model's weights under the names of akamaster/pytorch_resnet_cifar10, saved from
    DataParallel (``module.`` prefix) and by a PyTorch without batch-norm counters."""
    inverse = {v: k for k, v in model.layout.items()}
    out = {}
    for key, value in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue
        parts = key.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            if ".".join(parts[:cut]) in inverse:
                key = ".".join([inverse[".".join(parts[:cut])], *parts[cut:]])
                break
        out["module." + key] = value.clone()
    return out


@pytest.mark.parametrize("depth", [20, 32, 44, 56, 110])
def test_a_published_layout_checkpoint_loads_into_the_registered_resnet(tmp_path, depth):
    torch.manual_seed(depth)
    source = models.create(f"resnet{depth}").eval()
    for m in source.modules():  # non-trivial running statistics, so BN is checked too
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2)
    names = published_layout(source)
    assert {k.split(".")[1] for k in names} == {
        "conv1",
        "bn1",
        "layer1",
        "layer2",
        "layer3",
        "linear",
    }
    torch.save({"state_dict": names, "best_prec1": 90.0}, tmp_path / "w.th")
    loaded = models.create(f"resnet{depth}", checkpoint=tmp_path / "w.th").eval()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded(x), source(x))


def test_calibkit_layout_and_safetensors_load_too(tmp_path):
    from safetensors.torch import save_file

    source = models.create("resnet20")
    save_file(source.state_dict(), tmp_path / "m.safetensors")
    torch.save({"model": source.state_dict()}, tmp_path / "m.pt")
    for name in ("m.safetensors", "m.pt"):
        loaded = load_checkpoint(models.create("resnet20"), tmp_path / name)
        pairs = zip(loaded.state_dict().values(), source.state_dict().values(), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs)


def test_checkpoints_that_do_not_fit_name_the_keys(tmp_path):
    torch.save({"state_dict": published_layout(models.create("resnet20"))}, tmp_path / "r20.th")
    with pytest.raises(
        CheckpointError, match=r"r20.th: does not fit the model: missing layer1\.3\.bn1"
    ):
        models.create("resnet32", checkpoint=tmp_path / "r20.th")
    with pytest.raises(
        CheckpointError, match=r"head.weight has shape \(10, 64\) where the model has \(100, 64\)"
    ):
        models.create("resnet20", num_classes=100, checkpoint=tmp_path / "r20.th")
    state = published_layout(models.create("resnet20"))
    state["module.extra.weight"] = torch.zeros(1)
    torch.save(state, tmp_path / "extra.th")
    with pytest.raises(CheckpointError, match=r"unexpected extra\.weight"):
        models.create("resnet20", checkpoint=tmp_path / "extra.th")
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        models.create("resnet20", checkpoint=tmp_path / "none.th")


class Evil:
    def __reduce__(self):
        return (print, ("ran code",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_checkpoint_with_code_is_refused_without_running_it(tmp_path, capsys):
    (tmp_path / "evil.th").write_bytes(pickle.dumps({"state_dict": Evil()}))
    with pytest.raises(CheckpointError, match="holds Python objects beyond tensors") as err:
        models.create("resnet20", checkpoint=tmp_path / "evil.th")
    assert "ran code" not in capsys.readouterr().out
    assert "weights_only" not in str(err.value)  # torch's advice turns pickle loading on


def _broken(kind: str, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    key = next(k for k in state if k.endswith("weight"))
    state = dict(state)
    if kind in ("nan", "inf"):
        state[key] = state[key].clone()
        state[key].view(-1)[3] = float(kind)
    elif kind == "sparse":
        state[key] = state[key].to_sparse()
    else:
        state = {k: torch.empty_like(v, device="meta") for k, v in state.items()}
    return state


@pytest.mark.parametrize(
    "kind, message",
    [
        ("nan", "features.0.weight holds NaN or inf values \\(1 of \\d+ tensors do\\)"),
        ("inf", "features.0.weight holds NaN or inf values"),
        ("sparse", "features.0.weight is a torch.sparse_coo tensor"),
        ("meta", "features.0.weight is a meta tensor"),
    ],
)
def test_a_checkpoint_of_tensors_that_are_not_weights_is_refused_in_one_line(
    tmp_path, kind, message
):
    """Issue 65 §5: NaN and inf weights loaded without a word (the training then blamed the
    learning rate), and meta and sparse tensors gave torch's multi-line RuntimeError."""
    state = _broken(kind, models.create("resnet20").state_dict())
    torch.save(state, tmp_path / "w.th")
    with pytest.raises(CheckpointError, match=rf"^{tmp_path / 'w.th'}: {message}[^\n]*$"):
        models.create("resnet20", checkpoint=tmp_path / "w.th")
    if kind in ("nan", "inf"):  # the same in safetensors
        from safetensors.torch import save_file

        save_file(state, tmp_path / "w.safetensors")
        with pytest.raises(CheckpointError, match=message):
            models.read_state_dict(tmp_path / "w.safetensors")


@pytest.mark.parametrize("path", ["/proc/self/environ", "/dev/null", "text"])
def test_a_file_that_is_no_checkpoint_is_refused_before_it_is_read(tmp_path, path):
    """Issue 65 §5: the spec reader accepted ``/proc/self/environ`` as a checkpoint; a file
    whose first bytes are neither torch.save's nor safetensors' is refused where it enters."""
    if path == "text":
        path = tmp_path / "notes.th"
        path.write_text("not weights\n")
    with pytest.raises(CheckpointError, match=r"not a regular file|not a checkpoint"):
        models.read_state_dict(path)


def test_the_legacy_torch_format_still_loads(tmp_path):
    model = models.create("resnet20")
    torch.save(model.state_dict(), tmp_path / "old.th", _use_new_zipfile_serialization=False)
    assert len(models.read_state_dict(tmp_path / "old.th")) == len(model.state_dict())


def test_the_shared_pretrained_resnets_score_their_recorded_accuracy():
    weights = shared("weights")
    with np.load(shared("cifar10-jpeg", "test_exact_first1017.npz")) as f:
        images, labels = torch.from_numpy(f["images"]), torch.from_numpy(f["labels"])
    x = images.permute(0, 3, 1, 2).float() / 255
    x = (x - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / torch.tensor(
        [0.229, 0.224, 0.225]
    ).view(1, 3, 1, 1)
    for path in sorted(weights.glob("resnet*.th")):
        depth = int(path.name[len("resnet") :].split("-")[0])
        recorded = float(torch.load(path, map_location="cpu", weights_only=True)["best_prec1"])
        net = models.create(f"resnet{depth}", checkpoint=path).eval()
        with torch.no_grad():
            acc = 100 * (net(x).argmax(1) == labels).double().mean().item()
        assert abs(acc - recorded) < 2, (path.name, acc, recorded)
