"""The fork server an engine core starts from: the child runs with the parent's environment of the moment it
started (as a spawned one would) and goes when the fork server goes (which goes with its actor). A real engine
started from it while `prepare` still imports: tests/engine/test_warmup_order.py (its auto warm-up engine)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runner.config.execution import EngineStart
from runner.vllm import fork_server

pytestmark = pytest.mark.engine


def _report_env_then_wait(path: str) -> None:
    Path(path).write_text(f"{os.environ.get('LATE_SETTING')} {os.environ.get('VLLM_WORKER_MULTIPROC_METHOD')} "
                          f"{os.getpid()}")
    time.sleep(120)


def test_auto_is_the_fork_server_and_an_explicit_method_stays():
    assert EngineStart.AUTO.resolved() is EngineStart.FORKSERVER
    assert EngineStart.SPAWN.resolved() is EngineStart.SPAWN


def test_a_forked_engine_core_carries_the_environment_and_dies_with_its_fork_server(tmp_path, monkeypatch):
    from multiprocessing import forkserver

    monkeypatch.setattr(fork_server, "PRELOAD", ())  # vLLM's import is not what is tested here
    fork_server.warm_fork_server()
    monkeypatch.setenv("LATE_SETTING", "set-after-the-server-started")
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # as vLLM's CPU platform sets it: kept
    out = tmp_path / "child.txt"
    child = fork_server._ForkServerContext().Process(target=_report_env_then_wait, args=(str(out),), daemon=True)
    child.start()
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    late, method, pid = out.read_text().split()
    assert (late, method) == ("set-after-the-server-started", "spawn")
    forkserver._forkserver._stop()  # what an actor's death does to its fork server
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
