"""The first sleep's buffers pinned during vLLM's init: which sizes, and the wrapping's order (stand-in classes:
on CPU vLLM's worker runs in a process of its own and nothing sleeps)."""
from __future__ import annotations

import collections

from runner.execution import sleep_pinning

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
    assert "runner: sleep buffers not pinned ahead: TypeError" in capsys.readouterr().err


def test_the_first_sleep_says_where_its_seconds_went_and_later_sleeps_run_untouched(capsys):
    import gc

    import torch

    originals = (gc.collect, torch.cuda.empty_cache)
    timed: list = []

    class Worker:
        def load_model(self):
            pass

        def compile_or_warm_up_model(self):
            pass

        def sleep(self, level=1):
            timed.append(gc.collect is not originals[0])
            gc.collect()  # what vLLM's allocator calls at the end of a sleep, by name
            return level

    sleep_pinning.wrap_worker(Worker, object)
    worker = Worker()
    assert worker.sleep(level=1) == 1 and (gc.collect, torch.cuda.empty_cache) == originals  # put back
    first = capsys.readouterr().err
    assert "runner: first sleep" in first and "gc.collect" in first and "copies and releases" in first
    assert worker.sleep() == 1 and capsys.readouterr().err == ""
    assert timed == [True, False]  # only the first sleep's calls went through the timers
