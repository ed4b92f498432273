"""Verdicts with intervals, SLO choices, the Pareto front, recommendation.yaml, cost and the race, on hand-made
Parquet whose right answers are known (pure: no engines)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from runner.measurement.race import RaceSample, race_eliminations, trial_sample
from runner.measurement.stats import Outcome, compare, ratio_interval
from runner.report.build import analyse, write_report
from runner.report.load import load_results
from runner.report.metrics import UnknownWorkload, deciding_metric
from runner.report.pareto import front_mask
from runner.report.settings import ReportSettings, ReportSettingsError, parse_settings
from runner.report.verdict import TIE_OUTCOME, TOO_FEW_OUTCOME
from runner.schema import RequestRecord, TrialRecord
from test_report import ROOT, Sweep


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
    assert row.winner == TIE_OUTCOME
    assert row["by how much"].startswith("1.01×") or row["by how much"].startswith("1.02×")
    lo, hi = map(float, row["95% interval"].rstrip("×").split("–"))
    assert lo < 1.02 and hi > 1.0  # the interval is shown and reaches into the tie band


def test_a_ten_percent_win_with_tight_spread_names_the_winner_with_its_interval(tmp_path):
    a = _two_arms(tmp_path, off=[100, 100.5, 99.5], mtp=[110, 110.5, 109.5])
    row = a.verdict.iloc[0]
    assert row.winner == "mtp:2" and row["by how much"].startswith("1.10× over off")
    lo, hi = map(float, row["95% interval"].rstrip("×").split("–"))
    assert 1.02 < lo <= 1.10 <= hi < 1.15
    assert a.recommendation["workloads"]["decode"]["choice"] == "mtp:2"


def test_fewer_than_three_repeats_names_no_winner(tmp_path):
    a = _two_arms(tmp_path, off=[100, 100.5], mtp=[150, 151])
    row = a.verdict.iloc[0]
    assert row.winner == TOO_FEW_OUTCOME and "mtp:2 / off 1.50×" in row["by how much"]
    assert "sweep.repeats=3" in row.notes
    assert a.draft_summary.iloc[0]["best k"].startswith("no choice (not enough repeats)")
    assert a.recommendation["workloads"]["decode"]["choice"] is None


def test_compare_rule():
    tight = compare([110, 110.5, 109.5], [100, 100.5, 99.5], higher_is_better=True)
    assert tight.outcome is Outcome.WINNER and tight.ratio.lo > 1.02
    lower = ratio_interval([0.10, 0.11, 0.10], [0.20, 0.21, 0.20], higher_is_better=False)
    assert lower.point == pytest.approx(2.0) and lower.lo > 1.8  # TTFT: the first arm is 2× better
    assert compare([1, 2, 3], [1, 2], higher_is_better=True).outcome is Outcome.TOO_FEW
    # The same data and seed give the same interval.
    assert ratio_interval([1, 2, 3], [2, 3, 4], higher_is_better=True, seed=7) == \
        ratio_interval([1, 2, 3], [2, 3, 4], higher_is_better=True, seed=7)


def slo_study() -> Sweep:
    """off and mtp:2 at c = 1, 4, 16, 3 repeats. TTFT p99 (ms): off 50, 100, 300; mtp:2 40, 80, 140.
    Aggregate tok/s: off 100, 380, 1200; mtp:2 150, 420, 900. SLO: TTFT p99 ≤ 200 ms.
    Known answers: at c=1 and 4 mtp:2 has the most tok/s per device; at c=16 only mtp:2 meets the SLO.
    off sustains ≈ 4 + (200 − 100) / (300 − 100) × 12 = 10 sessions; mtp:2 every measured point (≥ 16)."""
    s = Sweep()
    s.engine("off")
    s.engine("mtp:2")
    figures = {"off": {1: (50, 100), 4: (100, 380), 16: (300, 1200)},
               "mtp:2": {1: (40, 150), 4: (80, 420), 16: (140, 900)}}
    for arm, by_c in figures.items():
        for c, (ttft_ms, aggregate) in by_c.items():
            for r, jitter in enumerate((0.99, 1.0, 1.01)):
                s.trial(arm, concurrency=c, repeat=r, tok_s=aggregate / c * jitter, ttft_p99_s=ttft_ms / 1000,
                        decode_tok_s_aggregate=aggregate * jitter, duration_s=10.0 * c)
    return s


def test_slo_choice_and_interpolated_max_concurrency(tmp_path):
    run = slo_study().write(tmp_path / "slo")
    a = analyse(load_results([run]), settings=ReportSettings(slo={"ttft_p99_ms": 200.0}))
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


def test_recommendation_yaml_content_and_settings_from_the_run_folder(tmp_path):
    run = slo_study().write(tmp_path / "rec")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "model": {"name": "m", "path": "/models/m", "load_format": "dummy"},
        "spec": {"mtp": {}}, "report": {"enabled": True, "tie_band": 0.02, "slo": {"ttft_p99_ms": 200},
                                        "gpu_hour_usd": 2.0}}))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(run), "--out", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rec = yaml.safe_load((out / "recommendation.yaml").read_text())
    decode = rec["workloads"]["decode"]
    # mtp:2 wins at c=1 and c=4 (1.50× and 1.11× per session), off at c=16 (1.33×): mtp:2 wins most points.
    assert decode["choice"] == "mtp:2"
    assert decode["engine_args"]["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2}
    assert decode["engine_args"]["model"] == "/models/m" and decode["engine_args"]["load_format"] == "dummy"
    assert decode["vllm_serve"].startswith("vllm serve /models/m --speculative-config "
                                           "'{\"method\":\"mtp\",\"num_speculative_tokens\":2}'")
    assert "--enable-prefix-caching" in decode["vllm_serve"]
    assert decode["evidence"]["points_won"] == "2/3" and len(decode["evidence"]["points"]) == 3
    assert decode["draft_count"][0]["k_per_range"] == "k=2 at c=1, 4; k=0 (off) at c=16"
    assert decode["draft_count"][0]["single_k"] == 2
    assert any(c.startswith("dummy weights") for c in decode["caveats"])
    text = (out / "report.md").read_text()
    assert "## Recommendation" in text and "TTFT p99 ≤ 200 ms" in text and "## Cost" in text
    # A flag overrides the persisted setting; a bad one is an error that names the fix.
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(run), "--out", str(out), "--quiet",
                           "--slo", "ttft_p42_ms=1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "valid: ttft_p50_ms" in proc.stderr


def test_settings_parse_old_and_new_forms():
    assert parse_settings(True) == ReportSettings()
    assert parse_settings(False).enabled is False
    assert parse_settings({"slo": {"ttft_p99_ms": None, "tpot_p50_ms": 30}}).slo == {"tpot_p50_ms": 30.0}
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


def test_trial_sample_uses_the_workload_metric():
    base = dict(model="m", sweep="s", run_id="r", trial_id="t", engine_id="e", workload_params_json="{}")
    decode = TrialRecord(workload="decode", decode_tok_s_per_session=42.0, **base)
    assert trial_sample(decode, []) == 42.0
    multi = TrialRecord(workload="multi_turn", **base)
    requests = [RequestRecord(sweep="s", run_id="r", trial_id="t", engine_id="e", request_index=i, turn=i % 3,
                              ttft_s=t) for i, t in enumerate([2.0, 0.2, 0.3, 2.0, 0.4, 0.5])]
    assert trial_sample(multi, requests) == pytest.approx(0.3)  # median of turn-1 TTFTs 0.2, 0.4
    assert trial_sample(TrialRecord(workload="decode", status="failed", **base), []) is None


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


def test_h200_results_without_the_new_columns(tmp_path):
    """The committed H200 run (older Parquet: no round, no distinct_token_share) still gives a report."""
    run = ROOT / "docs/results/h200-2026-12-02/draft_count"
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(run), "--out", str(tmp_path), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rec = yaml.safe_load((tmp_path / "recommendation.yaml").read_text())
    assert rec["workloads"]["second_request"]["choice"] is None  # one repeat: no choice
    assert json.dumps(rec)  # plain data only
