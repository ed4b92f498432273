"""Acceptance profiles as an axis and schedules on arms: the plan's engines, their speculative_config, the refusals."""
from __future__ import annotations

import json

import pytest

from runner.config.acceptance import AcceptanceProfile, ProfileKind
from runner.config.checks import ConfigError
from runner.config.sections import run_config
from runner.vllm.spec_compat import schedule_graph_args
from runner.plan.grid import build_plan
from runner.labels import plan_labels
from runner.plan.spec_variants import speculative_config
from tests.support.plans import plan_error
from tests.support.results import Sweep

DECODE = {"decode": {"input_len": 32, "output_len": 16}}


def _plan(grid=None, arms=None, spec_extra=None):
    grid = {"spec_method": ["off", "mtp"], "num_speculative_tokens": [1, 3], "max_model_len": [512], **(grid or {})}
    return build_plan(run_config(sweep_name="v", model="tiny-mtp", grid=grid, workloads=DECODE, arms=arms,
                                 spec_extra=spec_extra))


def test_one_engine_per_profile_and_spec_off_once():
    plan = _plan({"spec_acceptance_profile": ["real", [0.86, 0.74, 0.64]]})
    settings = [e.settings for e in plan.engines]
    assert [(s.spec_method, s.num_speculative_tokens, s.spec_acceptance_profile) for s in settings] == [
        ("off", 0, None), ("mtp", 1, None), ("mtp", 1, "[0.86,0.74,0.64]"), ("mtp", 3, None),
        ("mtp", 3, "[0.86,0.74,0.64]")]
    assert len({e.engine_id for e in plan.engines}) == 5
    # An engine drafting k is forced to the profile's first k rates.
    k1 = speculative_config(settings[2], {})
    assert k1["rejection_sample_method"] == "synthetic" and k1["synthetic_acceptance_rates"] == [0.86]
    assert speculative_config(settings[4], {})["synthetic_acceptance_rates"] == [0.86, 0.74, 0.64]
    assert "rejection_sample_method" not in speculative_config(settings[3], {})
    labels = plan_labels(plan.engines)
    assert labels[plan.engines[4].engine_id] == "mtp:3 accept=0.86/0.74/0.64"


def test_real_acceptance_keeps_earlier_engine_ids():
    plain = _plan()
    assert [e.engine_id for e in _plan({"spec_acceptance_profile": ["real"]}).engines] == [
        e.engine_id for e in plain.engines]


@pytest.mark.parametrize("profile, rule", [
    ([0.5, 0.7], "must not increase"), ([1.2], r"\[0, 1\]"), ([], "non-empty"), ("sometimes", "neither"),
    ("measured:", "names no run folder"),
])
def test_bad_profiles_are_refused_with_the_fix(profile, rule):
    with pytest.raises(ConfigError, match=rule) as info:
        _plan({"spec_acceptance_profile": [profile]})
    assert "fix: sweep.grid.spec_acceptance_profile=" in str(info.value)


def test_a_profile_shorter_than_k_is_refused():
    with pytest.raises(ConfigError, match="fewer than mtp:3 drafts"):
        _plan({"spec_acceptance_profile": [[0.8, 0.6]]})


def test_measured_profile_reads_an_earlier_runs_rates(tmp_path):
    sweep = Sweep()
    sweep.engine("mtp:3")
    sweep.trial("mtp:3", tok_s=10.0, spec_num_drafts=100, spec_acceptance_per_position=[0.8, 0.5, 0.3])
    sweep.trial("mtp:3", tok_s=10.0, repeat=1, spec_num_drafts=300, spec_acceptance_per_position=[0.6, 0.5, 0.1])
    run_dir = sweep.write(tmp_path / "earlier")
    plan = _plan({"spec_method": ["mtp"], "num_speculative_tokens": [2],
                  "spec_acceptance_profile": [f"measured:{run_dir}"]})
    (engine,) = plan.engines
    assert json.loads(engine.settings.spec_acceptance_profile) == pytest.approx([0.65, 0.5, 0.15])
    assert speculative_config(engine.settings, {})["synthetic_acceptance_rates"] == pytest.approx([0.65, 0.5])
    with pytest.raises(ConfigError, match="no trials"):
        _plan({"spec_acceptance_profile": [f"measured:{tmp_path / 'nowhere'}"]})
    with pytest.raises(ConfigError, match="no eagle trial"):
        _plan({"spec_method": ["eagle"], "spec_acceptance_profile": [f"measured:{run_dir}"]},
              spec_extra={"eagle": {"model": "/draft"}})


def test_a_schedule_arm_drafts_its_largest_k_and_records_the_schedule():
    plan = _plan(arms=[{"spec_method": "off"}, {"spec_method": "mtp", "num_speculative_tokens": 3},
                       {"spec_method": "mtp", "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 8, 1]]}])
    off, static, scheduled = (e.settings for e in plan.engines)
    assert (scheduled.num_speculative_tokens, scheduled.spec_schedule) == (3, "[[1,1,3],[2,8,1]]")
    assert static.spec_schedule is None and off.spec_schedule is None
    config = speculative_config(scheduled, {})
    assert config["num_speculative_tokens"] == 3
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 8, 1]]
    assert len({e.engine_id for e in plan.engines}) == 3
    assert plan_labels(plan.engines)[plan.engines[2].engine_id] == "mtp:3 sched=1:3,2-8:1"


@pytest.mark.parametrize("arm, rule", [
    ({"spec_method": "mtp", "num_speculative_tokens_per_batch_size": [[2, 8, 1]]}, "start at 1"),
    ({"spec_method": "mtp", "num_speculative_tokens_per_batch_size": [[1, 8, 0]]}, "spec off"),
    ({"num_speculative_tokens_per_batch_size": [[1, 8, 2]]}, "names no speculative method"),
    ({"spec_method": "off", "num_speculative_tokens_per_batch_size": [[1, 8, 2]]}, "names no speculative method"),
    ({"spec_method": "mtp", "num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 8, 3]]},
     "differs from its schedule's largest k"),
    # bounded like a static arm's k for its method (mtp: 1..8)
    ({"spec_method": "mtp", "num_speculative_tokens_per_batch_size": [[1, 4, 9]]}, r"largest k \(9\).*outside 1..8"),
])
def test_bad_schedules_are_refused_with_the_fix(arm, rule):
    with pytest.raises(ConfigError, match=rule) as info:
        _plan(arms=[arm])
    assert "fix:" in str(info.value)


def test_synthetic_acceptance_is_refused_on_cpu_before_anything_starts():
    error = plan_error(["sweep.grid.spec_method=[mtp]", "sweep.grid.num_speculative_tokens=[2]",
                        "sweep.grid.spec_acceptance_profile=[[0.8,0.6]]"])
    assert "Synthetic acceptance not supported with CPU sampling" in error
    assert "fix: sweep.grid.spec_acceptance_profile=[real]" in error
    assert plan_error(["sweep.grid.spec_acceptance_profile=[real]"]) == ""


def test_profile_and_schedule_keys_in_spec_extras_are_the_runners():
    error = plan_error(["+spec.mtp.rejection_sample_method=synthetic",
                        "+spec.mtp.num_speculative_tokens_per_batch_size=[[1,4,2]]"])
    assert "spec.mtp.rejection_sample_method is set by the runner" in error
    assert "spec.mtp.num_speculative_tokens_per_batch_size is set by the runner" in error


def test_profile_values_parse():
    assert AcceptanceProfile.parse(None).kind is ProfileKind.REAL
    assert AcceptanceProfile.parse("real").text() is None
    assert AcceptanceProfile.parse("[0.5, 0.25]").rates == (0.5, 0.25)
    assert AcceptanceProfile.parse("measured:runs/a").source == "runs/a"


def test_piecewise_graphs_only_where_vllm_does_not_switch_itself():
    spec = {"speculative_config": {"method": "mtp", "num_speculative_tokens_per_batch_size": [[1, 4, 2]]}}
    piecewise = {"compilation_config": {"cudagraph_mode": "PIECEWISE"}}
    assert schedule_graph_args(spec, cuda=True) == piecewise
    assert schedule_graph_args({**spec, "compilation_config": {"mode": 3}}, cuda=True) == {
        "compilation_config": {"mode": 3, "cudagraph_mode": "PIECEWISE"}}
    assert schedule_graph_args(spec, cuda=False) == {}
    assert schedule_graph_args({**spec, "enforce_eager": True}, cuda=True) == {}
    chosen = {**spec, "compilation_config": {"cudagraph_mode": "NONE"}}
    assert schedule_graph_args(chosen, cuda=True) == {}
    static = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 2}}
    assert schedule_graph_args(static, cuda=True) == {}


def test_labels_of_rows_read_back_with_nan_for_null():
    from runner.labels import labels_of_rows

    base = {"model": "m", "spec_method": "mtp", "num_speculative_tokens": 3, "engine_args_json": "{}"}
    rows = [{**base, "engine_id": "a", "spec_schedule": float("nan"), "spec_acceptance_profile": float("nan")},
            {**base, "engine_id": "b", "spec_schedule": "[[1,1,3],[2,8,1]]", "spec_acceptance_profile": None}]
    assert labels_of_rows(rows) == {"a": "mtp:3 sched=static", "b": "mtp:3 sched=1:3,2-8:1"}
