"""How close training comes to what the CPU or GPU can do: the achieved training GFLOP/s of
a finished run against a dense matrix product's GFLOP/s, measured in the same process on
the device it trained on (with the same thread count on a CPU).

- The work of one training image is counted by :class:`torch.utils.flop_counter.
  FlopCounterMode` on one forward and backward pass of the model (convolutions, matrix
  products; element-wise operations such as batch norm and ReLU are not counted, as
  published FLOP figures do not count them). The run's rate is that × images trained /
  the seconds spent in training steps (the history's ``train_time``, validation excluded).
- The reference is ``torch.mm`` of two n × n matrices (2 · n³ FLOP per product), best of a
  few repetitions, in the dtype the training steps compute in: float32 with n = 1024 on a
  CPU, bfloat16 (the trainer's autocast) with n = 4096 on CUDA, where a smaller product
  cannot fill the card.
"""

from __future__ import annotations

import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from ._trainer import TrainResult


def flops_per_image(model: torch.nn.Module, input_shape: tuple[int, ...]) -> float:
    """FLOP of one training image: forward and backward of ``model`` in training mode, per
    image of a batch of 2 (batch norm needs more than one)."""
    x = torch.zeros(2, *input_shape, device=next(model.parameters()).device)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    counter = FlopCounterMode(display=False)
    with counter:
        model.train()
        model(x).sum().backward()
    model.load_state_dict(state)  # batch-norm statistics as they were
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 2


def matmul_gflops(device: torch.device | str = "cpu", repeats: int = 5) -> float:
    """Dense matrix-product GFLOP/s on ``device`` (best of ``repeats`` timings of 4
    products): float32 1024 × 1024 on a CPU at the current thread count, bfloat16
    4096 × 4096 on CUDA (the dtype of the trainer's autocast there)."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    n, dtype = (4096, torch.bfloat16) if cuda else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(4):
            torch.mm(a, b)
        if cuda:
            torch.cuda.synchronize(device)
        best = min(best, (time.perf_counter() - start) / 4)
    return 2 * n**3 / best / 1e9


def training_rate(result: TrainResult) -> dict[str, float]:
    """The training throughput of a run just trained in this process (no data is read
    again): ``train_images_per_s``, ``train_gflops`` (achieved), ``matmul_gflops`` (the
    reference, measured now) and ``flops_per_image``."""
    seconds = sum(h["train_time"] for h in result.history)
    images = result.train_images * len(result.history)
    if not seconds or not images:
        return {}
    per_image = flops_per_image(result.model, result.input_shape)
    return {
        "train_images_per_s": images / seconds,
        "train_gflops": per_image * images / seconds / 1e9,
        "matmul_gflops": matmul_gflops(next(result.model.parameters()).device),
        "flops_per_image": per_image,
    }
