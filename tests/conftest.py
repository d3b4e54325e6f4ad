"""Shared fixtures: synthetic logits shaped like a trained network's, and the real logits."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# the same examples on every run: CI must not fail on a draw a developer never saw
settings.register_profile("calibkit", derandomize=True, database=None, deadline=None)
settings.load_profile("calibkit")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL_LOGITS = SHARED_DATA / "logits" / "resnet110_cifar10.npz"


def shared(*parts: str) -> Path:
    """A path under ../shared/data; the test skips with a one-line reason where it is absent
    (a user's machine) and fails on CI, which has it."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path} missing; CI must run with ../shared beside the repo")
        pytest.skip(f"real data not found at {path}")
    return path


def make_logits(n: int, k: int, seed: int, scale: float = 4.0, acc: float = 0.8, dtype=np.float64):
    """Over-confident synthetic logits: the label's logit is boosted for ~acc of the samples."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    hit = rng.uniform(size=n) < acc
    z[np.arange(n), np.where(hit, y, rng.integers(0, k, n))] += scale
    return z.astype(dtype), y


@pytest.fixture(scope="session")
def real_logits():
    """(logits_val, labels_val, logits_test, labels_test) of ResNet-110 on CIFAR-10."""
    if not REAL_LOGITS.exists():
        if os.environ.get("CI"):
            pytest.fail(
                f"real logits missing at {REAL_LOGITS}; CI must run with ../shared beside the repo"
            )
        pytest.skip(f"real logits not found at {REAL_LOGITS}")
    with np.load(REAL_LOGITS) as d:
        return d["logits_val"], d["labels_val"], d["logits_test"], d["labels_test"]


def free_port() -> int:
    """A free TCP port on localhost, for a test's process group."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def gloo_group(rank: int, world: int, port: int) -> Iterator[None]:
    """A real torch.distributed gloo group on localhost for one spawned test process."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker runs PyTorch on one thread: the workers fill the cores
    already, and two threads per worker on busy cores stall at every parallel operation
    (the cliff ``calibkit._threads`` describes; a bootstrap study took 66 s instead of 7)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`tests.slow.SLOW` ``slow`` and skip them unless ``-m`` names
    ``slow`` (``pytest -m slow``: them alone; ``-m "slow or not slow"``: everything). On a
    whole-suite run, a key that matches no collected test is an error.

    Where the slow tests run, their files go first, costliest first by the seconds
    ``SLOW`` records (the order within a file kept): under ``--dist loadfile``, as
    ``.ci/run`` runs them, each worker takes the next file when it is free, so the longest
    files start first and none is left to run alone at the end."""
    from tests.slow import SLOW

    used = set()
    for item in items:
        key = next((k for k in SLOW if item.nodeid.startswith(k)), None)
        if key is not None:
            item.add_marker(pytest.mark.slow)
            used.add(key)
    whole = list(config.args) == list(config.getini("testpaths"))  # no path named
    if whole and set(SLOW) - used:
        raise pytest.UsageError(f"tests/slow.py names tests that do not exist: {set(SLOW) - used}")
    if "slow" not in (config.option.markexpr or ""):
        skip = pytest.mark.skip(reason="slow: CI runs it (pytest -m slow)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)
        return
    cost: dict[str, int] = {}
    for key, (seconds, _) in SLOW.items():
        file = key.split("::")[0]
        cost[file] = cost.get(file, 0) + seconds
    items.sort(key=lambda item: -cost.get(item.nodeid.split("::")[0], 0))
