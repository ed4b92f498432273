"""The n-gram proposer's kernel compiled during vLLM's init, on a thread, instead of in the engine's first decode.

vLLM's NgramProposer means to trigger its Numba JIT in `__init__`, but calls `propose` with empty token lists, which
skip the kernel: it compiles in the first real decode step instead, so an n-gram engine's first warm-up pays it
(over a second, on the H200 host as on CPU: docs/benchmarks.md), on the command's critical path. Here a thread
compiles the kernel for the argument types the proposer passes (its own buffers, the input batch's int32 arrays,
Python ints) while vLLM's init goes on; the compile is mostly LLVM work, which leaves the GIL to the init's
thread. The first decode then finds the compiled kernel (or waits on Numba's compiler lock for it).

Installed in the engine-core process where the actor's engine drafts with n-grams (`NGRAM_JIT_ENV`, set by
runner/scheduling/actor_spec.py) and only on CUDA, where the worker runs in that process; a vLLM whose proposer
differs leaves the first decode as vLLM has it, and says so in the log (runner.vllm.notice).
"""
from __future__ import annotations

import sys
import threading
import time

from runner.vllm import notice
from runner.vllm.versions import Check

PIECE = "ngram_jit"
NGRAM_JIT_ENV = "RUNNER_NGRAM_JIT_AHEAD"


def argument_types(proposer) -> tuple:
    """The Numba types of `batch_propose_numba`'s arguments as vLLM's V1 model runner passes them."""
    import numba
    import numpy as np

    return (numba.typeof([0]),  # the indices of the requests that get drafts: a list of Python ints
            numba.typeof(np.zeros(1, dtype=np.int32)),  # input_batch.num_tokens_no_spec
            numba.typeof(np.zeros((1, 1), dtype=np.int32)),  # input_batch.token_ids_cpu
            *(numba.typeof(int(value)) for value in (proposer.min_n, proposer.max_n, proposer.max_model_len,
                                                     proposer.k)),
            numba.typeof(proposer.valid_ngram_draft), numba.typeof(proposer.valid_ngram_num_drafts))


def compile_ahead(kernel, proposer) -> threading.Thread:
    """Starts the thread that compiles `kernel` for `proposer`'s calls and says in the log how long it took."""

    def run() -> None:
        started = time.perf_counter()
        try:
            kernel.compile(argument_types(proposer))
            outcome = "done"
        except Exception as exc:  # the first decode compiles as vLLM has it
            outcome = f"failed ({type(exc).__name__}: {exc})"
        print(f"runner: n-gram proposer's kernel compiled ahead: {outcome}, {time.perf_counter() - started:.2f} s "
              f"on its thread", file=sys.stderr)

    thread = threading.Thread(target=run, name="runner-ngram-jit", daemon=True)
    thread.start()
    return thread


def wrap_proposer(proposer_class, kernel) -> None:
    """After the proposer's own `__init__`, the thread starts (on vLLM's classes, or stand-ins in a test)."""
    init = proposer_class.__init__

    def init_then_compile(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._runner_jit = compile_ahead(kernel, self)

    proposer_class.__init__ = init_then_compile


PROPOSER_FIELDS = ("min_n", "max_n", "max_model_len", "k", "valid_ngram_draft", "valid_ngram_num_drafts")


def _vllm_names() -> tuple:
    """vLLM's proposer class and its kernel; raises where this vLLM lacks a name the wrapping uses."""
    from vllm.v1.spec_decode.ngram_proposer import NgramProposer, batch_propose_numba

    if not callable(getattr(batch_propose_numba, "compile", None)):
        raise AttributeError("batch_propose_numba is not a Numba dispatcher (no compile)")
    assigned = set(getattr(NgramProposer.__init__, "__code__", None) and NgramProposer.__init__.__code__.co_names)
    missing = [name for name in PROPOSER_FIELDS if name not in assigned]
    if missing:  # argument_types reads them off the proposer
        raise AttributeError(f"NgramProposer.__init__ sets no {', '.join(missing)}")
    return NgramProposer, batch_propose_numba


def _on_cuda() -> tuple[bool, str]:
    from runner.vllm.device import is_cuda

    if is_cuda():
        return True, ""
    # The CPU worker runs in a process of its own, where this one's classes are not used.
    return False, "CUDA only: the worker does not run in the engine-core process here"


def install() -> bool:
    """Wraps vLLM's NgramProposer where the worker runs in this process (CUDA). Returns whether it is installed."""
    try:
        cuda, why = _on_cuda()
        if not cuda:
            notice.not_applied(PIECE, why + "; the first decode compiles as vLLM has it")
            return False
        proposer, kernel = _vllm_names()
        wrap_proposer(proposer, kernel)
    except Exception as exc:  # another vLLM's names: the first decode compiles as it always did
        notice.not_applied(PIECE, f"{type(exc).__name__}: {exc}; the first decode compiles as vLLM has it")
        return False
    notice.applied(PIECE, "NgramProposer.__init__ wrapped: batch_propose_numba compiles on a thread")
    return True


def check() -> Check:
    """vLLM's names, looked up without wrapping; inactive off CUDA."""
    _vllm_names()
    cuda, why = _on_cuda()
    return Check(active=cuda, reason=why and why + " (vLLM's names are present)")
