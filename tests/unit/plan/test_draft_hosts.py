"""One load per engine configuration apart from k: the plan's fold (runner.plan.draft_hosts), its setting per
device, what a trial's row records and what the report deploys for a trial's k. Pure."""
from __future__ import annotations

import json

import pandas as pd

from runner.config.sections import run_config
from runner.plan.draft_hosts import LiveDrafts, TrialDraft, describe, fold, planned_engines
from runner.plan.grid import build_plan
from runner.plan.stages import run_stages
from runner.report.arm_engine import arm_engine, arm_rows
from runner.spec_arm import row_spec

QUICK = {"spec_method": ["off", "mtp"], "num_speculative_tokens": [1, 2, 3], "enable_prefix_caching": [True],
         "gpu_memory_utilization": [0.9], "max_model_len": [1024], "concurrency": [1, 4]}
ON = LiveDrafts(on=True)


def quick(**grid):
    return build_plan(run_config(sweep_name="quick", model="m", grid={**QUICK, **grid},
                                 workloads={"decode": {"input_len": 8, "output_len": 4}}))


def test_the_quick_grid_loads_twice_for_its_eight_trials_at_k_0_to_3():
    plan = quick()
    folded = fold(plan, live=ON)
    assert len(plan.engines) == 4 and len(folded.engines) == 2
    assert [t.trial_id for t in folded.trials] == [t.trial_id for t in plan.trials]  # the same ids: resumable
    host = next(e for e in folded.engines if e.settings.spec_method == "mtp")
    assert host.settings.num_speculative_tokens == 3
    drafts = sorted(t.draft.k for t in folded.trials if t.draft)
    assert drafts == [1, 1, 2, 2] and all(t.draft.engine_k == 3 for t in folded.trials if t.draft)
    assert planned_engines(folded) == 4
    assert "2 loads for 4 engine configs" in describe(folded, live=ON)


def test_off_leaves_a_load_per_k_and_says_why():
    plan = quick()
    live = LiveDrafts.of(setting="auto", cuda=True, engine_start="forkserver", vllm_version="0.32.0")
    assert not live.on and "CUDA" in live.reason
    assert fold(plan, live=live) is plan
    assert describe(plan, live=live).startswith("draft counts: a load per k (CUDA")
    assert not LiveDrafts.of(setting="auto", cuda=False, engine_start="spawn", vllm_version="0.32.0").on
    assert not LiveDrafts.of(setting="off", cuda=False, engine_start="forkserver", vllm_version="0.32.0").on
    unchecked = LiveDrafts.of(setting="auto", cuda=False, engine_start="forkserver", vllm_version="0.26.0")
    assert not unchecked.on and "not checked on vLLM 0.26.0" in unchecked.reason
    forced = LiveDrafts.of(setting="on", cuda=True, engine_start="forkserver", vllm_version="0.26.0")
    assert forced.on and "not checked" in forced.reason
    assert LiveDrafts.of(setting="auto", cuda=False, engine_start="forkserver", vllm_version="0.32.0+cpu").on


def test_settings_other_than_k_still_split_engines():
    folded = fold(quick(enable_prefix_caching=[True, False], max_model_len=[512, 1024]), live=ON)
    assert len(folded.engines) == 2 * 2 * 2  # (off, mtp:3) per prefix-caching and max-length setting


def test_a_trial_drafts_its_k_or_its_schedule_and_the_engines_own_k_needs_no_lookup():
    assert TrialDraft(k=1, engine_k=3, planned_engine_id="e").ranges() == [[1, 1 << 30, 1]]
    assert TrialDraft(k=3, engine_k=3, planned_engine_id="e").ranges() is None
    scheduled = TrialDraft(k=3, schedule="[[1,2,3],[3,8,1]]", engine_k=3, planned_engine_id="e")
    assert scheduled.ranges() == [[1, 2, 3], [3, 8, 1]] and "sched=" in scheduled.label


def test_the_fixed_sweep_stage_is_folded_where_on():
    config = run_config(sweep_name="quick", model="m", grid=QUICK, workloads={"decode": {}})
    plan = build_plan(config)
    stage = next(run_stages(config=config, plan=plan, trial_rows=lambda: []))
    assert len(stage.plan.engines) == 2  # CPU, forkserver, this checkout's vLLM: on


def test_the_row_accessor_tells_the_trials_k_from_the_engines():
    row = {"spec_method": "mtp", "num_speculative_tokens": 1, "engine_num_speculative_tokens": 3}
    spec = row_spec(row)
    assert (spec.k, spec.engine_k, spec.set_live, spec.arm.label) == (1, 3, True, "mtp:1")
    old = row_spec(pd.Series({"spec_method": "mtp", "num_speculative_tokens": 2.0,
                              "engine_num_speculative_tokens": float("nan"), "spec_schedule": None}))
    assert (old.k, old.engine_k, old.set_live, old.schedule) == (2, 2, False, None)
    off = row_spec({"spec_method": None, "num_speculative_tokens": 0})
    assert (off.method, off.k) == ("off", 0)


def _frames():
    args = {"model": "/m", "speculative_config": {"method": "mtp", "num_speculative_tokens": 3,
                                                  "rejection_sample_method": "synthetic",
                                                  "synthetic_acceptance_rates": [0.9, 0.8, 0.7]}}
    engines = pd.DataFrame([{"source": "r", "engine_id": "e3", "arm": "mtp:3", "k": 3, "arm_order": 2,
                             "spec_method": "mtp", "num_speculative_tokens": 3, "spec_schedule": None,
                             "vllm_args_json": json.dumps(args)}])
    trials = pd.DataFrame([
        {"source": "r", "engine_id": "e3", "arm": "mtp:1", "k": 1, "arm_order": 1, "spec_method": "mtp",
         "num_speculative_tokens": 1, "engine_num_speculative_tokens": 3, "spec_schedule": None},
        {"source": "r", "engine_id": "e3", "arm": "mtp:sched", "k": 3, "arm_order": 3, "spec_method": "mtp",
         "num_speculative_tokens": 3, "engine_num_speculative_tokens": 3, "spec_schedule": "[[1,4,3],[5,8,1]]"},
        {"source": "r", "engine_id": "e3", "arm": "mtp:3", "k": 3, "arm_order": 2, "spec_method": "mtp",
         "num_speculative_tokens": 3, "engine_num_speculative_tokens": 3, "spec_schedule": None}])
    return engines, trials


def test_a_k1_choice_ships_k1s_flags_not_its_engines():
    engines, trials = _frames()
    chosen = arm_engine("mtp:1", engines=engines, trials=trials)
    spec = json.loads(chosen["vllm_args_json"])["speculative_config"]
    assert spec["num_speculative_tokens"] == 1 and spec["synthetic_acceptance_rates"] == [0.9]
    scheduled = json.loads(arm_engine("mtp:sched", engines=engines, trials=trials)["vllm_args_json"])
    assert scheduled["speculative_config"]["num_speculative_tokens_per_batch_size"] == [[1, 4, 3], [5, 8, 1]]
    own = arm_engine("mtp:3", engines=engines, trials=trials)
    assert json.loads(own["vllm_args_json"]) == json.loads(engines.vllm_args_json[0])
    assert set(arm_rows(engines, trials).arm) == {"mtp:1", "mtp:3", "mtp:sched"}  # each arm ranked for "simplest"


def test_every_stage_of_the_draft_schedule_study_runs_on_the_predict_stages_engines():
    from runner.plan.stages import adaptive_study
    from tests.unit.plan.test_schedule_study import _config, _rows

    config = _config()
    study = adaptive_study("predict_schedule")
    base = build_plan(study.plannable(config))
    predict = study.stage(0, config=config, rows=[])
    rows = _rows(predict)
    contenders = study.stage(1, config=config, rows=rows)
    rows += _rows(contenders)
    schedule = study.stage(2, config=config, rows=rows)
    loaded = {e.engine_id for e in fold(predict.plan, live=ON, catalogue=base.engines).engines}
    assert len(loaded) == 2  # spec off and MTP at the largest k
    for stage in (contenders, schedule):
        folded = fold(stage.plan, live=ON, catalogue=base.engines)
        assert {e.engine_id for e in folded.engines} <= loaded  # k=2 and the schedule arm: no load of their own
        assert all(t.draft is not None for t in folded.trials)


def test_the_race_compares_arms_not_engines_where_one_engine_runs_several():
    from runner.scheduling.race import Race

    folded = fold(quick(), live=ON)
    race = Race(plan=folded, enabled=True, tie_band=0.05, seed=0)
    ids = {race.arm_id(t.trial_id, t.engine_id) for t in folded.trials}
    assert len(ids) == 4 and len({t.engine_id for t in folded.trials}) == 2
    assert sorted(race.arm(i) for i in ids) == ["mtp:1", "mtp:2", "mtp:3", "off"]
    assert all(len(engines) == 4 for engines in race.planned_points().values())
