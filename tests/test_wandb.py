"""W&B export in offline mode: run folders exist and hold the logged values; a W&B failure costs nothing."""
from __future__ import annotations

import dataclasses

import pytest

from runner.schema import EngineRecord, RequestRecord, TrialRecord
from runner.sinks import wandb_sink
from runner.sinks.parquet import ParquetSink, read_frame
from runner.config.schema import TrackingSection
from runner.sinks.tracking import NullTracker, open_tracker
from runner.sinks.wandb_sink import WandbTarget, export_run, trial_config, trial_summary

from wandb_reader import offline_runs


@pytest.fixture(autouse=True)
def offline_env(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))


def _engine(arm: str) -> EngineRecord:
    method, k = ("off", 0) if arm == "off" else ("mtp", int(arm[-1]))
    return EngineRecord(model="m", spec_method=method, num_speculative_tokens=k, sweep="fx", run_id="r1",
                        engine_id=f"e-{arm}", status="ok", kv_capacity_tokens=699008, num_kv_blocks=5461,
                        block_size=128, weights_gib=0.004, kv_budget_gib=1.0, load_s=20.5, device_name="cpu")


def _trial(arm: str, *, concurrency: int, tok_s: float, started_at: float = 1.0) -> TrialRecord:
    e = _engine(arm)
    return TrialRecord(model="m", spec_method=e.spec_method, num_speculative_tokens=e.num_speculative_tokens,
                       sweep="fx", run_id="r1", trial_id=f"t-{arm}-c{concurrency}", engine_id=e.engine_id,
                       workload="decode", workload_params_json='{"input_len": 64, "output_len": 8}',
                       concurrency=concurrency, num_requests=concurrency, decode_tok_s_per_session=tok_s,
                       ttft_p50_s=0.05, started_at=started_at,
                       spec_acceptance_per_position=[0.75, 0.5] if arm != "off" else [])


def _requests(trial: TrialRecord) -> list[RequestRecord]:
    return [RequestRecord(sweep="fx", run_id="r1", trial_id=trial.trial_id, engine_id=trial.engine_id,
                          request_index=i, session=i, prompt_tokens=64, output_tokens=8, ttft_s=0.05 + i / 100,
                          itl_s=[0.01] * 7, output_token_ids=list(range(8)), output_hash="abc")
            for i in range(trial.concurrency)]


@pytest.fixture
def run_dir(tmp_path):
    run_dir = tmp_path / "fx" / "r1"
    sink = ParquetSink(run_dir)
    for arm in ("off", "mtp:2"):
        sink.write_engine(_engine(arm))
    for arm, c, speed in (("off", 1, 400.0), ("off", 2, 300.0), ("mtp:2", 1, 150.0)):
        t = _trial(arm, concurrency=c, tok_s=speed)
        sink.write_trial(t, _requests(t))
    (run_dir / "config.yaml").write_text("sweep:\n  name: fx\nrun: r1\n")
    return run_dir


def test_config_and_summary_hold_the_trial_and_the_engine_figures():
    trial = dataclasses.asdict(_trial("mtp:2", concurrency=1, tok_s=150.0))
    engine = dataclasses.asdict(_engine("mtp:2"))
    config = trial_config(trial, engine)
    assert config["spec"] == "mtp:2" and config["workload_params"] == {"input_len": 64, "output_len": 8}
    assert config["concurrency"] == 1 and config["enable_prefix_caching"] is True
    summary = trial_summary(trial, engine)
    assert summary["decode_tok_s_per_session"] == 150.0
    assert summary["spec_acceptance_pos1"] == 0.75 and summary["spec_acceptance_pos2"] == 0.5
    assert summary["engine/kv_capacity_tokens"] == 699008 and summary["engine/weights_gib"] == 0.004
    assert "concurrency" not in summary  # config, not a result


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
    rerun = _trial("off", concurrency=2, tok_s=310.0, started_at=2.0)  # retry_failed re-ran it
    sink.write_trial(rerun, _requests(rerun))
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


def test_tracker_choice(tmp_path):
    assert isinstance(open_tracker(tracking=TrackingSection(enabled=False), keys=None, run_dir=tmp_path, plan=None), NullTracker)
    assert isinstance(open_tracker(tracking=TrackingSection(enabled=True, mode="disabled"), keys=None, run_dir=tmp_path,
                                   plan=None), NullTracker)
    tracker = open_tracker(tracking=TrackingSection(enabled=True, mode="offline"), keys=None, run_dir=tmp_path, plan=None)
    assert isinstance(tracker, wandb_sink.WandbTracker) and tracker.target.mode == "offline"


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
    assert [r.job_type for r in runs].count("sweep") == 1
