"""sweep.converge's stop rule (pure): a point stops taking repeats once its decision is clear of the tie band."""
from __future__ import annotations

import dataclasses

import pandas as pd

from runner.numerics.converge import interval_settled, settled_points
from runner.numerics.race import RaceSample
from runner.numerics.stats import Interval
from runner.report.repeats import repeats_section, repeats_taken
from runner.schema import CONVERGED, RACE_ELIMINATED, TrialStatus
from runner.scheduling.race import Race, point_key
from tests.unit.scheduling.plans import rounds_plan

POINT = ("decode", "p c=1")


def samples(values: dict[str, list[float]], *, point: str = "p c=1") -> list[RaceSample]:
    return [RaceSample(engine_id=e, arm=f"arm-{e}", workload="decode", point=point, round=r, value=v,
                       higher_is_better=True)
            for e, vs in values.items() for r, v in enumerate(vs)]


def planned(*engines: str) -> dict:
    return {POINT: set(engines)}


def test_an_interval_is_settled_beyond_the_band_or_wholly_within_it():
    assert interval_settled(Interval(point=1.3, lo=1.2, hi=1.4), tie_band=0.02)  # behind for sure
    assert interval_settled(Interval(point=1.0, lo=0.99, hi=1.015), tie_band=0.02)  # tied for sure
    assert not interval_settled(Interval(point=1.03, lo=1.0, hi=1.06), tie_band=0.02)  # across the edge
    assert not interval_settled(None, tie_band=0.02)


def test_a_clear_winner_settles_its_point_at_the_minimum_repeats_not_before():
    found = settled_points(samples({"e0": [100, 101, 102], "e1": [50, 51, 52]}), planned=planned("e0", "e1"))
    assert list(found) == [POINT] and "settled after round 2 (3 repeats)" in found[POINT]
    assert "arm-e1" in found[POINT]
    early = settled_points(samples({"e0": [100, 101], "e1": [50, 51]}), planned=planned("e0", "e1"))
    assert early == {}


def test_identical_arms_settle_as_a_tie():
    found = settled_points(samples({"e0": [100, 100, 100], "e1": [100, 100, 100]}), planned=planned("e0", "e1"))
    assert "tie within noise" in found[POINT]


def test_noise_across_the_band_edge_keeps_the_point_running():
    noisy = {"e0": [100, 80, 120, 95], "e1": [97, 110, 85, 100]}
    assert settled_points(samples(noisy), planned=planned("e0", "e1")) == {}


def test_an_arm_without_its_repeats_keeps_the_point_open():
    """A lane running behind (or an arm whose trials failed) never lets the other arms decide the point."""
    found = settled_points(samples({"e0": [100, 101, 102], "e1": [50, 51, 52]}), planned=planned("e0", "e1", "e2"))
    assert found == {}


def test_one_arm_settles_at_the_minimum():
    assert list(settled_points(samples({"e0": [1.0, 2.0, 3.0]}), planned=planned("e0"))) == [POINT]


def test_the_driver_stops_every_arm_at_a_settled_point_and_no_other():
    plan = rounds_plan(engines=2, trials=2, repeats=6)  # two points: concurrency 0 and 1
    race = Race(plan=plan, enabled=False, tie_band=0.02, seed=0, converge=True)
    settled_trial = plan.trials_of("e0")[0]
    key = point_key(settled_trial.params_json, settled_trial.concurrency)
    for engine, value in (("e0", 100.0), ("e1", 50.0)):
        race.samples += [dataclasses.replace(s, engine_id=engine, point=key)
                         for s in samples({engine: [value] * 3})]
    race.after_round(2)
    stopped = {t.trial_id: race.stop(t) for t in plan.trials}
    at_point = [t for t in plan.trials if t.concurrency == settled_trial.concurrency]
    assert all(stopped[t.trial_id][0] == CONVERGED for t in at_point)
    assert all(stopped[t.trial_id] is None for t in plan.trials if t not in at_point)


def test_without_converge_nothing_settles():
    plan = rounds_plan(engines=2, trials=1, repeats=6)
    race = Race(plan=plan, enabled=False, tie_band=0.02, seed=0)
    race.samples += samples({"e0": [100.0] * 3, "e1": [50.0] * 3})
    race.after_round(2)
    assert race.settled == {} and race.stop(plan.trials[0]) is None


def _trial_rows() -> pd.DataFrame:
    rows = []
    for arm in ("off", "mtp:2"):
        for r in range(5):
            skipped = r >= 3
            rows.append({"workload": "decode", "workload_params_json": "{}", "concurrency": 4, "arm": arm,
                         "engine_id": arm, "repeat": r, "status": TrialStatus.SKIPPED if skipped else TrialStatus.OK,
                         "failure_kind": CONVERGED if skipped else None})
        rows.append({"workload": "decode", "workload_params_json": "{}", "concurrency": 1, "arm": arm,
                     "engine_id": arm, "repeat": 0, "status": TrialStatus.OK, "failure_kind": None})
    rows.append({"workload": "decode", "workload_params_json": "{}", "concurrency": 1, "arm": "off",
                 "engine_id": "off", "repeat": 1, "status": TrialStatus.SKIPPED, "failure_kind": RACE_ELIMINATED})
    return pd.DataFrame(rows)


def test_the_report_counts_the_repeats_each_point_took():
    table = repeats_taken(_trial_rows()).set_index("point")
    assert table.loc["c=4", "repeats taken"] == "3" and table.loc["c=4", "planned"] == 5
    assert table.loc["c=4", "stopped"] == "settled" and table.loc["c=1", "stopped"] == "at sweep.repeats"
    text = repeats_section(_trial_rows())
    assert "4 repeat(s) not taken" in text and "| decode | c=4 | 2 | 3 | 5 | settled |" in text


def test_no_section_without_a_settled_point():
    rows = _trial_rows()
    assert repeats_section(rows[rows.failure_kind != CONVERGED]) == ""
