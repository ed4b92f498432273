"""Verdicts with intervals, SLO choices, the Pareto front, cost and the race, on hand-made Parquet whose right
answers are known (pure: no engines). recommendation.yaml through the report CLI: tests/cli/test_report_decisions_cli.py."""
from __future__ import annotations

import pytest

from runner.numerics.race import RaceSample, race_eliminations
from runner.numerics.decision import Candidate, DecisionKind, decide
from runner.numerics.stats import ratio_interval
from runner.report.build import analyse, write_report
from runner.report.load import load_results
from runner.report.samples import UnknownWorkload, deciding_metric
from runner.report.pareto import front_mask
from runner.config.report import ReportSettings, ReportSettingsError, parse_settings
from runner.report.verdict import TIE_OUTCOME, TOO_FEW_OUTCOME
from runner.slo import Metric, Slo, Target

from tests.support.results import Sweep, slo_study


def _two_arms(tmp_path, off: list[float], mtp: list[float], *, name: str = "two", **trial_columns):
    s = Sweep()
    s.engine("off")
    s.engine("mtp:2")
    for arm, values in (("off", off), ("mtp:2", mtp)):
        for r, v in enumerate(values):
            s.trial(arm, repeat=r, tok_s=v, **trial_columns)
    return analyse(load_results([s.write(tmp_path / name)]))


def test_a_one_and_a_half_percent_difference_with_spread_is_a_tie(tmp_path):
    a = _two_arms(tmp_path, off=[100, 104, 96], mtp=[101.5, 105, 97])
    row = a.verdict.iloc[0]
    assert row.outcome.startswith(TIE_OUTCOME) and row.choice == "off"  # the simplest of the tied arms
    assert row["by how much"].startswith("1.01×") or row["by how much"].startswith("1.02×")
    lo, hi = map(float, row["95% interval"].rstrip("×").split("–"))
    assert lo < 1.02 and hi > 1.0  # the interval is shown and reaches into the tie band


def test_a_ten_percent_win_with_tight_spread_names_the_winner_with_its_interval(tmp_path):
    a = _two_arms(tmp_path, off=[100, 100.5, 99.5], mtp=[110, 110.5, 109.5])
    row = a.verdict.iloc[0]
    assert row.choice == "mtp:2" and row["by how much"].startswith("1.10× over off")
    lo, hi = map(float, row["95% interval"].rstrip("×").split("–"))
    assert 1.02 < lo <= 1.10 <= hi < 1.15
    assert a.recommendation["workloads"]["decode"]["choice"] == "mtp:2"


def test_fewer_than_three_repeats_names_no_winner(tmp_path):
    a = _two_arms(tmp_path, off=[100, 100.5], mtp=[150, 151])
    row = a.verdict.iloc[0]
    assert row.outcome == TOO_FEW_OUTCOME and "mtp:2 / off 1.50×" in row["by how much"]
    assert "sweep.repeats=3" in row.notes
    assert a.draft_summary.iloc[0]["best k"].startswith("no choice (not enough repeats)")
    assert a.recommendation["workloads"]["decode"]["choice"] is None


def _two(first, second) -> object:
    """The decision between two arms (the first named "a")."""
    return decide([Candidate(arm="a", values=tuple(first)), Candidate(arm="b", values=tuple(second), order=1)],
                  higher_is_better=True)


def test_decision_rule():
    tight = _two([110, 110.5, 109.5], [100, 100.5, 99.5])
    assert tight.kind is DecisionKind.WINNER and tight.leader == "a" and tight.margin.lo > 1.02
    lower = ratio_interval([0.10, 0.11, 0.10], [0.20, 0.21, 0.20], higher_is_better=False)
    assert lower.point == pytest.approx(2.0) and lower.lo > 1.5  # TTFT: the first arm is 2× better
    assert _two([1, 2, 3], [1, 2]).kind is DecisionKind.TOO_FEW
    # The same data and seed give the same interval.
    assert ratio_interval([1, 2, 3], [2, 3, 4], higher_is_better=True, seed=7) == \
        ratio_interval([1, 2, 3], [2, 3, 4], higher_is_better=True, seed=7)


def test_three_repeats_that_merely_separate_are_a_tie():
    """One fresh CPU demo's c=1 figures: every MTP k=2 repeat above every spec-off repeat, the bootstrap's interval
    1.03-1.37x, a second fresh run a tie. Three against three reach 90 % at most without a model of the noise
    (the whole range of pairwise ratios) and Welch's t on log values (t = 3.3 at ~3 degrees of freedom) reaches
    below 1: a tie."""
    from runner.numerics.stats import pairwise_ratio_bounds, welch_ratio_bounds

    mtp, off = [256.06, 253.16, 235.33], [228.77, 187.0, 214.21]
    result = _two(mtp, off)
    assert result.kind is DecisionKind.TIE and result.margin.lo < 1.0 < 1.02 < result.margin.point
    assert pairwise_ratio_bounds(mtp, off, higher_is_better=True)[0] == pytest.approx(235.33 / 228.77)
    lo, hi = welch_ratio_bounds(mtp, off, higher_is_better=True)
    assert lo == pytest.approx(result.margin.lo) and hi == pytest.approx(result.margin.hi)


def test_the_distribution_free_bounds_follow_the_mann_whitney_table():
    from math import comb

    from runner.numerics.stats import _rank_sum_counts, _t_quantile, pairwise_ratio_bounds

    for m, n in ((3, 3), (4, 4), (5, 5), (3, 5)):
        counts = _rank_sum_counts(m, n)
        assert sum(counts) == comb(m + n, m) and len(counts) == m * n + 1 and counts == counts[::-1]
    # 5 against 5 at 95 %: P(U <= 2) = 4/252 <= 2.5 % < P(U <= 3) = 7/252, so the 3rd smallest and 3rd largest
    # of the 25 pairwise ratios; 3 against 3: the whole range.
    five = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert pairwise_ratio_bounds(five, five, higher_is_better=True) == pytest.approx((1 / 3, 3.0))
    assert pairwise_ratio_bounds([2, 3, 4], [1, 2, 3], higher_is_better=True) == pytest.approx((2 / 3, 4.0))
    assert _t_quantile(0.975, 2) == pytest.approx(4.303, abs=1e-3)
    assert _t_quantile(0.975, 30) == pytest.approx(2.042, abs=1e-3)


def test_slo_choice_and_interpolated_max_concurrency(tmp_path):
    run = slo_study().write(tmp_path / "slo")
    a = analyse(load_results([run]), settings=ReportSettings(slo=Slo(targets=(Target(metric=Metric.TTFT, ms=200.0),))))
    choices = a.slo_choices.set_index("concurrency")
    assert choices.loc[1, "choice"] == "mtp:2" and choices.loc[1, "verdict"] == "best"
    assert choices.loc[4, "choice"] == "mtp:2"
    assert choices.loc[16, "choice"] == "mtp:2" and choices.loc[16, "meeting"] == "1/2"
    reach = a.slo_reach.set_index("arm")
    assert reach.loc["off", "max concurrency"] == pytest.approx(10.0)
    assert "interpolated between c=4 and c=16" in reach.loc["off", "within the SLO"]
    assert reach.loc["mtp:2", "within the SLO"].startswith("≥ 16")


def test_pareto_front(tmp_path):
    assert front_mask([1, 2, 3, 2], [3, 2, 1, 1]) == [True, True, True, False]
    a = analyse(load_results([slo_study().write(tmp_path / "p")]))
    front = a.pareto[a.pareto.on_front]
    # off at c=16 has the most tok/s per device; mtp:2 at c=1 the most per session; off c=1 is dominated.
    assert {("off", 16), ("mtp:2", 1)} <= set(zip(front.arm, front.concurrency))
    assert ("off", 1) not in set(zip(front.arm, front.concurrency))


def test_cost_per_million_tokens(tmp_path):
    a = analyse(load_results([slo_study().write(tmp_path / "c")]), settings=ReportSettings(gpu_hour_usd=3.6))
    row = a.cost[(a.cost.arm == "off") & (a.cost.concurrency == 1)].iloc[0]
    assert row["$ per 1M output tokens"] == pytest.approx(3.6 / (100 * 3600) * 1e6)  # $10 at 100 tok/s


def test_settings_parse_old_and_new_forms():
    assert parse_settings(True) == ReportSettings()
    assert parse_settings(False).enabled is False
    with pytest.raises(ReportSettingsError, match="fix: report.tie_band=0.02"):
        parse_settings({"tie_band": -1})


def test_unknown_workload_is_an_error_listing_the_valid_ones():
    assert deciding_metric("multi_turn").higher_is_better is False
    with pytest.raises(UnknownWorkload, match="valid: decode, fixed_task"):
        deciding_metric("no_such_workload")


def test_degenerate_outputs_are_flagged(tmp_path):
    a = _two_arms(tmp_path, off=[100, 100, 100], mtp=[150, 150, 150], name="deg", distinct_token_share=0.1)
    assert set(a.degenerate.arm) == {"off", "mtp:2"}
    assert any("degenerate outputs" in c for c in a.recommendation["workloads"]["decode"]["caveats"])


def _samples(values: dict[str, list[float]], points=("c=1", "c=4")) -> list[RaceSample]:
    return [RaceSample(engine_id=f"e-{arm}", arm=arm, workload="decode", point=point, round=r, value=v,
                       higher_is_better=True)
            for arm, vs in values.items() for point in points for r, v in enumerate(vs)]


def test_race_eliminates_a_planted_loser_and_not_a_tie():
    samples = _samples({"off": [100, 101, 99], "mtp:1": [150, 151, 149], "mtp:2": [150.5, 149, 151],
                        "mtp:3": [80, 81, 79]})
    out = race_eliminations(samples)
    assert set(out) == {("e-off", "decode"), ("e-mtp:3", "decode")}  # mtp:1 ties the leader: it keeps running
    assert "after round 2" in out[("e-mtp:3", "decode")] and "all 2 point(s)" in out[("e-mtp:3", "decode")]
    # Behind at one point only: not eliminated.
    mixed = _samples({"a": [100, 100, 100], "b": [80, 80, 80]}, points=("c=1",)) + \
        _samples({"a": [100, 100, 100], "b": [120, 120, 120]}, points=("c=4",))
    assert race_eliminations(mixed) == {}
    # Too few rounds: nothing is decided yet (below the verdict's 3 repeats, a stopped arm could not be called behind).
    assert race_eliminations(_samples({"a": [100], "b": [50]})) == {}
    assert race_eliminations(_samples({"a": [100, 101], "b": [50, 51]})) == {}


def test_race_stops_are_reported_with_the_time_saved(tmp_path):
    s = Sweep()
    s.engine("off")
    s.engine("mtp:2")
    for r in range(3):
        s.trial("off", repeat=r, tok_s=100.0, duration_s=12.0)
    s.trial("mtp:2", repeat=0, tok_s=50.0, duration_s=20.0)
    s.trial("mtp:2", repeat=1, tok_s=50.5, duration_s=22.0)
    s.trial("mtp:2", repeat=2, status="skipped", failure_kind="race_eliminated",
            failure_reason="mtp:2 behind the leader")
    a = analyse(load_results([s.write(tmp_path / "race")]))
    row = a.race.iloc[0]
    assert (row.arm, row["from round"], row["trials skipped"]) == ("mtp:2", 2, 1)
    assert row["device s saved (est.)"] == pytest.approx(21.0)
    assert not len(a.failures)  # a skipped trial is not a failure
    text = write_report(run_dirs=[tmp_path / "race"], out_dir=tmp_path / "o").path.read_text()
    assert "## Early elimination (race)" in text and "1 trial(s) skipped" in text


def test_race_time_saved_counts_a_trials_whole_span():
    import pandas as pd

    from runner.report.race_report import trial_device_s

    trials = pd.DataFrame({"trial_id": ["a", "b", "c"], "duration_s": [0.3, 0.3, 0.3],
                           "wall_s": [0.8, 0.8, None], "warmup_s": [0.0, 0.5, None]})
    # No timeline: the whole workload run plus its warm-up, else the measured window.
    assert trial_device_s(trials).tolist() == pytest.approx([0.8, 1.3, 0.3])
    phases = pd.DataFrame({"phase": ["trial", "start"], "trial_id": ["a", None], "duration_s": [1.1, 30.0]})
    # With one: the trial's span on it (warm-up, prompts, counters included); the others as before.
    assert trial_device_s(trials, phases).tolist() == pytest.approx([1.1, 1.3, 0.3])
