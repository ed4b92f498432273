"""The race's stop rule as the driver keeps it: no samples while not racing, eliminations after a round."""
from __future__ import annotations

import pytest

from runner.scheduling.race import Race, trial_sample
from runner.schema import RequestRecord, TrialRecord
from tests.unit.scheduling.plans import rounds_plan


def test_nothing_is_eliminated_while_not_racing_or_before_any_sample():
    plan = rounds_plan(engines=2, trials=1, repeats=3)
    race = Race(plan=plan, enabled=False, tie_band=0.02, seed=0)
    race.after_round(0)
    assert race.eliminated == {} and race.elimination(plan.trials[0]) is None
    racing = Race(plan=plan, enabled=True, tie_band=0.02, seed=0)
    racing.after_round(2)
    assert racing.eliminated == {}


def test_an_eliminated_arm_names_its_reason_and_round():
    plan = rounds_plan(engines=2, trials=1, repeats=3)
    race = Race(plan=plan, enabled=True, tie_band=0.02, seed=0)
    race.eliminated[("e1", "decode")] = "behind e0 (round 2)"
    assert race.elimination(plan.trials_of("e1")[0]) == "behind e0 (round 2)"
    assert race.elimination(plan.trials_of("e0")[0]) is None
    assert race.arm("e0") == race.arm("e0") and race.arm("unknown") == "unknown"


def test_trial_sample_uses_the_workload_metric():
    base = dict(model="m", sweep="s", run_id="r", trial_id="t", engine_id="e", workload_params_json="{}")
    decode = TrialRecord(workload="decode", decode_tok_s_per_session=42.0, **base)
    assert trial_sample(decode, []) == 42.0
    multi = TrialRecord(workload="multi_turn", **base)
    requests = [RequestRecord(sweep="s", run_id="r", trial_id="t", engine_id="e", request_index=i, turn=i % 3,
                              ttft_s=t) for i, t in enumerate([2.0, 0.2, 0.3, 2.0, 0.4, 0.5])]
    assert trial_sample(multi, requests) == pytest.approx(0.3)  # median of turn-1 TTFTs 0.2, 0.4
    assert trial_sample(TrialRecord(workload="decode", status="failed", **base), []) is None
