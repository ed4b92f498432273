"""An engine's first sleep, paid inside vLLM's init: its host buffers are pinned while the init compiles.

Sleep mode (level 1) copies the weights into pinned host memory, one buffer per weight allocation; torch's
host allocator pins them on the first sleep (seconds an engine for a 7B model: docs/benchmarks.md) and keeps
them for every later one, which takes a tenth of that. Those first sleeps sit on the command's critical path:
the next engine cannot load until the last one has slept. Here the engine-core process pins buffers of the
same sizes on a thread as soon as the weights are loaded and holds them until the first sleep, which takes them
for its backups by size (whatever torch's host cache would have done with them: with the buffers left in that
cache the H200's first sleeps still spent seconds in the allocator's backup loop, docs/benchmarks.md); the thread
runs beside vLLM's memory profiling and torch.compile and is joined before the CUDA graphs are captured (a capture
forbids other threads' allocations).

Installed in the engine-core process only (runner/vllm/fork_server.py: the fork server's child) and
only where the actor's engine sleeps (`PIN_AHEAD_ENV`, set by runner/scheduling/actor_spec.py); a vLLM whose
worker or allocator differs leaves the first sleep as vLLM has it, and says so in the log (runner.vllm.notice). The first two sleeps' log lines split their
seconds into the allocator's calls (`_SleepSplit`): what a first sleep still pays beyond a later one.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import time
from typing import Iterable, Optional

from runner.vllm import notice
from runner.vllm.versions import Check

PIECE = "sleep_pinning"
PIN_AHEAD_ENV = "RUNNER_SLEEP_PIN_AHEAD"
# The allocations level-1 sleep backs up in host memory (vLLM's CuMemBackend: offload_tags=("weights",)).
OFFLOADED_TAG = "weights"


def offloaded_sizes(pointer_to_data: dict, tag: str = OFFLOADED_TAG) -> list[int]:
    """Byte sizes of the allocations a level-1 sleep copies to host memory, one per buffer it pins."""
    return [data.handle[1] for data in pointer_to_data.values() if getattr(data, "tag", None) == tag]


class _Pinning:
    """One engine core's pinning thread; `join` reports how long it ran and how much it pinned."""

    def __init__(self, sizes: Iterable[int], device):
        self.sizes = list(sizes)
        self.device = device
        self.error: Optional[BaseException] = None
        self.seconds = 0.0
        self.buffers: list = []
        self._thread = threading.Thread(target=self._run, name="runner-sleep-pinning", daemon=True)

    def start(self) -> "_Pinning":
        self._thread.start()
        return self

    def _run(self) -> None:
        import torch

        started = time.perf_counter()
        try:
            torch.cuda.set_device(self.device)  # a new thread's current device is 0, not the worker's
            for size in self.sizes:
                self.buffers.append(torch.empty(size, dtype=torch.uint8, device="cpu", pin_memory=True))
        except BaseException as exc:  # the first sleep pins what is missing itself
            self.error = exc
        self.seconds = time.perf_counter() - started

    def join(self) -> "_HeldBackups":
        """Waits for the thread; returns its buffers, held for the first sleep."""
        waited = time.perf_counter()
        self._thread.join()
        gib = sum(self.sizes) / 1024**3
        outcome = f"failed ({type(self.error).__name__}: {self.error})" if self.error else "done"
        print(f"runner: sleep buffers pinned ahead: {gib:.2f} GiB in {len(self.sizes)} buffers, {outcome}, "
              f"{self.seconds:.2f} s on its thread, {time.perf_counter() - waited:.2f} s waited at graph capture",
              file=sys.stderr)
        buffers, self.buffers = self.buffers, []
        return _HeldBackups(buffers)


class _HeldBackups:
    """The buffers pinned ahead, held until the first sleep and handed to its weight backups by size, once each,
    instead of left in torch's host cache for it to find (vLLM's allocator asks for each backup with
    `torch.empty(size, dtype=uint8, device="cpu", pin_memory=True)`). What it does not take goes to that cache."""

    def __init__(self, buffers: list):
        self.offered = len(buffers)
        self.taken = 0
        self._by_size: dict[int, list] = {}
        for buffer in buffers:
            self._by_size.setdefault(buffer.numel(), []).append(buffer)

    def take(self, args: tuple, kwargs: dict):
        """A held buffer for this `torch.empty` call, or None where the call is not a backup's of a held size."""
        import torch

        if len(args) != 1 or not isinstance(args[0], int) or not kwargs.get("pin_memory"):
            return None
        if kwargs.get("dtype") is not torch.uint8 or str(kwargs.get("device", "cpu")) != "cpu":
            return None
        free = self._by_size.get(args[0])
        if not free:
            return None
        self.taken += 1
        return free.pop()

    def __enter__(self) -> "_HeldBackups":
        import torch

        self._empty = empty = torch.empty

        def empty_or_held(*args, **kwargs):
            held = self.take(args, kwargs)
            return held if held is not None else empty(*args, **kwargs)

        torch.empty = empty_or_held
        return self

    def __exit__(self, *exc) -> None:
        import torch

        torch.empty = self._empty
        self._by_size.clear()
        print(f"runner: first sleep's backups: {self.taken} of {self.offered} buffers from those pinned ahead",
              file=sys.stderr)


def _sleep_mode_on_cuda(worker) -> bool:
    import torch

    model_config = getattr(getattr(worker, "vllm_config", None), "model_config", None)
    return bool(getattr(model_config, "enable_sleep_mode", False)) and torch.cuda.is_available()


WORKER_METHODS = ("load_model", "compile_or_warm_up_model", "sleep")


def _vllm_classes() -> tuple:
    """vLLM's GPU worker and its sleep allocator; raises where this vLLM lacks a name the wrapping uses."""
    from vllm.device_allocator.cumem import CuMemAllocator
    from vllm.v1.worker.gpu_worker import Worker

    missing = [f"Worker.{name}" for name in WORKER_METHODS if not callable(getattr(Worker, name, None))]
    if not callable(getattr(CuMemAllocator, "get_instance", None)):
        missing.append("CuMemAllocator.get_instance")
    if missing:
        raise AttributeError("missing " + ", ".join(missing))
    return Worker, CuMemAllocator


def install() -> bool:
    """Wraps vLLM's GPU worker: after `load_model` a thread pins the sleep's buffers; `compile_or_warm_up_model`
    (CUDA graph capture) waits for it. Returns whether it is installed."""
    try:
        worker, allocator = _vllm_classes()
        wrap_worker(worker, allocator)
    except Exception as exc:  # another vLLM's names: its first sleep pins as it always did
        notice.not_applied(PIECE, f"{type(exc).__name__}: {exc}; the first sleep pins as vLLM has it")
        return False
    notice.applied(PIECE, "Worker.load_model, compile_or_warm_up_model and sleep wrapped; torch.empty during the "
                          "first sleep")
    return True


def check() -> Check:
    """vLLM's names, looked up without wrapping; inactive off CUDA (no sleep mode, no pinned memory)."""
    import torch

    _vllm_classes()
    if not torch.cuda.is_available():
        return Check(active=False, reason="CUDA only: no CUDA device here (vLLM's names are present)")
    return Check(active=True)


def wrap_worker(worker_class, allocator_class) -> None:
    """The wrapping itself, on vLLM's classes (or stand-ins in a test)."""
    load_model, compile_or_warm_up = worker_class.load_model, worker_class.compile_or_warm_up_model
    sleep = getattr(worker_class, "sleep", None)
    allocator_module = inspect.getmodule(allocator_class)

    def load_model_then_pin(self, *args, **kwargs):
        result = load_model(self, *args, **kwargs)
        try:
            if _sleep_mode_on_cuda(self):
                sizes = offloaded_sizes(allocator_class.get_instance().pointer_to_data)
                self._runner_pinning = _Pinning(sizes, self.device).start()
            else:
                notice.not_applied(PIECE, "this worker runs without sleep mode on CUDA: nothing to pin")
        except Exception as exc:  # the allocator's records differ: the first sleep pins as vLLM has it
            notice.not_applied(PIECE, f"sleep buffers not pinned ahead: {type(exc).__name__}: {exc}")
        return result

    def compile_after_pinning(self, *args, **kwargs):
        pinning = getattr(self, "_runner_pinning", None)
        if pinning is not None:
            self._runner_backups = pinning.join()
            self._runner_pinning = None
        return compile_or_warm_up(self, *args, **kwargs)

    def sleep_split(self, *args, **kwargs):
        number = getattr(self, "_runner_sleeps", 0) + 1
        self._runner_sleeps = number
        if number > len(_SleepSplit.ORDINALS):
            return sleep(self, *args, **kwargs)
        held, self._runner_backups = getattr(self, "_runner_backups", None), None
        with held or contextlib.nullcontext(), _SleepSplit(_SleepSplit.ORDINALS[number - 1], allocator_module):
            return sleep(self, *args, **kwargs)

    worker_class.load_model = load_model_then_pin
    worker_class.compile_or_warm_up_model = compile_after_pinning
    if sleep is not None:
        worker_class.sleep = sleep_split


_MISSING = object()


class _SleepSplit:
    """Times the parts of a sleep that vLLM's allocator calls by name: with its buffers pinned ahead the first sleep
    still runs several times a later one on the H200 (docs/benchmarks.md); the first and the second sleep's log
    lines, side by side, say which part that is. Later sleeps run untouched."""

    ORDINALS = ("first", "second")

    def __init__(self, ordinal: str, allocator_module=None):
        self.ordinal = ordinal
        self.allocator_module = allocator_module
        self.spent: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._put_back: list[tuple] = []

    def _parts(self) -> list[tuple]:
        """(owner, attribute, label, counts): what a level-1 sleep calls (vLLM's CuMemAllocator.sleep)."""
        import gc

        import torch

        module = self.allocator_module
        pinned = lambda args, kwargs: bool(kwargs.get("pin_memory"))  # noqa: E731 (only the backups' buffers)
        parts = [(gc, "collect", "gc.collect", None),
                 (torch.cuda, "empty_cache", "torch.cuda.empty_cache", None),
                 (torch, "empty", "pinned host buffers", pinned),
                 (getattr(module, "libcudart", None), "cudaMemcpy", "copies to host", None),
                 (module, "unmap_and_release", "unmap and release", None)]
        return [part for part in parts if part[0] is not None and callable(getattr(part[0], part[1], None))]

    def __enter__(self) -> "_SleepSplit":
        for owner, attribute, label, counts in self._parts():
            self.spent[label], self.calls[label] = 0.0, 0
            own = vars(owner).get(attribute, _MISSING) if hasattr(owner, "__dict__") else _MISSING
            self._put_back.append((owner, attribute, own))
            setattr(owner, attribute, self._timed(label, getattr(owner, attribute), counts))
        self._started = time.perf_counter()
        return self

    def _timed(self, label: str, call, counts):
        def timed(*args, **kwargs):
            if counts is not None and not counts(args, kwargs):
                return call(*args, **kwargs)
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.spent[label] += time.perf_counter() - started
                self.calls[label] += 1
        return timed

    def __exit__(self, *exc) -> None:
        total = time.perf_counter() - self._started
        for owner, attribute, own in reversed(self._put_back):
            if own is _MISSING:
                delattr(owner, attribute)  # an instance's bound method: the class's shows through again
            else:
                setattr(owner, attribute, own)
        parts = ", ".join(f"{label} {seconds:.2f} s ({self.calls[label]})" for label, seconds in self.spent.items())
        rest = total - sum(self.spent.values())
        print(f"runner: {self.ordinal} sleep {total:.2f} s: {parts}, the rest {rest:.2f} s", file=sys.stderr)
