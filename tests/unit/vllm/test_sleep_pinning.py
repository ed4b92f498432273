"""The first sleep's buffers pinned during vLLM's init: which sizes, and the wrapping's order (stand-in classes:
on CPU vLLM's worker runs in a process of its own and nothing sleeps)."""
from __future__ import annotations

import collections

from runner.vllm import sleep_pinning

Allocation = collections.namedtuple("Allocation", "handle tag")
ALLOCATIONS = {1: Allocation((0, 64 << 20), "weights"), 2: Allocation((0, 8 << 30), "kv_cache"),
               3: Allocation((0, 2 << 20), "weights")}


def test_the_buffers_pinned_ahead_are_those_a_level_one_sleep_backs_up():
    assert sleep_pinning.offloaded_sizes(ALLOCATIONS) == [64 << 20, 2 << 20]


def _stand_ins(calls: list, allocations=ALLOCATIONS):
    class Allocator:
        pointer_to_data = allocations

        @classmethod
        def get_instance(cls):
            return cls

    class Worker:
        device = "cuda:0"

        def load_model(self, *, load_dummy_weights=False):
            calls.append(("load", load_dummy_weights))

        def compile_or_warm_up_model(self):
            calls.append(("compile", getattr(self, "_runner_pinning", None)))
            return "compiled"

    sleep_pinning.wrap_worker(Worker, Allocator)
    return Worker


def test_the_pinning_starts_after_the_load_and_ends_before_graph_capture(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(sleep_pinning, "_sleep_mode_on_cuda", lambda worker: True)
    worker = _stand_ins(calls)()
    worker.load_model(load_dummy_weights=True)
    assert worker._runner_pinning.sizes == [64 << 20, 2 << 20]
    assert worker.compile_or_warm_up_model() == "compiled"
    assert calls == [("load", True), ("compile", None)]  # joined (and dropped) before the capture ran
    assert worker._runner_backups.offered == 0  # nothing pinned (no CUDA): the first sleep pins for itself
    # No CUDA here: the thread's failure is caught and said; the first sleep would pin as vLLM has it.
    assert "runner: sleep buffers pinned ahead: 0.06 GiB in 2 buffers, failed" in capsys.readouterr().err


def test_an_engine_that_does_not_sleep_on_cuda_pins_nothing(monkeypatch):
    calls: list = []
    monkeypatch.setattr(sleep_pinning, "_sleep_mode_on_cuda", lambda worker: False)
    worker = _stand_ins(calls)()
    worker.load_model()
    assert not hasattr(worker, "_runner_pinning") and worker.compile_or_warm_up_model() == "compiled"


def test_allocator_records_it_cannot_read_leave_the_load_and_the_first_sleep_as_vllm_has_them(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(sleep_pinning, "_sleep_mode_on_cuda", lambda worker: True)
    worker = _stand_ins(calls, allocations={1: Allocation(None, "weights")})()
    worker.load_model()
    assert not hasattr(worker, "_runner_pinning") and worker.compile_or_warm_up_model() == "compiled"
    assert ("runner: vllm patch sleep_pinning: not applied: sleep buffers not pinned ahead: TypeError"
            in capsys.readouterr().err)


def test_the_first_two_sleeps_say_where_their_seconds_went_and_later_sleeps_run_untouched(capsys):
    import gc
    import types

    import torch

    class Library:
        def cudaMemcpy(self, dst, src, size):  # noqa: N802 (vLLM's name)
            return 0

    # A stand-in for vLLM's cumem module: the names its allocator's sleep calls.
    cumem = types.ModuleType("stand_in_cumem")
    cumem.libcudart = Library()
    cumem.unmap_and_release = lambda handle: None

    class Allocator:
        pass

    Allocator.__module__ = cumem.__name__
    originals = (gc.collect, torch.cuda.empty_cache, torch.empty, cumem.unmap_and_release)
    timed: list = []

    class Worker:
        def load_model(self):
            pass

        def compile_or_warm_up_model(self):
            pass

        def sleep(self, level=1):  # what vLLM's allocator calls in a level-1 sleep, by name
            timed.append(gc.collect is not originals[0])
            backup = torch.empty(16, dtype=torch.uint8, device="cpu", pin_memory=False)
            cumem.libcudart.cudaMemcpy(backup.data_ptr(), 0, 16)
            cumem.unmap_and_release((0, 16))
            gc.collect()
            return level

    import sys

    sys.modules[cumem.__name__] = cumem
    try:
        sleep_pinning.wrap_worker(Worker, Allocator)
        worker = Worker()
        assert worker.sleep(level=1) == 1
        first = capsys.readouterr().err
        assert worker.sleep() == 1
        second = capsys.readouterr().err
        assert worker.sleep() == 1 and capsys.readouterr().err == ""
    finally:
        del sys.modules[cumem.__name__]
    assert (gc.collect, torch.cuda.empty_cache, torch.empty, cumem.unmap_and_release) == originals  # put back
    assert "cudaMemcpy" not in vars(cumem.libcudart)  # the instance's timer gone: the class's method again
    assert first.startswith("runner: first sleep") and second.startswith("runner: second sleep")
    for part in ("gc.collect", "torch.cuda.empty_cache", "copies to host 0.00 s (1)", "unmap and release",
                 "pinned host buffers 0.00 s (0)", "the rest"):  # an unpinned buffer is no backup's
        assert part in first
    assert timed == [True, True, False]  # the first two sleeps' calls went through the timers, the third's not


def test_the_first_sleep_takes_the_buffers_pinned_ahead_by_size_once_each_and_later_sleeps_pin_as_vllm_has_it(
        capsys):
    import torch

    held = [torch.empty(n, dtype=torch.uint8) for n in (4096, 4096, 512)]  # stand-ins for pinned buffers
    original_empty = torch.empty
    got: list = []

    class Worker:
        def load_model(self):
            pass

        def compile_or_warm_up_model(self):
            pass

        def sleep(self, level=1):  # vLLM's allocator asks for each weight's backup by size, by name
            got.append([torch.empty(n, dtype=torch.uint8, device="cpu", pin_memory=True) for n in (4096, 4096, 4096)])
            got[-1].append(torch.empty(512, dtype=torch.float16, device="cpu", pin_memory=True))  # no backup's
            return level

    sleep_pinning.wrap_worker(Worker, object)
    worker = Worker()
    worker._runner_backups = sleep_pinning._HeldBackups(held)
    torch.empty = _unpinned(original_empty)  # this machine has no pinned memory: the stand-in pins nothing
    try:
        worker.sleep()
        worker.sleep()
    finally:
        torch.empty = original_empty
    first, second = got
    assert {id(t) for t in first[:2]} == {id(held[0]), id(held[1])}  # each held buffer handed once
    assert all(t is not h for t in first[2:] for h in held)  # a third of that size, and another dtype: vLLM's own
    assert all(t is not h for t in second for h in held)  # the second sleep: nothing held any more
    assert "runner: first sleep's backups: 2 of 3 buffers from those pinned ahead" in capsys.readouterr().err


def _unpinned(empty):
    def without_pinning(*args, **kwargs):
        kwargs.pop("pin_memory", None)
        return empty(*args, **kwargs)
    return without_pinning
