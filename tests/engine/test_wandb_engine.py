"""A real sweep (the session's small_sweep) exported to W&B offline: one run per trial plus the sweep run."""
from __future__ import annotations

import pytest

from runner.sinks.parquet import read_frame

from tests.support.wandb_reader import offline_runs

pytestmark = pytest.mark.engine


@pytest.mark.engine
def test_real_sweep_is_in_wandb_offline(small_sweep):
    run_dir, proc = small_sweep
    assert "W&B: 4 trial run(s) + 1 sweep run" in proc.stdout
    runs = offline_runs(run_dir)
    trials = read_frame(run_dir, "trials").set_index("trial_id")
    by_trial = {r.config["trial_id"]: r for r in runs if r.job_type == "decode"}
    assert set(by_trial) == set(trials.index)
    for trial_id, run in by_trial.items():
        assert run.summary["ttft_p50_s"] == pytest.approx(trials.loc[trial_id, "ttft_p50_s"])
        assert run.summary["engine/kv_capacity_tokens"] > 0
    (sweep,) = [r for r in runs if r.job_type == "sweep"]
    # The report's Answer (written before the export) is the sweep run's table and summary.
    assert "answer" in sweep.logged_keys and sweep.summary["answer/decode"]
    assert "answer:" in proc.stdout and proc.stdout.index("answer:") < proc.stdout.index("W&B: 4 trial run(s)")
