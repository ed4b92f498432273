"""Resident engines and interleaved rounds on real CPU engines in real Ray actors.

One sweep, run once: `rounds` (2 engines × 2 repeats, resident, one actor killed mid-trial in round 1: 3 loads).
Stops in seconds (SIGTERM in a load or a trial) and their resumes: tests/engine/test_stops.py.
"""
from __future__ import annotations

import json
import re

import pytest

from runner.sinks.parquet import read_frame

from tests.support.cli import run_cli

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
