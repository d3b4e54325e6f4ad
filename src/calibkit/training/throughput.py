"""How close training comes to what the CPU or GPU can do: the achieved training GFLOP/s of
a finished run against a dense float32 matrix product's GFLOP/s, measured in the same
process with the same thread count.

- The work of one training image is counted by :class:`torch.utils.flop_counter.
  FlopCounterMode` on one forward and backward pass of the model (convolutions, matrix
  products; element-wise operations such as batch norm and ReLU are not counted, as
  published FLOP figures do not count them). The run's rate is that × images trained /
  the seconds spent in training steps (the history's ``train_time``, validation excluded).
- The reference is ``torch.mm`` of two 1024 × 1024 float32 matrices (2 · 1024³ FLOP per
  product), best of a few repetitions.
"""

from __future__ import annotations

import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from .trainer import TrainResult

__all__ = ["flops_per_image", "matmul_gflops", "training_rate"]


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


def matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    """Dense float32 ``n`` × ``n`` matrix-product GFLOP/s on the CPU at the current thread
    count (best of ``repeats`` timings of 4 products)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(4):
            torch.mm(a, b)
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
        "matmul_gflops": matmul_gflops(),
        "flops_per_image": per_image,
    }
