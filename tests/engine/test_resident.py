"""Resident engines and interleaved rounds on real CPU engines in real Ray actors.

Three sweeps, run once each: `rounds` (2 engines × 2 repeats, resident, one actor killed mid-trial in round 1:
3 loads), `stop_trial` (SIGTERM inside a hung trial, then a resume) and `stop_load` (SIGTERM while the engine
loads, then a resume).
"""
from __future__ import annotations

import json
import os
import re
import signal
import time

import pandas as pd
import pytest

from runner.sinks.parquet import has_table, read_frame

from tests.support.cli import run_cli, start_cli, wait_until_gone

pytestmark = pytest.mark.engine

SMALL = ["model.weights=dummy", "model.load_format=dummy", "tracking=none", "report=false",
         "sweep.grid.max_model_len=[512]", "workload.decode.input_len=32", "workload.decode.output_len=8"]
ROUNDS = ["run=r", "sweep.name=rounds", *SMALL, "sweep.grid.spec_method=[off,mtp]",
          "sweep.grid.num_speculative_tokens=[1]", "sweep.grid.concurrency=[1,2]", "sweep.repeats=2",
          "execution.resident=on", "execution.order_seed=3"]


def trial_ids(*overrides, output_root) -> list[tuple[str, int, int]]:
    """(trial id, concurrency, repeat) from the dry-run plan."""
    text = run_cli(*overrides, "dry_run=true", output_root=output_root).stdout
    return [(m[0], int(m[1]), int(m[2])) for m in re.findall(r"\[todo\] (\S+) decode c=(\d+) r=(\d+)", text)]


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    out = tmp_path_factory.mktemp("rounds")
    ids = trial_ids(*ROUNDS, output_root=out)
    victim = next(t for t, c, r in ids if c == 1 and r == 1)  # one engine's round-1 trial: its actor dies once
    proc = run_cli(*ROUNDS, output_root=out, env={"RUNNER_FAULTS": json.dumps([{"fault": "kill", "trial_id": victim}])})
    run_dir = out / "rounds" / "r"
    return {"trials": read_frame(run_dir, "trials"), "engines": read_frame(run_dir, "engines"),
            "requests": read_frame(run_dir, "requests"), "victim": victim, "proc": proc,
            "log_dir": run_dir / "logs"}


def test_rounds_interleave_with_round_and_position(rounds):
    t = rounds["trials"].sort_values("position")
    assert list(t.position) == list(range(8)) and (t["round"] == t["repeat"]).all()
    assert list(t["round"]) == [0, 0, 0, 0, 1, 1, 1, 1]  # round 0 of every engine before any round 1
    per_round = [list(dict.fromkeys(t[t["round"] == r].engine_id)) for r in (0, 1)]
    assert len(per_round[0]) == 2 and per_round[1] == per_round[0][::-1]  # the order rotates
    assert (t.status == "ok").all()


def test_killed_resident_actor_reloads_its_engine_and_retries_the_trial(rounds):
    t = rounds["trials"].set_index("trial_id")
    assert t.loc[rounds["victim"]].status == "ok" and t.loc[rounds["victim"]].attempts == 2
    assert (t.drop(rounds["victim"]).attempts == 1).all()  # nothing finished re-ran
    requests = rounds["requests"]
    assert len(requests[requests.trial_id == rounds["victim"]]) == 1
    assert len(rounds["engines"]) == 2 and (rounds["engines"].status == "ok").all()


def test_resident_engines_load_once_except_the_killed_one(rounds):
    loads = [p.read_text().count("init engine") for p in sorted(rounds["log_dir"].glob("*.log"))]
    assert sorted(loads) == [1, 2], loads


# ---- stop in seconds ------------------------------------------------------------------------------
STOP = ["sweep.grid.spec_method=[off]", *SMALL, "sweep.grid.concurrency=[1,2,3]"]


def _stop_and_resume(out, name: str, *, when) -> dict:
    args = [f"run={name}", f"sweep.name={name}", *STOP]
    run_dir = out / name / name
    proc = start_cli(*args, output_root=out, env={"RUNNER_FAULTS": json.dumps([{"fault": "hang", "concurrency": 2}])})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None and not when(run_dir):
        time.sleep(0.2)
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)  # what a batch system's stop does
    stdout, stderr = proc.communicate(timeout=120)
    exit_s = time.monotonic() - sent
    left = wait_until_gone(proc.pid, timeout_s=30)
    before = read_frame(run_dir, "trials") if has_table(run_dir, "trials") else \
        pd.DataFrame(columns=["trial_id", "started_at"])
    resumed = run_cli(*args, output_root=out)
    return {"code": proc.returncode, "exit_s": exit_s, "stderr": stderr, "left": left, "before": before,
            "after": read_frame(run_dir, "trials"), "resumed": resumed}


@pytest.fixture(scope="module")
def stop_trial(tmp_path_factory):
    # c=2 hangs (trials are shuffled: 0-2 others finish first); SIGTERM 3 s after the engine is up.
    def when(run_dir):
        if not has_table(run_dir, "engines"):
            return False
        time.sleep(3)
        return True
    return _stop_and_resume(tmp_path_factory.mktemp("stop_trial"), "stoptrial", when=when)


@pytest.fixture(scope="module")
def stop_load(tmp_path_factory):
    started = time.monotonic()
    return _stop_and_resume(tmp_path_factory.mktemp("stop_load"), "stopload",
                            when=lambda run_dir: time.monotonic() - started > 12)  # the engine is loading


@pytest.mark.parametrize("case", ["stop_trial", "stop_load"])
def test_sigterm_exits_within_15_s_and_the_resume_completes_with_nothing_lost(case, request):
    r = request.getfixturevalue(case)
    assert r["code"] == 130 and r["exit_s"] <= 15, (r["exit_s"], r["stderr"][-2000:])
    assert "run the same command again to resume" in r["stderr"]
    assert r["left"] == []
    after = r["after"].set_index("trial_id")
    assert sorted(after.concurrency) == [1, 2, 3] and (after.status == "ok").all()
    kept = after.loc[list(r["before"].trial_id)]
    assert list(kept.started_at) == list(r["before"].started_at)  # finished before the stop: not re-run
    if case == "stop_trial":
        assert 2 not in set(r["before"].concurrency)  # the trial in flight was abandoned, reran on resume
    else:
        assert len(r["before"]) == 0
    assert sorted(after.position) == list(range(3))
