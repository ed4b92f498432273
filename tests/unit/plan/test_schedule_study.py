"""Predict, then validate (sweep.adaptive=predict_schedule): each stage planned from hand-made rows of the one
before, on the draft-schedule study's CPU preset (no engine)."""
from __future__ import annotations

import pytest

from runner.config.checks import ConfigError
from runner.config.store import load_config
from runner.plan.stages import adaptive_study, run_stages
from tests.support.plans import plan_error

RATES = (0.8, 0.6, 0.4)  # AL(1..3) = 1.8, 2.4, 2.8
# Step time per (k, concurrency): drafting is nearly free alone, costly at 4 sessions; k = 2 is never run first.
STEP_S = {(0, 1): 0.010, (3, 1): 0.012, (0, 2): 0.010, (3, 2): 0.020, (0, 4): 0.010, (3, 4): 0.040,
          (2, 2): 0.016}


def _config(*overrides):
    return load_config(["tracking=none", "sweep=draft_schedule", "sweep.preset=cpu", *overrides])


def _rows(stage) -> list[dict]:
    rows = []
    engines = {e.engine_id: e for e in stage.plan.engines}
    for t in stage.plan.trials:
        s = engines[t.engine_id].settings
        k = s.num_speculative_tokens if s.spec_method != "off" else 0
        itl = STEP_S[(k, t.concurrency)] * (1.0, 1.01, 0.99)[t.repeat]
        length = 1 + sum(RATES[:k])
        rows.append({**vars(s), "api": t.api, "workload": t.workload, "workload_params_json": t.params_json,
                     "concurrency": t.concurrency, "repeat": t.repeat, "trial_id": t.trial_id, "status": "ok",
                     "itl_mean_s": itl, "decode_tok_s_per_session": length / itl,
                     "spec_num_drafts": 100 if k else None, "spec_acceptance_per_position": list(RATES[:k]),
                     "spec_mean_acceptance_length": length if k else None,
                     "batch_size_mean": float(t.concurrency), "batch_size_p50": float(t.concurrency)})
    return rows


def _arms(stage) -> set[tuple]:
    engines = {e.engine_id: e.settings for e in stage.plan.engines}
    return {(engines[t.engine_id].spec_method, engines[t.engine_id].num_speculative_tokens, t.concurrency)
            for t in stage.plan.trials}


def test_three_stages_predict_contenders_then_the_schedule_arm():
    config = _config()
    study = adaptive_study("predict_schedule")
    predict = study.stage(0, config=config, rows=[])
    assert predict.name == "predict"
    assert {(m, k) for m, k, _ in _arms(predict)} == {("off", 0), ("mtp", 3)}
    assert len(predict.plan.trials) == 2 * 3 * 3  # two arms × three loads × three repeats
    rows = _rows(predict)

    contenders = study.stage(1, config=config, rows=rows)
    # Predicted per session: c=1 k=3 (233 tok/s, measured), c=2 k=2 (144, not run), c=4 spec off (measured).
    assert _arms(contenders) == {("mtp", 2, 2)}
    assert len(contenders.plan.trials) == 3
    rows += _rows(contenders)

    schedule = study.stage(2, config=config, rows=rows)
    (engine,) = schedule.plan.engines
    assert engine.settings.spec_schedule == "[[1,1,3],[2,3,2],[4,32,0]]"  # max_num_seqs 32 in the CPU preset
    assert {c for _, _, c in _arms(schedule)} == {1, 2, 4} and len(schedule.plan.trials) == 9
    assert study.stage(3, config=config, rows=rows) is None


def test_each_stage_sees_only_its_earlier_stages_rows_so_a_resume_plans_the_same():
    config = _config()
    study = adaptive_study("predict_schedule")
    first = study.stage(0, config=config, rows=[])
    everything = _rows(first)
    everything += _rows(study.stage(1, config=config, rows=everything))
    everything += [dict(r, decode_tok_s_per_session=1e9) for r in everything]  # rows no stage may read early
    seen = []
    original = study.stage

    def spy(index, *, config, rows):
        seen.append({r["trial_id"] for r in rows})
        return original(index, config=config, rows=rows)

    study.stage = spy
    import runner.plan.stages as stages

    real = stages.adaptive_study
    stages.adaptive_study = lambda name: study
    try:
        names = [s.name for s in run_stages(config=config, plan=first.plan, trial_rows=lambda: everything)]
    finally:
        stages.adaptive_study = real
    assert names == ["predict", "contenders", "schedule"]
    assert seen[0] == set() and seen[1] == {t.trial_id for t in first.plan.trials}


def test_a_fixed_sweep_is_one_stage():
    from runner.plan.grid import build_plan

    config = _config("sweep.adaptive=null")
    plan = build_plan(adaptive_study("predict_schedule").plannable(config))
    (stage,) = list(run_stages(config=config, plan=plan, trial_rows=list))
    assert [t.trial_id for t in stage.plan.trials] == [t.trial_id for t in plan.trials]
    (off,) = list(run_stages(config=_config("sweep.adaptive=null", "execution.live_draft_count=off"), plan=plan,
                             trial_rows=list))
    assert off.plan is plan  # a load per k: the plan as built


@pytest.mark.parametrize("overrides, words", [
    (["sweep.adaptive=bogus"], "valid: predict_schedule"),
    (["sweep.preset=null", "sweep.arms=[{spec_method:mtp,num_speculative_tokens:3}]"], "needs a spec-off arm"),
    (["sweep.preset=null", "sweep.arms=[{spec_method:'off'},{spec_method:mtp,num_speculative_tokens:1}]"],
     "drafting 2 or more tokens"),
    (["workload=[multi_turn]"], "fix: workload=[decode]"),
])
def test_a_study_it_cannot_run_is_refused_naming_the_fix(overrides, words):
    config = _config(*overrides)
    with pytest.raises(ConfigError, match=r"fix|valid") as info:
        adaptive_study(config.sweep.adaptive).plannable(config)
    assert words in str(info.value)


def test_auto_outside_a_study_names_both_fixes():
    error = plan_error(["sweep=draft_schedule", "sweep.preset=cpu", "sweep.adaptive=null"])
    assert "sweep.adaptive=predict_schedule" in error and "auto:<run folder>" in error


def test_the_command_line_wins_over_a_preset():
    """A preset scales a study down; a key the command line also sets keeps the command line's value."""
    assert _config().sweep.grid.concurrency == [1, 2, 4]
    assert _config("sweep.grid.concurrency=[1]").sweep.grid.concurrency == [1]
    assert _config("engine.args.max_num_seqs=8").engine.args["max_num_seqs"] == 8


def test_a_prediction_that_prunes_every_k_but_one_gets_one_spot_check_of_the_runner_up(monkeypatch):
    # Drafting is cheap at every load: k = 3 is predicted best everywhere, k = 1, 2 pruned (the GPU study's case).
    cheap = {(0, 1): 0.010, (3, 1): 0.011, (0, 2): 0.010, (3, 2): 0.0115, (0, 4): 0.010, (3, 4): 0.012}
    monkeypatch.setitem(globals(), "STEP_S", cheap)
    config = _config()
    study = adaptive_study("predict_schedule")
    rows = _rows(study.stage(0, config=config, rows=[]))
    contenders = study.stage(1, config=config, rows=rows)
    # The runner-up is k = 2; its predicted margin behind k = 3 is smallest where drafting costs most (c=4).
    assert _arms(contenders) == {("mtp", 2, 4)} and len(contenders.plan.trials) == 3
    assert "spot check of k = 2 at c=4" in contenders.why
