"""How vLLM's engine-core process starts inside an actor: forked from a warm fork server, not spawned cold.

vLLM forces `spawn` inside a Ray actor (forking a process that runs Ray's threads is unsafe), so every engine
load started a fresh interpreter that imported vLLM again: ~13 s on a 2-core machine, ~30 s of each load on the
H200 host. A fork server is what `spawn` is for, without the cost: a clean interpreter started by exec (no Ray
threads in it), with
vLLM imported once, ahead of the load; each engine core forks from it. Its children are what spawn would
give them: the actor's environment as it is at `start()`, the same pickled target. Only the engine core comes
from the fork server: its workers start as vLLM says (`VLLM_WORKER_MULTIPROC_METHOD`, which vLLM's CPU platform
sets to spawn). On CPU that matters for the figures: a worker forked from a process that already loaded OpenMP
keeps that process's OpenMP settings instead of the ones vLLM sets for it (measured: spec-off decode ×0.77 at
c=1 with forked workers; bench/engine_start.py).

Not forking leaves vLLM as it is (its own spawn). The fork server is per actor process (one engine per actor) and stays
for the actor's life: vLLM watches its engine core through the fork server's status pipe (~0.35 GB PSS on CPU).
"""
from __future__ import annotations

import importlib.util
import multiprocessing
import os
from multiprocessing.context import ForkServerProcess

from runner.vllm import notice
from runner.vllm.draft_count import install as install_draft_count
from runner.vllm.ngram_jit import NGRAM_JIT_ENV
from runner.vllm.ngram_jit import install as install_ngram_jit
from runner.vllm.sleep_pinning import PIN_AHEAD_ENV
from runner.vllm.sleep_pinning import install as install_sleep_pinning
from runner.vllm.versions import Check

PIECE = "fork_server"

# Imported once in the fork server: what the engine core and its executor import before they run.
PRELOAD = ("vllm.v1.engine.core", "vllm.v1.executor.multiproc_executor", "vllm.v1.executor.uniproc_executor")


class _CarriedEnvProcess(ForkServerProcess):
    """A fork-server child that runs with the parent's environment of the moment it was started (vLLM sets
    variables in os.environ just before `start()`, which a spawned child would inherit)."""

    def start(self):
        self._carried_env = dict(os.environ)
        super().start()

    def run(self):
        _die_with_parent()
        _let_the_fork_server_go()
        carried = getattr(self, "_carried_env", None)
        if carried is not None:
            os.environ.clear()
            os.environ.update(carried)
        if os.environ.get(PIN_AHEAD_ENV) == "1":
            install_sleep_pinning()
        if os.environ.get(NGRAM_JIT_ENV) == "1":
            install_ngram_jit()
        install_draft_count()  # one utility method: the draft count set between trials (runner.vllm.draft_count)
        super().run()


def _let_the_fork_server_go() -> None:
    """A fork-server child holds the server's "alive" pipe (so that it could use the server too), which keeps the
    server running for as long as the child lives; the engine core does not use it (vLLM starts its workers with
    its own context), and with it closed the server goes when its actor goes, and the engine core with it."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is None:
        return
    try:
        os.close(fd)
    except OSError:
        pass
    server._forkserver_alive_fd = None


def _die_with_parent() -> None:
    """A spawned engine core is the actor's child and goes when Ray kills the actor's children; a forked one is
    the fork server's child, so it asks the kernel to kill it when the fork server goes (which goes with the
    actor). Its workers follow it through vLLM's own death pipe."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the fork server went before the call above took effect
        os._exit(1)


class _ForkServerContext:
    """Stands in for the context vLLM's `get_mp_context()` returns, where the engine core is started."""

    def __init__(self):
        self._ctx = multiprocessing.get_context("forkserver")

    def Process(self, *args, **kwargs):  # noqa: N802 (multiprocessing's name)
        return _CarriedEnvProcess(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _noop() -> None:
    pass


def begin_fork_server() -> None:
    """Launches this process's fork server, which imports PRELOAD in its own process: call it before this
    process's own imports so that the two run side by side. Idempotent."""
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()


def warm_fork_server() -> None:
    """Returns once the fork server has imported PRELOAD (a first child forked from it answers only then), so
    that the import is paid in `prepare` and not beside a trial."""
    begin_fork_server()
    probe = multiprocessing.get_context("forkserver").Process(target=_noop, daemon=True)
    probe.start()
    probe.join()


def _engine_utils():
    """vLLM's module that starts the engine core, where `get_mp_context` is replaced; raises where it lacks it."""
    import vllm.v1.engine.utils as engine_utils

    if not callable(getattr(engine_utils, "get_mp_context", None)):
        raise AttributeError("vllm.v1.engine.utils has no get_mp_context")
    return engine_utils


def use_fork_server(wanted: bool) -> bool:
    """Installs the fork server for the engine cores this process starts where `wanted`; returns whether it is in
    effect (not where this vLLM has no place to install it: its engine cores are then spawned, and the log says
    why). The caller's setting comes in as a value: the seam reads no runner config."""
    if not wanted:
        notice.not_applied(PIECE, "engine_start=spawn: the engine core starts as vLLM has it")
        return False
    try:
        engine_utils = _engine_utils()
    except (ImportError, AttributeError) as exc:
        notice.not_applied(PIECE, f"{type(exc).__name__}: {exc}; the engine core is spawned")
        return False
    warm_fork_server()
    context = _ForkServerContext()
    engine_utils.get_mp_context = lambda: context
    notice.applied(PIECE, "vllm.v1.engine.utils.get_mp_context: the engine core forks from this actor's fork server")
    return True


def check() -> Check:
    _engine_utils()
    missing = [name for name in PRELOAD if importlib.util.find_spec(name) is None]
    if missing:
        return Check(active=False, reason=f"preload modules missing: {', '.join(missing)}")
    return Check(active=True)
