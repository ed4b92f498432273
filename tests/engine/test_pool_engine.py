"""Engines that outlive a command (execution.keep_engines), for real: one tiny engine on the embedded model.

One chain of commands shares it: the first loads it and leaves it in the pool; the second wakes it instead of
loading (its engine row says reused_from_pool, its timeline has a wake and no start, no shape is warmed again);
the pooled actor is then killed (SIGKILL) and leaves no engine process behind; a third command loads afresh;
`pool release --all` ends the engine and the Ray head the runner started. The head is the runner's own, found
through a cache folder of this module's (so it is no other test's or user's), and is always stopped at the end.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.cache import cache_root
from runner.sinks.parquet import read_frame
from tests.support.cli import ROOT, run_cli

pytestmark = pytest.mark.engine

SWEEP = ("sweep.name=pool", "tracking=none", "report=false", "sweep.grid.spec_method=[off]",
         "sweep.grid.max_model_len=[512]", "sweep.grid.concurrency=[1,2]", "workload.decode.input_len=32",
         "workload.decode.output_len=8", "execution.keep_engines=true", "execution.pool=t", "execution.pool_ttl_s=900")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of this module's: the shared embedded model and argument rules, the pool's own record."""
    folder = tmp_path_factory.mktemp("pool-cache")
    for name in ("models", "engine-args"):
        if (cache_root() / name).exists():
            (folder / name).symlink_to(cache_root() / name)
    yield folder
    pool("release", "--all", cache=folder)
    from runner.pool import head as pool_head

    os.environ["RUNNER_CACHE_DIR"], previous = str(folder), os.environ.get("RUNNER_CACHE_DIR")
    try:
        pool_head.stop_head()  # whatever the release left (a failed test): its whole process session
    finally:
        if previous is None:
            os.environ.pop("RUNNER_CACHE_DIR")
        else:
            os.environ["RUNNER_CACHE_DIR"] = previous


def pool(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RUNNER_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "runner", "pool", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def pooled(cache: Path) -> list[dict]:
    proc = pool("list", "--json", cache=cache)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def command(run: str, cache: Path, out: Path) -> Path:
    run_cli(f"run={run}", *SWEEP, output_root=out, env={"RUNNER_CACHE_DIR": str(cache)})
    return out / "pool" / run


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def gone(pids: list[int], *, timeout_s: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.5)
    return [p for p in pids if alive(p)]


@pytest.fixture(scope="module")
def chain(cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("pool-runs")
    first = command("first", cache, out)
    after_first = pooled(cache)
    second = command("second", cache, out)
    after_second = pooled(cache)
    return {"out": out, "first": first, "second": second, "after_first": after_first, "after_second": after_second}


def test_the_engine_stays_in_the_pool_after_its_command(chain):
    [engine] = chain["after_first"]
    assert engine["pool"] == "t" and engine["state"] == "awake" and engine["model"] == "tiny-mtp"
    assert engine["warm_shapes"] == 2 and engine["engine_pids"] and alive(engine["pid"])
    first = read_frame(chain["first"], "engines")
    assert first.status.tolist() == ["ok"] and not first.reused_from_pool.any() and first.load_s.notna().all()


def test_a_second_command_wakes_the_pooled_engine_instead_of_loading_it(chain):
    engines = read_frame(chain["second"], "engines")
    assert engines.status.tolist() == ["ok"] and engines.reused_from_pool.tolist() == [True]
    assert engines.load_s.isna().all() and engines.kv_capacity_tokens.notna().all()
    phases = read_frame(chain["second"], "phases")
    assert "start" not in set(phases.phase) and "prepare" not in set(phases.phase)
    assert (phases.phase == "wake").sum() == 1
    trials = read_frame(chain["second"], "trials")
    assert (trials.status == "ok").all() and len(trials) == 2
    assert (trials.warmup_s == 0).all()  # its shapes were warmed by the first command
    assert set(trials.run_id) == {"second"}
    # Its first trial in this command ran twice, as after a load: the first run is set aside.
    first_runs, first_trial = read_frame(chain["second"], "first_runs"), trials.sort_values("started_at").iloc[0]
    assert first_runs.trial_id.tolist() == [first_trial.trial_id] and first_trial.first_run_s > 0
    [engine] = chain["after_second"]  # the same actor, back in the pool
    assert engine["pid"] == chain["after_first"][0]["pid"] and engine["state"] == "awake"


@pytest.fixture(scope="module")
def killed(chain, cache):
    [engine] = pooled(cache)
    os.kill(engine["pid"], signal.SIGKILL)
    return engine, gone([engine["pid"], *engine["engine_pids"]]), pooled(cache)


def test_a_killed_pooled_actor_leaves_no_engine_process(killed):
    engine, left, listed = killed
    assert engine["engine_pids"] and not left, f"left behind: {left}"
    assert listed == []


@pytest.fixture(scope="module")
def released(killed, chain, cache):
    third = command("third", cache, chain["out"])  # the pool lost its engine: loaded again, and pooled
    before = pooled(cache)
    proc = pool("release", "--all", cache=cache)
    return third, before, proc


def test_after_a_loss_the_engine_loads_again_and_release_frees_it_and_the_head(released, cache):
    third, before, proc = released
    engines = read_frame(third, "engines")
    assert engines.reused_from_pool.tolist() == [False] and engines.load_s.notna().all()
    [engine] = before
    assert proc.returncode == 0, proc.stderr
    assert "released t" in proc.stdout and "stopped the pools' Ray head" in proc.stdout
    assert not gone([engine["pid"], *engine["engine_pids"]]), "an engine process outlived `pool release`"
    assert "no engine pool" in pool("list", cache=cache).stdout
