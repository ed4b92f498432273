"""W&B export in offline mode: run folders exist and hold the logged values; a W&B failure costs nothing.
Each export starts W&B's own service process, so these live beside the CLI tests."""
from __future__ import annotations

import pytest

from runner.sinks.parquet import read_frame
from runner.sinks.result_sink import ParquetSink
from runner.sinks.wandb_sink import WandbTarget, export_run

from tests.support.wandb_reader import offline_runs
from tests.support.wandb_records import request_records, trial_record, write_run_dir

pytestmark = pytest.mark.usefixtures("wandb_offline")


@pytest.fixture
def run_dir(tmp_path):
    return write_run_dir(tmp_path / "fx" / "r1")


def test_offline_export_writes_one_run_per_trial_plus_the_sweep_run(run_dir):
    result = export_run(run_dir=run_dir, target=WandbTarget(mode="offline"))
    assert (result.exported, result.failed) == (3, False)
    runs = {r.job_type + ":" + r.name: r for r in offline_runs(run_dir)}
    assert sorted(runs) == ["decode:decode-mtp:2-c1-r0", "decode:decode-off-c1-r0", "decode:decode-off-c2-r0",
                            "sweep:fx-r1"]
    trials = read_frame(run_dir, "trials").set_index("trial_id")
    for run in runs.values():
        assert run.group == "fx/r1"
        if run.job_type == "decode":
            trial_id = run.config["trial_id"]
            assert run.summary["decode_tok_s_per_session"] == trials.loc[trial_id, "decode_tok_s_per_session"]
            assert run.summary["engine/kv_capacity_tokens"] == 699008
            assert run.config["workload_params"] == {"input_len": 64, "output_len": 8}
            assert "requests" in run.logged_keys
    sweep = runs["sweep:fx-r1"]
    assert sweep.summary["trials_ok"] == 3 and sweep.config["sweep"] == {"name": "fx"}
    assert "results:results-fx-r1" in sweep.artifacts and {"engines", "trials"} <= sweep.logged_keys


def test_a_second_export_sends_only_what_is_new(run_dir):
    assert export_run(run_dir=run_dir).exported == 3
    assert export_run(run_dir=run_dir).exported == 0
    sink = ParquetSink(run_dir)
    rerun = trial_record("off", concurrency=2, tok_s=310.0, started_at=2.0)  # retry_failed re-ran it
    sink.write_trial(rerun, request_records(rerun))
    result = export_run(run_dir=run_dir)
    assert (result.exported, result.skipped) == (1, 2)
    ids = {r.id for r in offline_runs(run_dir)}
    assert "r1-t-off-c2-x1" in ids and "r1-t-off-c2" in ids


def test_a_wandb_failure_stops_the_export_and_loses_nothing(run_dir, monkeypatch, capsys):
    import wandb

    before = {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*.parquet")}
    calls = []

    def broken_init(**kwargs):
        calls.append(kwargs)
        raise RuntimeError("network unreachable")

    monkeypatch.setattr(wandb, "init", broken_init)
    result = export_run(run_dir=run_dir)
    assert result.failed and result.exported == 0 and len(calls) == 1  # no retry per trial
    assert "python -m runner.sinks.wandb_sink" in capsys.readouterr().err
    assert {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*.parquet")} == before
    monkeypatch.undo()
    assert export_run(run_dir=run_dir).exported == 3  # the next export catches up
