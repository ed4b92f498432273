"""The cluster path for real: a Ray head started like on a real cluster, a sweep that joins it.

The head gets its own temp dir, so a plain `ray.init()` elsewhere on this machine does not find
and join it, and it is stopped by its own process group, never by `ray stop` (which would stop
every Ray instance on the machine).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from runner.sinks.parquet import read_frame

from tests.support.cli import ROOT, run_cli, session_processes

pytestmark = pytest.mark.engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, *, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"no Ray head on port {port}")


@pytest.fixture(scope="module")
def ray_head():
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    ray = str(Path(os.sys.executable).with_name("ray"))
    head = subprocess.Popen([ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--block",
                             "--include-dashboard=false", f"--temp-dir={temp_dir}", "--disable-usage-stats"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port)
        time.sleep(3)  # the raylet registers a moment after the GCS listens
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops what it started (~30 s)
        try:
            head.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while session_processes(head.pid) and time.monotonic() < deadline:
            time.sleep(1)
        for line in session_processes(head.pid):  # anything that ignored SIGTERM
            os.kill(int(line.split()[0]), signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _auth_token() -> dict:
    """The cluster's token where it has one (Ray reads it from the home the driver no longer shares)."""
    token = Path(os.path.expanduser("~/.ray/auth_token"))
    return {"RAY_AUTH_TOKEN_PATH": str(token)} if token.exists() else {}


@pytest.fixture(scope="module")
def cluster_sweep(ray_head, tmp_path_factory):
    """One sweep that joins the head: decode, and a prompt set whose file exists only in the driver's view: `~` is
    the driver's own home (another folder than the head's), so the actors' `~/prompts/questions.jsonl` is no file
    at all."""
    from runner.cache import cache_root

    out = tmp_path_factory.mktemp("cluster")
    home = tmp_path_factory.mktemp("driver_home")
    (home / "prompts").mkdir()
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "load" / "questions_3cat.jsonl"
    (home / "prompts" / "questions.jsonl").write_text(fixture.read_text())
    assert not Path(os.path.expanduser("~/prompts/questions.jsonl")).exists()  # the head's (and actors') view
    proc = run_cli("run=c", "sweep.name=cluster", f"cluster.address={ray_head}", "model.weights=dummy",
                   "model.load_format=dummy", "tracking=none", "report=false", "sweep.grid.spec_method=[off]",
                   "sweep.grid.max_model_len=[512]", "sweep.grid.concurrency=[1,2]", "workload=[decode,prompt_set]",
                   "workload.decode.input_len=32", "workload.decode.output_len=8",
                   "workload.prompt_set.prompt_file='~/prompts/questions.jsonl'",
                   "workload.prompt_set.prompt_format=mt_bench", "workload.prompt_set.output_len=8",
                   "workload.prompt_set.num_sessions=4", output_root=out,
                   env={"HOME": str(home), "RUNNER_CACHE_DIR": str(cache_root()), **_auth_token()})
    return out / "cluster" / "c", proc


def test_sweep_runs_on_the_joined_cluster(cluster_sweep):
    run_dir, _ = cluster_sweep
    engines = read_frame(run_dir, "engines")
    trials = read_frame(run_dir, "trials")
    assert (engines.status == "ok").all() and len(engines) == 1
    assert (trials.status == "ok").all(), trials.failure_reason.tolist()
    assert sorted(trials[trials.workload == "decode"].concurrency) == [1, 2]
    assert engines.hostname.iloc[0] == socket.gethostname()


def test_joining_is_quiet(cluster_sweep):
    _, proc = cluster_sweep
    text = proc.stdout + proc.stderr
    for noise in ("Connecting to existing Ray cluster", "INFO worker.py", "(EngineActor", "(raylet)"):
        assert noise not in text, text[-3000:]


def test_the_driver_alone_wrote_files_and_left_the_cluster_running(cluster_sweep, ray_head):
    run_dir, _ = cluster_sweep
    # Compacted at the end: one file per table, no parts folder left.
    from runner.schema import TABLES

    names = {p.name for p in run_dir.glob("*.parquet")}
    assert {"engines.parquet", "trials.parquet", "requests.parquet"} <= names <= {f"{t}.parquet" for t in TABLES}
    assert not any((run_dir / table).exists() for table in TABLES)
    host, port = ray_head.split(":")
    with socket.socket() as s:  # the driver disconnected; the head it joined is still up
        assert s.connect_ex((host, int(port))) == 0


def test_a_prompt_file_on_the_driver_alone_travels_with_the_trials(cluster_sweep):
    run_dir, _ = cluster_sweep
    trials = read_frame(run_dir, "trials")
    assert (trials.status == "ok").all(), trials.failure_reason.tolist()
    trials = trials[trials.workload == "prompt_set"]
    requests = read_frame(run_dir, "requests").merge(trials[["trial_id"]], on="trial_id")
    measured = requests[requests.phase == "measured"].groupby("trial_id").size()
    assert len(trials) == 2 and measured.tolist() == [4 * 2, 4 * 2]  # per trial: 4 conversations × 2 turns
    assert set(requests.prompt_rendering) == {"chat_template"} and set(trials.prompt_rendering) == {"chat_template"}
