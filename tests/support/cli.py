"""Runs `python -m runner` as a user would (W&B offline) and watches what its process session leaves behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def base_sweep(overrides) -> list[str]:
    """Tests build on `sweep=quick` (one repeat) unless they name a sweep, so that the demo can change without
    changing them."""
    overrides = list(overrides)
    return overrides if any(o.startswith("sweep=") for o in overrides) else ["sweep=quick", *overrides]


def run_cli(*overrides: str, output_root: Path, timeout: int = 1500, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
    """Runs `python -m runner` as a user would, with W&B offline inside the test's folder."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1", **(env or {})}
    cmd = [sys.executable, "-m", "runner", f"output_root={output_root}", *base_sweep(overrides)]
    proc = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
                             f"\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


def run_cli_batch(commands: list[dict], *, timeout: int = 900) -> list[subprocess.CompletedProcess]:
    """Many command lines in one interpreter (tests/support/cli_batch.py), each answered as run_cli's (exit code,
    stdout, stderr): for refusals and dry runs, whose cost is the interpreter's imports, not the command. Each
    command is {"overrides": [...], "output_root": Path} (run_cli's command line) or {"argv": [...]} (a subcommand
    as typed after `python -m runner`), with an optional "env" of its own."""
    batch = []
    for c in commands:
        argv = c["argv"] if "argv" in c else [f"output_root={c['output_root']}", *base_sweep(c["overrides"])]
        batch.append({"argv": [str(a) for a in argv], "env": {k: str(v) for k, v in (c.get("env") or {}).items()}})
    full_env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "tests.support.cli_batch"], input=json.dumps(batch), cwd=ROOT,
                          env=full_env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"the batch exited {proc.returncode}\n{proc.stderr[-6000:]}")
    return [subprocess.CompletedProcess(r["argv"], r["code"], r["stdout"], r["stderr"])
            for r in json.loads(proc.stdout.splitlines()[-1])]


class WarmCli:
    """`python -m runner` command lines answered one by one by one interpreter kept by its owner
    (tests/support/cli_batch.py --serve), each as run_cli's (exit code, stdout, stderr): for refusals and dry runs,
    whose cost is the interpreter's imports, not the command. A command that must meet a fresh process (a cold
    cache read once per process, signals, what it leaves running) stays with run_cli."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def _server(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.cli_batch", "--serve"], cwd=ROOT,
                                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return self.proc

    def argv(self, *argv, env: dict | None = None) -> subprocess.CompletedProcess:
        """A command as typed after `python -m runner` (a subcommand's arguments)."""
        from tests.support.cli_batch import MARK

        server = self._server()
        server.stdin.write(json.dumps({"argv": [str(a) for a in argv],
                                       "env": {k: str(v) for k, v in (env or {}).items()}}) + "\n")
        server.stdin.flush()
        for line in server.stdout:
            if line.startswith(MARK):
                r = json.loads(line[len(MARK):])
                return subprocess.CompletedProcess(r["argv"], r["code"], r["stdout"], r["stderr"])
        raise AssertionError(f"the warm CLI ended (exit {server.wait()}) before answering {list(argv)}")

    def __call__(self, *overrides: str, output_root: Path, env: dict | None = None) -> subprocess.CompletedProcess:
        """run_cli's command line (check=False)."""
        return self.argv(f"output_root={output_root}", *base_sweep(overrides), env=env)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None


def start_cli(*overrides: str, output_root: Path, env: dict | None = None) -> subprocess.Popen:
    """`python -m runner` in its own session (like a terminal's job), for signals and leftover checks."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1", **(env or {})}
    cmd = [sys.executable, "-m", "runner", f"output_root={output_root}", *base_sweep(overrides)]
    return subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def session_processes(sid: int) -> list[str]:
    """Processes still alive in session `sid` (a start_cli child's pid): engines, actors, Ray daemons."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) == sid:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                alive.append(f"{entry.name} {cmdline[:120]}")
        except (OSError, ProcessLookupError):
            continue
    return alive


def wait_until_gone(sid: int, *, timeout_s: float = 90) -> list[str]:
    """Waits for session `sid` to empty; what is still alive after `timeout_s` (nothing, when all went)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = session_processes(sid)
        if not left:
            return []
        time.sleep(1)
    return session_processes(sid)
