"""Each load's and wake's first trial against the same point in other rounds, from hand-made frames."""
from __future__ import annotations

import pandas as pd
import pytest

from runner.report.first_trials import first_trial_checks, first_run_checks, first_run_line, summary_line


def _trial(trial_id, *, engine="e-1", concurrency=1, started_at, round_):
    return {"source": "s", "trial_id": trial_id, "engine_id": engine, "workload": "decode",
            "workload_params_json": "{}", "concurrency": concurrency, "started_at": started_at, "round": round_,
            "status": "ok"}


def _three_rounds() -> tuple[pd.DataFrame, pd.DataFrame]:
    """One engine's two points over rounds 0-2 (decode tok/s): c=1 at 70, 100, 102; c=4 at 200, 205."""
    trials = pd.DataFrame([_trial("a0", started_at=10, round_=0), _trial("b0", concurrency=4, started_at=11, round_=0),
                           _trial("a1", started_at=30, round_=1), _trial("b1", concurrency=4, started_at=31, round_=1),
                           _trial("a2", started_at=50, round_=2)])
    samples = pd.DataFrame({"source": "s", "trial_id": ["a0", "b0", "a1", "b1", "a2"],
                            "value": [70.0, 200.0, 100.0, 205.0, 102.0]})
    return trials, samples


def test_a_cold_first_trial_after_a_load_is_caught_and_a_warm_one_after_a_wake_passes():
    trials, samples = _three_rounds()
    phases = pd.DataFrame([{"source": "s", "phase": "start", "engine_id": "e-1", "started_at": 5.0},
                           {"source": "s", "phase": "wake", "engine_id": "e-1", "started_at": 29.0},
                           {"source": "s", "phase": "trial", "engine_id": "e-1", "started_at": 10.0}])
    checks = first_trial_checks(trials, samples, phases)
    assert list(checks.after) == ["load", "wake"]
    load, wake = checks.iloc[0], checks.iloc[1]
    assert load.ratio == pytest.approx(70 / 101) and load.n_later == 2  # decode: higher is better
    assert wake.ratio == pytest.approx(100 / 86)  # a1 against a0 and a2's median
    assert load.later_spread == pytest.approx(2 / 101) and wake.later_spread == pytest.approx(32 / 86)
    line = summary_line(checks)
    assert line.startswith("0 of 1 first trials after a load and 0 of 1 first trials after a wake")
    # The wake's point spreads 37 % across its other rounds: wider than the band the check asks of the first.
    assert "; of the 2 outside, 1 at points whose later rounds differ among themselves by more than 10%; " in line
    assert line.endswith("over all 2, the first better at 1, worse at 1: too few for a sign test to show a shift")


def test_nothing_to_check_without_a_timeline_or_a_repeat():
    trials = pd.DataFrame([_trial("a0", started_at=10, round_=0)])
    samples = pd.DataFrame({"source": ["s"], "trial_id": ["a0"], "value": [1.0]})
    phases = pd.DataFrame([{"source": "s", "phase": "start", "engine_id": "e-1", "started_at": 5.0}])
    assert first_trial_checks(trials, samples, phases).empty
    assert first_trial_checks(trials, samples, None).empty and summary_line(first_trial_checks(trials, samples, None)) == ""


def test_a_first_run_is_set_against_the_kept_second_and_a_pooled_engines_is_named_so():
    trials = pd.DataFrame([_trial("a0", started_at=10, round_=0), _trial("b0", engine="e-2", started_at=20, round_=0),
                           _trial("a1", started_at=30, round_=1)])
    samples = pd.DataFrame({"source": "s", "trial_id": ["a0", "b0", "a1"], "value": [100.0, 100.0, 100.0]})
    first_runs = trials[trials.trial_id.isin(["a0", "b0"])]
    first_samples = pd.DataFrame({"source": "s", "trial_id": ["a0", "b0"], "value": [70.0, 99.0]})
    engines = pd.DataFrame({"source": "s", "engine_id": ["e-1", "e-2"], "reused_from_pool": [False, True]})
    checks = first_run_checks(trials, samples, first_runs, first_samples, engines)
    assert list(checks.after) == ["load", "pool wake"] and list(checks.kept) == [100.0, 100.0]
    assert checks.ratio.tolist() == pytest.approx([0.7, 0.99])  # decode: higher is better
    assert first_run_line(checks).startswith("0 of 1 first trials after a load and 1 of 1 first trials after a pool "
                                             "wake ran their first run within 10% of the second")
    assert first_run_checks(trials, samples, first_runs.iloc[0:0], first_samples, engines).empty


def test_the_point_line_counts_worse_and_better_apart_and_names_the_farthest():
    from runner.report.first_trials import point_line

    checks = pd.DataFrame({"workload": ["decode", "multi_turn", "decode", "decode"], "concurrency": [1, 8, 4, 1],
                           "ratio": [1.0, 1.3, 0.85, 0.95]})
    line = point_line(checks)
    assert line.startswith("2 of 4 points' first measurements within 10% of their later repeats, 1 worse by more "
                           "and 1 better")
    assert "farthest: 1.30×, multi_turn c=8); the first better at 1, worse at 2: too few" in line
    assert point_line(checks.iloc[0:0]) == ""


def test_the_sign_test_says_whether_first_figures_run_worse_as_a_rule():
    from runner.report.first_trials import shift_text

    worse = pd.DataFrame({"ratio": [0.97, 0.95, 0.99, 0.9, 0.98, 0.96, 0.94, 1.01]})  # 7 of 8 worse: p = 0.07
    assert shift_text(worse) == "the first better at 1, worse at 7 (sign test p = 0.07: no first-use cost shows)"
    worse = pd.concat([worse, pd.DataFrame({"ratio": [0.93, 0.97]})])  # 9 of 10: p = 0.02
    assert shift_text(worse).endswith("(sign test p = 0.02: the first run worse as a rule: a first-use cost may "
                                      "be left)")
    even = pd.DataFrame({"ratio": [1.2, 0.8] * 8})
    assert shift_text(even).endswith("(sign test p = 1.00: no first-use cost shows)")


def test_each_points_first_measurement_against_its_later_repeats_names_the_point():
    from runner.report.first_trials import first_at_point_checks

    trials, samples = _three_rounds()
    checks = first_at_point_checks(trials, samples).set_index("concurrency")
    assert checks.loc[1, "engine_id"] == "e-1" and checks.loc[1, "workload_params_json"] == "{}"
    assert (checks.loc[1, "first"], checks.loc[1, "later_median"]) == (70.0, 101.0)
    assert checks.loc[4, "ratio"] == pytest.approx(200 / 205)  # decode: higher is better
