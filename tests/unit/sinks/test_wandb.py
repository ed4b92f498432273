"""W&B tracking without a W&B process: what a trial's run would hold, and which tracker a setting opens. The export
itself (the offline W&B service, a process) is in tests/cli/test_wandb_cli.py."""
from __future__ import annotations

import dataclasses

import pytest

from runner.config.sections import TrackingSection
from runner.sinks import wandb_sink
from runner.sinks.tracking import NullTracker, open_tracker
from runner.sinks.wandb_sink import trial_config, trial_summary

from tests.support.wandb_records import engine_record, trial_record

pytestmark = pytest.mark.usefixtures("wandb_offline")


def test_config_and_summary_hold_the_trial_and_the_engine_figures():
    trial = dataclasses.asdict(trial_record("mtp:2", concurrency=1, tok_s=150.0))
    engine = dataclasses.asdict(engine_record("mtp:2"))
    config = trial_config(trial, engine)
    assert config["spec"] == "mtp:2" and config["workload_params"] == {"input_len": 64, "output_len": 8}
    assert config["concurrency"] == 1 and config["enable_prefix_caching"] is True
    summary = trial_summary(trial, engine)
    assert summary["decode_tok_s_per_session"] == 150.0
    assert summary["spec_acceptance_pos1"] == 0.75 and summary["spec_acceptance_pos2"] == 0.5
    assert summary["engine/kv_capacity_tokens"] == 699008 and summary["engine/weights_gib"] == 0.004
    assert "concurrency" not in summary  # config, not a result


def test_the_summary_carries_energy_or_why_there_is_none():
    trial = dataclasses.replace(trial_record("off", concurrency=1, tok_s=100.0), energy_j=64.0, power_mean_w=320.0,
                                energy_per_output_token_j=0.5, energy_source="counter", energy_gpus=1)
    summary = trial_summary(dataclasses.asdict(trial), None)
    assert (summary["energy_per_output_token_j"], summary["power_mean_w"], summary["energy_source"]) == (
        0.5, 320.0, "counter")
    cpu = dataclasses.replace(trial_record("off", concurrency=1, tok_s=100.0), energy_unmeasured="not a CUDA device")
    summary = trial_summary(dataclasses.asdict(cpu), None)
    assert summary["energy_j"] is None and summary["energy_unmeasured"] == "not a CUDA device"


def test_tracker_choice(tmp_path):
    assert isinstance(open_tracker(tracking=TrackingSection(enabled=False), run_dir=tmp_path), NullTracker)
    assert isinstance(open_tracker(tracking=TrackingSection(enabled=True, mode="disabled"), run_dir=tmp_path), NullTracker)
    tracker = open_tracker(tracking=TrackingSection(enabled=True, mode="offline"), run_dir=tmp_path)
    assert isinstance(tracker, wandb_sink.WandbTracker) and tracker.target.mode == "offline"
