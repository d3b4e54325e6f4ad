"""Run a sweep: every run of a spec not yet finished in the store, on an engine.

- ``local``: in this process (``workers=1``) or in N worker processes; where the runs
  train on CUDA, worker i uses GPU i mod the GPUs here (``CUDA_VISIBLE_DEVICES``), so
  several GPUs get their own workers and one GPU is not time-sliced between many;
- ``ray``: each run a Ray task (``threads`` CPUs, and one GPU when the cluster has any),
  retried up to twice on failure; ``address`` joins an existing cluster, otherwise Ray
  starts a local one.

Where the runs train on CUDA (on Ray: where the cluster has GPUs; or ``pack=True``), the
stage-1 networks that share a model, its data and its schedule are first trained
together, a pack per worker or per Ray task holding one GPU (:mod:`calibkit.bench._pack`).
Workers report what they are doing (a run's phase, each epoch's end) to the driver, whose
``progress`` callback receives it as ``status``.

Runs are keyed by the hash of their resolved settings; the store skips finished keys, so a
sweep killed at any point and started again finishes the rest without redoing work or
writing a row twice. The driver writes each finished run to the store in one transaction;
a run that fails twice is recorded as failed (with its error) and retried by the next start.
"""

from __future__ import annotations

import os
import queue
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from .. import _worker_start, data
from .._allocator import retain_freed_memory
from .._outputs import file_lock, inside
from .._threads import torch_threads
from ._execute import execute
from ._pack import label, packs, train_pack, trains_on_cuda
from ._runspec import BenchSpec, RunSpec
from ._stage2 import fit_stage2_group, stage2_groups
from ._store import Store

RETRIES = 2


def _report(text: str) -> None:
    """A worker's progress line to the driver (its queue set by its start; none in the
    driver)."""
    if _worker_start.REPORTS is not None:
        _worker_start.REPORTS.put((os.getpid(), text))


def _attempt(run: RunSpec, root: str, threads: int, report: Any = None) -> dict[str, Any]:
    retain_freed_memory()  # a spawned worker starts with glibc's defaults
    last = ""
    with torch_threads(threads):
        for _ in range(RETRIES):
            try:
                return execute(run, Path(root), report or _report)
            except Exception:  # any failure of a run is recorded, not fatal
                last = traceback.format_exc(limit=3).strip().splitlines()[-1]
        return {"failed": last}


def _attempt_group(
    stage: str, runs: list[RunSpec], root: str, threads: int, report: Any = None
) -> str:
    """Train a pack's stage-1 networks (``stage="pack"``) or fit a group's stage 2
    (``"stage2"``); '' or the error (its runs then train or fit alone)."""
    retain_freed_memory()
    torch.set_num_threads(threads)
    try:
        (train_pack if stage == "pack" else fit_stage2_group)(runs, Path(root), report or _report)
        return ""
    except Exception:  # the runs train alone instead, and record their own failure
        return traceback.format_exc(limit=3).strip().splitlines()[-1]


def worker_pool(workers: int, reports: Any = None, gpus: int = 0) -> ProcessPoolExecutor:
    """``workers`` spawned processes that exit when this process dies, report to the queue
    ``reports``, and (with ``gpus`` > 0) each use GPU i mod ``gpus``."""
    ctx = get_context("spawn")
    queue = None
    if gpus:
        queue = ctx.Queue()
        for i in range(workers):
            queue.put(i % gpus)
    return ProcessPoolExecutor(
        workers,
        mp_context=ctx,
        initializer=_worker_start.start,
        initargs=(os.getpid(), reports, queue),
    )


@contextmanager
def folder_lock(out: Path, what: str = "folder", lock: Path | None = None) -> Iterator[None]:
    """Hold ``out/.bench.lock`` (or ``lock``) for a sweep: a second ``calibkit bench`` on the
    same folder, or on the same store from another folder, is refused at once, naming the
    process that holds it, instead of running every run again beside the first."""
    lock = lock or out / ".bench.lock"
    with ExitStack() as stack:
        try:
            handle = stack.enter_context(file_lock(lock, wait=False))
        except BlockingIOError:
            holder = lock.read_text().strip() or "another process"
            raise ValueError(
                f"{out}: another calibkit bench ({holder}) is running on this {what}; wait "
                "for it to finish or choose another "
                + ("folder (out=)" if what == "folder" else "store (db=)")
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)


def _failed_row(run: RunSpec, error: str) -> dict[str, Any]:
    return run.store_row() | {"status": "failed", "error": error}


def run_bench(
    spec: BenchSpec,
    out: str | Path,
    *,
    engine: str = "local",
    workers: int = 1,
    address: str | None = None,
    db: str | Path | None = None,
    threads: int = 1,
    progress: Callable[..., None] | None = None,
    pack: bool | None = None,
) -> dict[str, int]:
    """Run every unfinished run of ``spec``; results into the store (default
    ``out/results.sqlite``). Returns counts: total, skipped (already done), done, failed.
    ``progress(done, total, run, status=None)`` is called as runs land, and with ``status``
    (what the workers are doing, one phrase per busy worker) at least every second while
    they run. ``pack``: train the stage-1 networks of runs that share a model, data and
    schedule together first (None: where they train on CUDA, or on Ray where the cluster
    has GPUs; :mod:`calibkit.bench._pack`). On Ray a pack is one task holding one GPU (where
    the cluster has any), so a cluster of G GPUs trains G packs at once; the runs follow.

    Every run uses ``threads`` CPU threads whatever the engine or the number of workers: a
    run's numbers depend on the thread count (it changes the order of float sums), so a fixed
    count makes 1 worker, N workers and Ray give identical results.

    Examples
    --------
    >>> from calibkit.bench import load_spec, run_bench, write_report
    >>> tmp = getfixture("tmp_path")
    >>> _ = (tmp / "sweep.yaml").write_text('''
    ... name: tiny
    ... seeds: [1]
    ... train: {epochs: 2, batch_size: 64, lr: 0.05, schedule: constant}
    ... datasets: [{data: "digits:train_size=200", models: [mlp]}]
    ... methods: [{name: CE, loss: ce}, {name: Focal, loss: "focal:gamma=3"}]
    ... posthoc: [ts]
    ... ''')
    >>> spec = load_spec(tmp / "sweep.yaml")
    >>> run_bench(spec, tmp / "out")
    {'total': 2, 'skipped': 0, 'done': 2, 'failed': 0}
    >>> run_bench(spec, tmp / "out")  # started again: only what is missing runs
    {'total': 2, 'skipped': 2, 'done': 0, 'failed': 0}
    """
    if engine not in ("local", "ray"):
        raise ValueError(f"engine: expected 'local' or 'ray', got {engine!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an integer >= 1, got {workers!r}")
    ray = _require_ray() if engine == "ray" else None  # before anything is written
    out = Path(out)
    for folder in ("train", "runs"):  # a link planted there: refused before any run
        inside(out, folder)
    store = Path(db) if db is not None else out / "results.sqlite"
    with folder_lock(out), folder_lock(store, "store", store.with_name(store.name + ".lock")):
        return _sweep(spec, out, ray, workers, address, db, threads, progress, pack)


def check_data(runs: list[RunSpec]) -> None:
    """Build every distinct dataset read from files (a spec with ``root``) of ``runs`` once,
    before any run starts, so that a missing or unreadable file is one error naming the
    dataset (``ValueError``: the CLI's one line, exit code 2) instead of a failure of every
    run that reads it. The spec check has already seen each root folder exist; this reads
    what is inside it."""
    specs = dict.fromkeys(s for r in runs if r.logits is None for s in (r.dataset, *r.splits))
    for spec in specs:
        if "root" not in data.REGISTRY.check(spec).kwargs:
            continue  # built from nothing (digits, the Gaussian toy): checked with the spec
        try:
            data.create(spec)
        except (ValueError, OSError) as err:
            first = (str(err).splitlines() or [type(err).__name__])[0]
            raise ValueError(f"data {spec}: {first}; nothing has run") from None


def _sweep(
    spec: BenchSpec,
    out: Path,
    ray: Any,
    workers: int,
    address: str | None,
    db: str | Path | None,
    threads: int,
    progress: Any,
    pack: bool | None,
) -> dict[str, int]:
    store = Store(db or out / "results.sqlite")
    store.set_sweep(spec.methods, spec.baseline)
    finished = store.done()
    todo = [r for r in spec.runs if r.key not in finished]
    if address is None:  # on a cluster the files are the workers' to read
        check_data(todo)
    # Longest first (two-stage runs, then the rest in spec order), so that parallel workers
    # do not end with one long run each while the others idle.
    todo.sort(key=lambda r: r.stage2 is None)
    counts = {
        "total": len(spec.runs),
        "skipped": len(spec.runs) - len(todo),
        "done": 0,
        "failed": 0,
    }
    if progress is not None:
        progress(counts["skipped"], counts["total"], None)

    def land(run: RunSpec, result: dict[str, Any]) -> None:
        if "failed" in result:
            store.write_run(_failed_row(run, result["failed"]), [])
            counts["failed"] += 1
        else:
            store.write_run(
                result["run"],
                result["metrics"],
                result["history"],
                result["curves"],
                result.get("anomalies", ()),
            )
            counts["done"] += 1
        if progress is not None:
            progress(counts["skipped"] + counts["done"] + counts["failed"], counts["total"], run)

    if ray is not None:
        _run_ray(ray, todo, out, address, threads, land, pack)
        return counts
    cuda = trains_on_cuda(todo)
    groups = packs(todo, out) if (cuda if pack is None else pack) else []
    say = _Status(progress, counts)
    grouping = cuda if pack is None else pack  # stage 2 fitted together where packs train
    if workers == 1 or len(todo) + len(groups) <= 1:
        for group in groups:
            say.single(label(group))
            _attempt_group("pack", group, str(out), threads, say.single)
        for group in stage2_groups(todo, out) if grouping else []:
            _attempt_group("stage2", group, str(out), threads, say.single)
        for run in todo:
            say.single(run_label(run))
            land(run, _attempt(run, str(out), threads, say.single))
        return counts
    reports = get_context("spawn").Queue()
    pool = worker_pool(workers, reports, torch.cuda.device_count() if cuda else 0)
    try:
        for stage in ("pack", "stage2"):  # the runs need their packs' networks: packs first
            found = groups if stage == "pack" else stage2_groups(todo, out) if grouping else []
            waiting = {pool.submit(_attempt_group, stage, g, str(out), threads) for g in found}
            while waiting:
                done, waiting = wait(waiting, timeout=1.0, return_when=FIRST_COMPLETED)
                say.drain(reports)
        pending = {pool.submit(_attempt, r, str(out), threads): r for r in todo}
        while pending:
            done, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                land(pending.pop(fut), fut.result())
            say.drain(reports)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): stop the workers, not wait for them
        _stop(pool)
        raise
    pool.shutdown()
    reports.close()
    reports.join_thread()
    return counts


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the workers of an interrupted sweep at once (their runs resume next time) and
    release the pool's queues, so no semaphore is left behind."""
    workers = list(getattr(pool, "_processes", {}).values())  # the executor's own table
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.terminate()
    for process in workers:
        process.join(timeout=10)


def run_label(run: RunSpec) -> str:
    """How progress lines name a run."""
    return f"{run.method} seed {run.seed} ({run.dataset.name}/{run.model.name})"


class _Status:
    """What the workers said last, passed to ``progress`` as one phrase."""

    def __init__(self, progress: Any, counts: dict[str, int]) -> None:
        self.progress, self.counts, self.said = progress, counts, {}

    def _show(self) -> None:
        if self.progress is None:
            return
        c = self.counts
        done = c["skipped"] + c["done"] + c["failed"]
        self.progress(done, c["total"], None, status="; ".join(self.said.values()))

    def single(self, text: str) -> None:
        """A line from this process (one worker: runs in the driver)."""
        self.said = {0: text}
        self._show()

    def drain(self, reports: Any) -> None:
        """Read every line the workers sent since the last call, then show them."""
        while True:
            try:
                pid, text = reports.get_nowait()
            except queue.Empty:
                break
            self.said[pid] = text
        self._show()


def _require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError(
            "engine='ray' needs Ray, which is not installed; pip install 'calibkit[ray]'"
        ) from None
    return ray


def _run_ray(
    ray: Any,
    todo: list[RunSpec],
    out: Path,
    address: str | None,
    threads: int,
    land: Callable[[RunSpec, dict[str, Any]], None],
    pack: bool | None,
) -> None:
    """Every run a Ray task (``threads`` CPUs, one GPU where the cluster has any), after the
    packs: each pack one task holding one GPU, all of them first (the runs need their
    networks). ``pack=None`` packs where the cluster has GPUs."""
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    root = str(out.resolve())
    grouping = bool(gpus) if pack is None else pack
    group_task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=RETRIES)(_attempt_group)
    for stage in ("pack", "stage2") if grouping else ():  # packs first: stage 2 needs them
        found = packs(todo, out) if stage == "pack" else stage2_groups(todo, out)
        ray.get([group_task.remote(stage, g, root, threads) for g in found])
    task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=RETRIES)(_attempt)
    refs = {task.remote(r, root, threads): r for r in todo}
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1)
        for ref in ready:
            land(refs.pop(ref), ray.get(ref))
