"""The fork server an engine core starts from: the child runs with the parent's environment of the moment it
started (as a spawned one would) and goes when the fork server goes (which goes with its actor)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runner.config.schema import EngineStart
from runner.execution import engine_process

pytestmark = pytest.mark.engine


def _report_env_then_wait(path: str) -> None:
    Path(path).write_text(f"{os.environ.get('LATE_SETTING')} {os.environ.get('VLLM_WORKER_MULTIPROC_METHOD')} "
                          f"{os.getpid()}")
    time.sleep(120)


def test_auto_is_forkserver_on_cpu_and_spawn_on_cuda():
    assert engine_process.resolve(EngineStart.AUTO, device="cpu") is EngineStart.FORKSERVER
    assert engine_process.resolve(EngineStart.AUTO, device="cuda") is EngineStart.SPAWN
    assert engine_process.resolve(EngineStart.SPAWN, device="cpu") is EngineStart.SPAWN


def test_a_forked_engine_core_carries_the_environment_and_dies_with_its_fork_server(tmp_path, monkeypatch):
    from multiprocessing import forkserver

    monkeypatch.setattr(engine_process, "PRELOAD", ())  # vLLM's import is not what is tested here
    engine_process.warm_fork_server()
    monkeypatch.setenv("LATE_SETTING", "set-after-the-server-started")
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # as vLLM's CPU platform sets it: kept
    out = tmp_path / "child.txt"
    child = engine_process._ForkServerContext().Process(target=_report_env_then_wait, args=(str(out),), daemon=True)
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
