"""tests/unit: pure logic. A unit test spawns nothing: no subprocess, no fork, no Ray, no vLLM engine.

Enforced around every test here: subprocess.Popen (and so subprocess.run, asyncio's subprocesses and Ray's
daemons), os.fork/forkpty/posix_spawn/posix_spawnp/system, the fork-exec behind multiprocessing's spawn and
forkserver, and ray.init (where Ray is already imported; it is not imported for this) raise SpawnedProcess. A test
that swallows the error still fails, at teardown. Tests that need a process belong in tests/cli (the command line,
no engine) or tests/engine (real engines, marked `engine`).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

MESSAGE = "a unit test spawned a process: move it to tests/cli or tests/engine"


class SpawnedProcess(RuntimeError):
    """Raised by anything that would start a process during a unit test."""


@pytest.fixture(scope="session", autouse=True)
def once_per_process_probes():
    """Done once per session, before the guard is up, so that no unit test spawns them:
    - system probes that libraries make once per process when first imported: the stdlib's
      platform.uname().processor runs `uname -p` (vLLM's platform detection reads it), py-cpuinfo runs
      `file -b <python>` (platform.architecture()) at import (vLLM's usage stats import it);
    - matplotlib builds its font cache on first use in a process without one (it runs fc-list);
    - make_plan checks engine arguments against the installed vLLM's rules, cached on disk per vLLM version; on a
      cold cache they are extracted once in a subprocess (runner/plan/engine_args.py)."""
    import platform

    from runner.plan.engine_args import load_spec

    platform.uname().processor  # noqa: B018 (a cached property: computed once here)
    try:
        import cpuinfo  # noqa: F401
    except ImportError:
        pass
    load_spec()
    from runner.report.plots import font_cache

    font_cache()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.unit_call_failed = report.failed
    return report


@pytest.fixture(autouse=True)
def no_processes(request):
    attempts: list[str] = []

    def refuse(what: str):
        def spawn(*args, **kwargs):
            attempts.append(what)
            raise SpawnedProcess(f"{MESSAGE} ({what})")
        return spawn

    with pytest.MonkeyPatch.context() as mp:  # its own: a test's monkeypatch.undo() does not lift the guard
        mp.setattr(subprocess.Popen, "__init__", refuse("subprocess.Popen"))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            mp.setattr(os, name, refuse(f"os.{name}"), raising=False)
        posixsubprocess = sys.modules.get("_posixsubprocess")
        if posixsubprocess is not None:
            mp.setattr(posixsubprocess, "fork_exec", refuse("_posixsubprocess.fork_exec"))
        if "ray" in sys.modules:
            mp.setattr(sys.modules["ray"], "init", refuse("ray.init"), raising=False)
        yield
    if attempts and not getattr(request.node, "unit_call_failed", False):
        pytest.fail(f"{MESSAGE}: {', '.join(attempts)} (the error was caught inside the test)", pytrace=False)
