"""A training run's configuration (:class:`TrainConfig`, checked before anything heavy is
built), its result, the device it runs on and the error it stops with."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from .._docs import Described, documented_settings
from .._registry import Spec, SpecError, parse_spec
from .._settings import BatchSize, Bounds, Epochs, Momentum, Seed, Setting, declarations

if TYPE_CHECKING:  # the registries and torch are imported where a config is checked or run:
    import torch  # the CLI builds its options from the fields without importing PyTorch
    from torch import nn

#: the parameters of the training and run API, described once for its docstrings
RUN_PARAMETERS: dict[str, Described] = {
    "config": ("TrainConfig", "What the run trains: data, model, loss, schedule, seed, device."),
    "configs": (
        "sequence of TrainConfig",
        "The members, sharing every setting but loss, seed and mixup.",
    ),
    "out": (
        "str or PathLike",
        "The run's folder (created; a run there is resumed with ``resume``).",
    ),
    "outs": ("sequence of str or PathLike", "One run folder per member."),
    "resume": ("bool, default False", "Finish the run in ``out`` from its last checkpoint."),
    "progress": (
        "callable or None, default None",
        "``progress(step, total_steps, record)``, "
        "after every step (``record`` None) and every epoch (its history entry).",
    ),
    "given": ("bool", "The network is given (``config.checkpoint``): evaluate it, do not train."),
    "path": ("str or PathLike", "A finished run's folder."),
    "source": ("str or PathLike", "The finished run to calibrate."),
    "method": ("str or Spec", "The calibration method's spec (``calibkit methods``)."),
    "device": (
        "str or torch.device, default 'auto'",
        "Where to compute: 'auto' (CUDA where available), 'cpu', 'cuda', 'cuda:N' or 'mps'.",
    ),
}


class TrainingError(ValueError):
    """Training cannot go on (diverged loss, a resume that does not match): one line.

    Examples
    --------
    >>> from calibkit.training import TrainConfig, train
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> run = getfixture("tmp_path") / "run"
    >>> _ = train(config, run)
    >>> from dataclasses import replace
    >>> train(replace(config, epochs=4), run, resume=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calibkit.training._config.TrainingError: .../checkpoint.pt was written by a run with ...
    """


@documented_settings
@dataclass
class TrainConfig:
    """Everything that determines a run. The specs (data, model, loss, schedule, extra) are
    given as text or :class:`~calibkit._registry.Spec`; :meth:`check` parses and checks each
    once and keeps the :class:`~calibkit._registry.Spec`, which the run then builds from;
    :meth:`as_json` writes them back as text (run.json, the checkpoint). Each field is
    declared once (:mod:`calibkit._settings`): its type, default, meaning and bounds.

    Examples
    --------
    >>> from calibkit.training import TrainConfig
    >>> config = TrainConfig(data="digits", model="mlp", loss="focal:gamma=3", epochs=20)
    >>> config.check().as_json()["loss"]
    'focal:gamma=3'
    >>> TrainConfig(lr=-1).check()
    Traceback (most recent call last):
    ...
    ValueError: lr: expected a number in (0, 100], got -1
    """

    data: Annotated[str | Spec, Setting("Dataset spec.")] = "digits"
    model: Annotated[str | Spec, Setting("Model spec.")] = "cnn"
    loss: Annotated[str | Spec, Setting("Loss spec, e.g. focal:gamma=3.")] = "ce"
    epochs: Epochs = 30
    batch_size: BatchSize = 128
    # the numbers' highs: beyond them training diverges at once (an lr of 1e308 or a weight
    # decay of 1e308 overflow the first step; a mixup alpha of 1e308 makes Beta draws of NaN)
    lr: Annotated[float, Setting("Initial learning rate", Bounds(0, 100, low_open=True))] = 0.1
    momentum: Momentum = 0.9
    weight_decay: Annotated[float, Setting("L2 weight decay", Bounds(0, 1))] = 5e-4
    schedule: Annotated[
        str | Spec, Setting("cifar, tiny-imagenet, constant or step:milestones=[A,B],gamma=G.")
    ] = "cifar"
    mixup: Annotated[float, Setting("Mixup alpha, 0: off", Bounds(0, 100))] = 0.0
    grad_clip: Annotated[
        float,
        Setting(
            "Clip each network's gradient norm to this before each step; 0: off (the papers' "
            "focal_calibration code clips at 2)",
            Bounds(0, 1e6),
        ),
    ] = 0.0
    seed: Seed = 0
    extra: Annotated[
        list[str | Spec], Setting("Extra evaluation split (dataset spec); repeat for more.")
    ] = field(default_factory=list)
    record_learned_epochs: Annotated[
        bool, Setting("Record learned epochs and final max logits.")
    ] = False
    record_grad_norms: Annotated[
        list[int],
        Setting(
            "Epoch at which to record per-sample gradient norms and Brier scores; repeat for more."
        ),
    ] = field(default_factory=list)
    device: Annotated[str, Setting("auto, cpu, cuda or cuda:N.")] = "auto"
    checkpoint: Annotated[
        str | None,
        Setting(
            "Pretrained weights to start from (torch or safetensors); with --stage2 they are "
            "stage 1 (no training)."
        ),
    ] = None

    def check(self) -> TrainConfig:
        """Validate every field, building nothing heavy, keep each spec parsed and checked (a
        :class:`~calibkit._registry.Spec`) and the device resolved (:attr:`torch_device`);
        returns self. A config checked before and unchanged since is returned as it is, so
        each layer may call this and only the first checks."""
        if self.__dict__.get("_checked") == self._values():
            return self
        for name, declared in declarations(type(self)).items():
            if declared.setting.values is not None:  # kept as checked: np.float32(0.1) -> 0.1
                setattr(self, name, declared.check(getattr(self, name)))
        device = pick_device(self.device)
        if self.checkpoint is not None and not Path(self.checkpoint).is_file():
            raise ValueError(f"checkpoint: no such file {self.checkpoint}")
        from .. import data, losses, models
        from . import _schedule as schedules

        self.schedule = schedules.REGISTRY.check(self.schedule)
        self.loss = losses.REGISTRY.check(self.loss)  # losses are built to be checked
        self.model = models.REGISTRY.check(self.model)  # by signature: nothing is built or read
        self.data = data.REGISTRY.check(self.data)
        self.extra = [_extra_split(e) for e in self.extra]
        bad = [e for e in self.record_grad_norms if not 1 <= e <= self.epochs]
        if bad:
            raise ValueError(f"record_grad_norms: epochs must lie in 1..{self.epochs}, got {bad}")
        self.__dict__["_device"] = device
        self.__dict__["_checked"] = self._values()
        return self

    def _values(self) -> tuple:
        """Every field's value, lists copied: what a later :meth:`check` compares."""
        values = (getattr(self, f.name) for f in fields(self))
        return tuple(list(v) if isinstance(v, list) else v for v in values)

    @property
    def torch_device(self) -> torch.device:
        """The device ``device`` names, resolved once by :meth:`check` (``auto``: CUDA
        where available, else the CPU); every layer of a run takes this one."""
        return self.check().__dict__["_device"]

    def as_json(self) -> dict[str, Any]:
        """Every field, JSON-ready: specs as their text (normalised, so that ``"a:b=1"``
        given as text and as a parsed spec write the same)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["extra"] = [str(parse_spec(e)) for e in self.extra]
        for name in ("data", "model", "loss", "schedule"):
            out[name] = str(parse_spec(out[name]))
        return out

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> TrainConfig:
        """The configuration :meth:`as_json` wrote (fields this version does not know are
        left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class TrainResult:
    """What a finished run produced: its folder, per-epoch history and the final model.

    Examples
    --------
    >>> from calibkit.training import TrainConfig, train
    >>> config = TrainConfig(data="digits:train_size=200", model="mlp", epochs=3,
    ...                      batch_size=64, lr=0.05, schedule="constant", device="cpu")
    >>> result = train(config, getfixture("tmp_path") / "run")
    >>> sorted(p.name for p in result.out.iterdir())
    ['checkpoint.pt', 'history.json', 'logits.npz', 'model.safetensors', 'run.json']
    >>> len(result.history), result.input_shape, result.train_images
    (3, (1, 8, 8), 200)
    """

    out: Path
    history: list[dict[str, float]]
    model: nn.Module
    input_shape: tuple[int, ...] = ()  # of one input, as the model takes it
    train_images: int = 0  # images in the training split (one epoch)


def pick_device(name: str | torch.device) -> torch.device:
    """The device named ``name`` (``auto``: CUDA where available, else the CPU), checked
    that it exists here and can train. A ``torch.device`` was resolved where it entered
    (a CLI option, :attr:`TrainConfig.torch_device`) and is returned as it is."""
    import torch

    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device: {name!r} is not a device; expected auto, cpu, cuda or cuda:N"
        ) from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(
            f"device: {name!r} cannot train or calibrate; expected auto, cpu, cuda, cuda:N or mps"
        )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {name!r} requested but CUDA is not available")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device: {name!r} requested but MPS is not available")
    return device


def _extra_split(spec: str | Spec) -> Spec:
    """An extra split's dataset spec, checked; its error names the option, since the same
    message about ``data`` would point at the wrong one."""
    from .. import data

    try:
        return data.REGISTRY.check(spec)
    except SpecError as err:
        raise SpecError(f"extra: {err}") from None
