"""Stops and resumes on real CPU engines in real Ray actors: one run folder, one chain of commands.

The same sweep (spec off, concurrency 1-4, the trial at c=3 hangs through the RUNNER_FAULTS test hook) is stopped
three ways and then resumed: SIGTERM while the engine loads, SIGTERM inside the hung trial, Ctrl-C (SIGINT) inside
the hung trial; the fourth command, without the fault, runs what is missing; the fifth finds nothing to do. Each
stop must exit 130 within seconds, say how to resume, leave no process and keep every finished trial; each later
command resumes the folder the stop before it left.
"""
from __future__ import annotations

import json
import os
import signal
import time

import pandas as pd
import pytest

from runner.sinks.parquet import has_table, read_frame

from tests.support.cli import run_cli, start_cli, wait_until_gone

pytestmark = pytest.mark.engine

HUNG = 3
ARGS = ["run=s", "sweep.name=stops", "model.weights=dummy", "model.load_format=dummy", "tracking=none",
        "report=false", "sweep.grid.spec_method=[off]", "sweep.grid.max_model_len=[512]",
        "sweep.grid.concurrency=[1,2,3,4]", "workload.decode.input_len=32", "workload.decode.output_len=8"]
HANG = {"RUNNER_FAULTS": json.dumps([{"fault": "hang", "concurrency": HUNG}])}


def trials_of(run_dir) -> pd.DataFrame:
    if has_table(run_dir, "trials"):
        return read_frame(run_dir, "trials")
    return pd.DataFrame({"trial_id": [], "concurrency": [], "started_at": [], "status": []})


def loads(run_dir) -> int:
    """Engine starts the run's timeline holds so far (a `start` span is written once the engine is up)."""
    if not has_table(run_dir, "phases"):
        return 0
    return int((read_frame(run_dir, "phases", ["phase"]).phase == "start").sum())


def stop(out, run_dir, sig: int, *, when) -> dict:
    """Starts the sweep with the hung trial, sends `sig` to its process group (as a terminal or a batch system
    does) once `when()` holds, and returns what the command and the folder show."""
    proc = start_cli(*ARGS, output_root=out, env=HANG)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None and not when():
        time.sleep(0.2)
    sent = time.monotonic()
    os.killpg(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=300)
    exit_s = time.monotonic() - sent
    left = wait_until_gone(proc.pid, timeout_s=30)
    return {"code": proc.returncode, "exit_s": exit_s, "stderr": stderr, "left": left, "before": trials_of(run_dir)}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    out = tmp_path_factory.mktemp("stops")
    run_dir = out / "stops" / "s"
    started = time.monotonic()
    stop_load = stop(out, run_dir, signal.SIGTERM,
                     when=lambda: time.monotonic() - started > 12)  # the engine is loading
    stop_load["loads"] = loads(run_dir)

    def up_then_3_s() -> bool:  # the engine is up; 3 s later the hung trial is in flight, 0-3 others done
        if loads(run_dir) <= stop_load["loads"]:
            return False
        time.sleep(3)
        return True

    stop_trial = stop(out, run_dir, signal.SIGTERM, when=up_then_3_s)
    stop_trial["loads"] = loads(run_dir)
    seen = {"rows": -1, "since": time.monotonic()}

    def up_and_quiet_3_s() -> bool:  # trials run shuffled: once none lands for 3 s, the hung one is in flight
        if loads(run_dir) <= stop_trial["loads"]:
            return False
        rows = len(trials_of(run_dir))
        if rows != seen["rows"]:
            seen.update(rows=rows, since=time.monotonic())
        return time.monotonic() - seen["since"] > 3

    ctrl_c = stop(out, run_dir, signal.SIGINT, when=up_and_quiet_3_s)
    ctrl_c["loads"] = loads(run_dir)
    resumed = run_cli(*ARGS, output_root=out)
    after = read_frame(run_dir, "trials")
    again = run_cli(*ARGS, output_root=out)
    return {"stop_load": stop_load, "stop_trial": stop_trial, "ctrl_c": ctrl_c, "resumed": resumed, "after": after,
            "again": again, "final": read_frame(run_dir, "trials"), "requests": read_frame(run_dir, "requests")}


@pytest.mark.parametrize("case", ["stop_load", "stop_trial", "ctrl_c"])
def test_a_stop_exits_130_within_15_s_keeps_finished_trials_and_leaves_no_process(case, chain):
    r = chain[case]
    assert r["code"] == 130 and r["exit_s"] <= 15, (r["exit_s"], r["stderr"][-2000:])
    assert "run the same command again to resume" in r["stderr"]
    assert r["left"] == []
    before = r["before"]
    assert HUNG not in set(before.concurrency) and (before.status == "ok").all()  # the hung one was abandoned
    after = chain["after"].set_index("trial_id")
    kept = after.loc[list(before.trial_id)]
    assert list(kept.started_at) == list(before.started_at)  # finished before the stop: never re-run
    if case == "stop_load":
        assert len(before) == 0
    else:
        assert r["loads"] > chain["stop_load"]["loads"]  # the command after a stop in the load loaded its engine


def test_the_resume_runs_only_what_is_missing(chain):
    before, after = chain["ctrl_c"]["before"], chain["after"]
    assert sorted(after.concurrency) == [1, 2, 3, 4] and (after.status == "ok").all()
    assert sorted(after.position) == list(range(4))
    kept = after.set_index("trial_id").loc[list(before.trial_id)]
    assert list(kept.started_at) == list(before.started_at)
    if len(before):
        assert (after[~after.trial_id.isin(before.trial_id)].started_at > before.started_at.max()).all()
    assert f"({len(before)} already done, {4 - len(before)} to run)" in chain["resumed"].stdout
    assert len(chain["requests"]) == 1 + 2 + 3 + 4


def test_a_finished_sweep_rerun_does_nothing_and_says_so(chain):
    assert "nothing to do" in chain["again"].stdout
    pd.testing.assert_frame_equal(chain["final"], chain["after"])
