"""The run folder before anything is written there: the output root tested for writing, and one command per run
folder, through a lock file in the folder that names its holder (host, pid, start time).

The lock is the kernel's (`flock` on the file), so it ends with the holder's process however that ends: a
second command finds it held and is refused with the holder named; a file whose lock is free but still names
a holder was left by a command that did not end cleanly (SIGKILL, power loss), and is taken over with a line
saying so. The file stays after a clean end, empty: removing it could let two commands lock two files.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

LOCK_NAME = ".run.lock"
CONFIG_NAME = "config.yaml"  # the config the folder's results were run with (written as a sweep starts)


def unwritable_reason(folder: Path) -> Optional[str]:
    """Why `folder` cannot take results (None where it can): created where missing, then a file written and
    removed in it."""
    if Path(folder).exists() and not Path(folder).is_dir():
        return "it is a file, not a folder"
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


@dataclass(frozen=True, kw_only=True)
class LockHolder:
    """The command that holds (or held) a run folder."""

    host: str
    pid: int
    started: str  # local time, ISO 8601

    @classmethod
    def this_process(cls) -> "LockHolder":
        return cls(host=socket.gethostname(), pid=os.getpid(), started=time.strftime("%Y-%m-%dT%H:%M:%S%z"))

    @classmethod
    def parse(cls, text: str) -> Optional["LockHolder"]:
        try:
            data = json.loads(text)
            return cls(host=str(data["host"]), pid=int(data["pid"]), started=str(data["started"]))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}"

    def gone(self) -> bool:
        """True where this holder's process is known to have ended (same host, no such pid)."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class RunFolderBusy(RuntimeError):
    """Another command holds the run folder."""

    def __init__(self, *, run_dir: Path, holder: Optional[LockHolder]):
        self.run_dir, self.holder = run_dir, holder
        who = holder.describe() if holder else "a command that has not yet written its name"
        detail = ""
        if holder is not None and holder.gone():
            # The kernel's lock outlives a killed process only through a child that kept the file open.
            detail = f" (that pid has ended, but a process it started still holds {run_dir / LOCK_NAME})"
        super().__init__(f"run folder {run_dir} is in use by another command: {who}{detail} (fix: wait for it to "
                         f"end, or run=<another name> for a separate run)")


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks).decode("utf-8", errors="replace")
        chunks.append(chunk)


def _write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, text.encode())
    os.fsync(fd)


@contextmanager
def hold_run_folder(run_dir: Path, *, say: Callable[[str], None] = print) -> Iterator[LockHolder]:
    """Holds `run_dir` for this process while the block runs; RunFolderBusy where another command holds it."""
    run_dir = Path(run_dir)
    path = run_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = None
            for _ in range(20):  # the holder writes its name just after it locks
                holder = LockHolder.parse(_read(fd))
                if holder is not None:
                    break
                time.sleep(0.05)
            raise RunFolderBusy(run_dir=run_dir, holder=holder) from None
        left = _read(fd).strip()
        if left:
            previous = LockHolder.parse(left)
            who = previous.describe() if previous else "an earlier command"
            say(f"note: taking over the lock of {run_dir} left by {who}, which ended without releasing it")
        me = LockHolder.this_process()
        _write(fd, json.dumps(asdict(me)) + "\n")
        try:
            yield me
        finally:
            _write(fd, "")
    finally:
        os.close(fd)  # releases the kernel's lock
