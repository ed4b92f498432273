"""Reports over hand-made Parquet results whose right answers are known (tests/support/results.py). The report
CLI on the same folder is in tests/cli/test_report_cli.py, a report over a real CPU sweep in tests/engine/test_report_engine.py."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runner.report.build import analyse
from runner.report.load import load_results
from runner.report.verdict import CAPACITY_OUTCOME, TIE_OUTCOME, TOO_FEW_OUTCOME, choose_k

from tests.support.results import Sweep, report_fixture


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory) -> Path:
    return report_fixture(tmp_path_factory.mktemp("fx") / "fixture")


@pytest.fixture(scope="module")
def analysis(fixture_dir):
    return analyse(load_results([fixture_dir]))


def _outcome(analysis, workload: str, concurrency: int, **params) -> str:
    o = analysis.outcomes[(analysis.outcomes.workload == workload) & (analysis.outcomes.concurrency == concurrency)]
    for key, value in params.items():
        o = o[[json.loads(p)[key] == value for p in o.workload_params_json]]
    assert len(o) == 1
    return o.iloc[0].outcome


def test_choose_k_within_noise_is_a_tie_and_the_smaller_k_wins():
    candidates = pd.DataFrame({"k": [0, 1, 2], "n": [3, 3, 3],
                               "values": [[100, 101, 99], [149, 150, 151], [150.5, 149.5, 151.5]]})
    candidates["median"] = [float(np.median(v)) for v in candidates["values"]]
    assert choose_k(candidates, higher_is_better=True) == {"best_k": 1, "leader_k": 2, "tied": [1, 2], "n_min": 3}
    lower = pd.DataFrame({"k": [0, 2], "n": [3, 1], "values": [[1.0, 1.0, 1.1], [0.5]], "median": [1.0, 0.5]})
    # One repeat of k=2 gives no interval: it cannot be told apart from k=0, and too few repeats choose nothing.
    assert choose_k(lower, higher_is_better=False) == {"best_k": None, "leader_k": 2, "tied": [0, 2], "n_min": 1}


def test_tie_between_k1_and_k2_picks_k1(analysis):
    choices = analysis.draft_choices[(analysis.draft_choices.workload == "decode")]
    at_c1 = choices[choices.concurrency == 1].iloc[0]
    assert at_c1.tied == [1, 2] and at_c1.best_k == 1
    assert choices[choices.concurrency == 16].iloc[0].best_k == 0  # spec off wins at 16 sessions
    row = analysis.draft_summary[analysis.draft_summary.workload == "decode"].iloc[0]
    assert "k=1 at c=1, 4" in row["best k"] and "k=0 (off) at c=16" in row["best k"]
    assert "ties" in row.notes and "fewer than" not in row.notes and row["single k"] == "1"


def test_verdict_tie_and_crossover(analysis):
    # mtp:1 vs mtp:2 medians: 150 vs 150.5 (c=1) and 120 vs 120.5 (c=4): inside the 2% tie band.
    assert _outcome(analysis, "decode", 1) == TIE_OUTCOME
    assert _outcome(analysis, "decode", 16) == "off"
    cross = analysis.crossovers[analysis.crossovers.workload == "decode"]
    # The tie's choice is its simplest arm (mtp:1 before mtp:2), and that is what flips at c=16.
    assert cross[["axis", "between", "from", "to"]].values.tolist() == [["c", "4 → 16", "mtp:1", "off"]]
    verdict = analysis.verdict[analysis.verdict.workload == "decode"].set_index("choice")
    assert verdict.loc["off", "over"] == "c=16"
    assert verdict.loc["off", "by how much"].startswith("1.25× over mtp:1")
    lo, hi = map(float, verdict.loc["off", "95% interval"].rstrip("×").split("–"))
    assert 1.02 < lo <= 1.25 <= hi  # off [49, 50, 51] against mtp:1 [39, 40, 41]
    assert verdict.loc["mtp:1", "over"] == "c=1, 4"
    assert verdict.loc["mtp:1", "outcome"].startswith(TIE_OUTCOME) and "mtp:1, mtp:2" in verdict.loc["mtp:1", "outcome"]
    assert "failed: mtp:3" in verdict.loc["off", "notes"]


def test_capacity_wall_is_flagged_not_read_as_a_win(analysis):
    walled = analysis.capacity[analysis.capacity.workload == "multi_turn"]
    assert set(walled.concurrency) == {8}
    assert {json.loads(p)["context_len"] for p in walled.workload_params_json} == {16384}
    # 8 sessions × (16384 + 2·1088 + 64) = 148,992 live tokens against a 100,000-token pool.
    assert walled.demand_tokens.iloc[0] == 8 * (16384 + 2 * 1088 + 64)
    assert _outcome(analysis, "multi_turn", 8, context_len=16384) == CAPACITY_OUTCOME
    # One repeat: off leads by 7.5× on the numbers, but no winner is named.
    assert _outcome(analysis, "multi_turn", 8, context_len=4096) == TOO_FEW_OUTCOME
    row = analysis.verdict[(analysis.verdict.workload == "multi_turn")
                           & (analysis.verdict.outcome == TOO_FEW_OUTCOME)].iloc[0]
    assert "off / mtp:1 7.50×" in row["by how much"]  # turn-1 TTFT 1.5 s vs 0.2 s decides, not the trial's 1.0 s
    assert "1 repeat(s): below 3, no choice (fix: sweep.repeats=3)" in row.notes


def test_divergence_is_found_per_request(analysis):
    d = analysis.divergence
    assert len(d) == 1
    row = d.iloc[0]
    assert (row.workload, row.concurrency, row["repeat"], row.arm, row.reference) == ("decode", 4, 0, "mtp:2", "off")
    assert (row.requests_differing, row.requests_compared) == (1, 4)
    tie = analysis.verdict[(analysis.verdict.workload == "decode")
                           & analysis.verdict.outcome.str.startswith(TIE_OUTCOME)]
    assert "outputs differ: mtp:2 vs off" in tie.iloc[0].notes


def test_failed_configuration_keeps_its_reason(analysis):
    f = analysis.failures
    assert f.values.tolist() == [["mtp:3", "engine start", "kv_cache_too_small",
                                  "not enough KV cache for max_model_len", "needed_gib=2.47", 9]]


def test_too_few_repeats_is_said(analysis):
    row = analysis.draft_summary[analysis.draft_summary.workload == "multi_turn"].iloc[0]
    assert "fewer than 3" in row.notes and "sweep.repeats=3" in row.notes


def test_bandwidth_share_on_a_known_device(tmp_path):
    s = Sweep(device="NVIDIA H200")
    s.engine("off", weights_gib=12.42)
    s.trial("off", tok_s=210.0)
    a = analyse(load_results([s.write(tmp_path / "h200")]))
    share = a.bandwidth.iloc[0]
    assert share.bound_tok_s == pytest.approx(4.8e12 / (12.42 * 2**30))
    assert share.share == pytest.approx(0.58, abs=0.01)  # the reference figure: ~58% at bs1


def test_fixed_task_runs_count_as_repeats(tmp_path):
    """One trial per arm with a warm-up and 3 measured runs: the runs are the samples (1 / TPOT)."""
    s = Sweep()
    params = {"input_len": 512, "output_len": 256, "runs": 3}
    for arm, tpots in (("off", [0.0130, 0.0129, 0.0131]), ("mtp:2", [0.0067, 0.0068, 0.0066])):
        s.engine(arm)
        runs = [{"turn": 0, "phase": "warmup", "prompt_tokens": 512, "output_tokens": 256, "tpot_s": 0.5,
                 "output_hash": "w"}]
        runs += [{"turn": i + 1, "phase": "measured", "prompt_tokens": 512, "output_tokens": 256, "tpot_s": t,
                  "output_hash": "x"} for i, t in enumerate(tpots)]
        s.trial(arm, workload="fixed_task", params=params, requests=runs, tok_s=1.0)
    a = analyse(load_results([s.write(tmp_path / "fixed")]))
    points = a.points.set_index("arm")
    assert points.loc["off", "n"] == 3 and points.loc["off", "median"] == pytest.approx(1 / 0.0130)
    row = a.verdict.iloc[0]
    assert row.choice == "mtp:2" and row.outcome == "wins beyond noise"
    assert row["by how much"].startswith("1.94× over off") and row.notes == ""
    assert row["95% interval"] != "–"
    assert a.draft_summary.iloc[0]["best k"].startswith("k=2") and a.draft_summary.iloc[0].repeats == 3


def test_two_folders_are_compared_with_the_folder_in_the_arm(tmp_path):
    for name, speed in (("run_a", 100.0), ("run_b", 130.0)):
        s = Sweep(run_id=name)
        s.engine("off")
        s.trial("off", tok_s=speed)
        s.write(tmp_path / name)
    a = analyse(load_results([tmp_path / "run_a", tmp_path / "run_b"]))
    assert set(a.points.arm) == {"off @run_a", "off @run_b"}
    assert a.verdict.iloc[0].outcome == TOO_FEW_OUTCOME  # one repeat each: the ratio is shown, no winner
    assert a.verdict.iloc[0]["by how much"] == "ahead on the numbers: off @run_b / off @run_a 1.30×"


def test_first_trials_name_the_warm_up_mode_the_rows_record():
    from runner.report.sections import _warmup_modes

    assert _warmup_modes(pd.DataFrame({"warmup": ["light", "light", None]})) == " (light)"
    assert _warmup_modes(pd.DataFrame({"warmup": ["full", "light"]})) == " (full, light)"
    assert _warmup_modes(pd.DataFrame({"trial_id": ["t"]})) == ""  # a folder written before the column
