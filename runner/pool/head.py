"""The Ray head node that an engine pool lives on when the user named no cluster: started by the first command
with execution.keep_engines (`ray start --head --block` in a session of its own, so that the command's Ctrl-C and
exit leave it up), recorded in the cache folder, found by later commands, stopped by `pool release` once no pool
is left. Its own temp folder and ports: it never joins, nor is joined by, another Ray on the machine.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from runner.cache import cache_root

HEAD_START_TIMEOUT_S = 120.0
HEAD_STOP_TIMEOUT_S = 5.0  # then what is left of its session is killed


@dataclass(frozen=True, kw_only=True)
class HeadRecord:
    address: str  # 127.0.0.1:PORT
    pid: int  # `ray start --block`: the leader of the head's process session
    temp_dir: str
    log: str
    started_at: float


def pool_dir() -> Path:
    return cache_root() / "pool"


def record_path() -> Path:
    return pool_dir() / "head.json"


@contextlib.contextmanager
def head_lock() -> Iterator[None]:
    """One command at a time starts or stops the head."""
    import fcntl

    pool_dir().mkdir(parents=True, exist_ok=True)
    with open(pool_dir() / "head.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_record() -> Optional[HeadRecord]:
    try:
        return HeadRecord(**json.loads(record_path().read_text()))
    except (OSError, ValueError, TypeError):
        return None


def head_alive(record: HeadRecord) -> bool:
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    host, _, port = record.address.rpartition(":")
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


def running_head() -> Optional[HeadRecord]:
    """The head the runner started and that still runs (None: none)."""
    record = read_record()
    return record if record is not None and head_alive(record) else None


def pool_ray(*, address: Optional[str], pool: str, say=None) -> tuple[str, str]:
    """Where a pool's engines live, and its namespace: the cluster named (`address`), else the runner's own head
    node, started by the first command that keeps its engines (the engines outlive the command: so does it)."""
    from runner.pool.identity import pool_namespace

    return address or ensure_head(say=say).address, pool_namespace(pool)


def ensure_head(*, say=None) -> HeadRecord:
    """The running head, or a new one."""
    with head_lock():
        record = running_head()
        if record is not None:
            return record
        stale = read_record()
        if stale is not None:  # it died: what is left of it goes
            _stop(stale)
        return _start(say=say)


# Ray's command line run by this interpreter: a site folder installed without its scripts has no `ray` on PATH.
_RAY_CLI = "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"


def _ray_command() -> list[str]:
    beside = Path(sys.executable).with_name("ray")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ray")
    return [found] if found else [sys.executable, "-c", _RAY_CLI]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*, say=None) -> HeadRecord:
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="vsp", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    log = pool_dir() / f"head-{port}.log"
    (say or (lambda line: None))(f"engine pool: starting a Ray head on 127.0.0.1:{port} (it outlives this command; "
                                 f"`vllm-sweep pool release --all` stops it)")
    with open(log, "w") as out:
        head = subprocess.Popen([*_ray_command(), "start", "--head", f"--port={port}", "--block",
                                 "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    record = HeadRecord(address=f"127.0.0.1:{port}", pid=head.pid, temp_dir=temp_dir, log=str(log),
                        started_at=time.time())
    try:
        _wait_ready(record, head)
    except BaseException:
        _stop(record)
        raise
    tmp = record_path().with_suffix(".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(record)))
    tmp.replace(record_path())
    return record


def _wait_ready(record: HeadRecord, head: subprocess.Popen) -> None:
    """The GCS listens and the raylet has registered (its socket is there)."""
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    raylet = Path(record.temp_dir) / "session_latest" / "sockets" / "raylet"
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"`ray start --head` exited {head.returncode}: see {record.log}")
        if raylet.exists() and head_alive(record):
            return  # the node registers with the GCS a moment later: ray.init waits for that itself
        time.sleep(0.1)
    raise TimeoutError(f"no Ray head within {HEAD_START_TIMEOUT_S:.0f} s: see {record.log}")


def stop_head() -> Optional[HeadRecord]:
    """Stops the head the runner started (its whole process session); returns it (None: there was none)."""
    with head_lock():
        record = read_record()
        if record is not None:
            _stop(record)
        return record


def _stop(record: HeadRecord) -> None:
    """SIGTERM to `ray start --block` stops what it started; whatever is left of its session is killed."""
    try:
        os.killpg(record.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + HEAD_STOP_TIMEOUT_S
    while session_pids(record.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in session_pids(record.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    shutil.rmtree(record.temp_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        record_path().unlink()


def session_pids(sid: int) -> list[int]:
    """Processes of the process session `sid` (the head's daemons and its workers: the pooled actors)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid and not _zombie(entry):
                    pids.append(int(entry.name))
            except (OSError, ProcessLookupError):
                continue
    return pids


def _zombie(proc: Path) -> bool:
    """An exited process its parent has not reaped yet: gone for every purpose here."""
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
