"""The report's one analysis over a synthetic-profile, open-loop rate search (hand-made Parquet): goodput per arm as
the trials have it, the Answer by highest rate within the SLO, saturation probes without caveats, and a run whose
engines all failed."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from runner.report.build import analyse, settings_of, write_report
from runner.report.load import load_results
from runner.slo import Metric, Slo, Target
from tests.support.results import Sweep

PROFILE = json.dumps([0.8, 0.6, 0.4])
DURATION = 10.0
# TTFT per request (s) at each offered rate; inf: saturation, everything at once.
OFF_TTFTS = {1.0: [0.1] * 8 + [0.2, 0.3], 2.0: [0.1] * 6 + [0.3, 0.45, 0.45, 0.45], 4.0: [0.2] * 5 + [0.9] * 5,
             math.inf: [3.0] * 10}
MTP_TTFTS = {1.5: [0.1] * 10, 3.0: [0.1] * 8 + [0.3, 0.4], 6.0: [0.2] * 7 + [0.4] * 3, 9.0: [0.3] * 5 + [1.2] * 5,
             math.inf: [4.0] * 10}


def _rate_search(ttft_shift: dict[str, float] | None = None) -> Sweep:
    """off and mtp:3 (synthetic acceptance) over their own offered rates, 3 repeats, TTFT p99 ≤ 500 ms."""
    s = Sweep()
    s.engine("off")
    s.engine("mtp:3", spec_acceptance_profile=PROFILE)
    for arm, ttfts in (("off", OFF_TTFTS), ("mtp:3", MTP_TTFTS)):
        for rate, values in ttfts.items():
            for repeat in range(3):
                shifted = [v + (ttft_shift or {}).get(arm, 0.0) * (repeat - 1) for v in values]
                requests = [{"session": i, "prompt_tokens": 64, "output_tokens": 32, "ttft_s": v, "tpot_s": 0.01,
                             "e2e_s": v + 0.3, "output_hash": f"h{i}"} for i, v in enumerate(shifted)]
                s.trial(arm, params={"input_len": 64, "output_len": 32, "arrival": "poisson", "request_rate": rate},
                        repeat=repeat, requests=requests, tok_s=100.0 if arm == "off" else 180.0,
                        arrival="poisson", offered_rate_req_s=rate, duration_s=DURATION,
                        request_throughput_req_s=min(rate, 5.0 if arm == "off" else 10.0),
                        ttft_p99_s=max(shifted), ttft_s=sorted(shifted)[5],
                        goodput_req_s=sum(v <= 0.5 for v in shifted) / DURATION,
                        client_behind=math.isinf(rate),
                        spec_acceptance_profile=PROFILE if arm != "off" else None)
    return s


def _folder(tmp_path: Path, sweep: Sweep) -> Path:
    run_dir = sweep.write(tmp_path / "rs")
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"slo": {"ttft": 500, "percentile": 99},
                                                         "sweep": {"adaptive": "rate_search", "repeats": 3}}))
    return run_dir


def _goodput_by_arm(a) -> pd.DataFrame:
    return a.rate_points.set_index(["arm", "offered"]).goodput


def test_goodput_per_arm_is_the_trials_own_column(tmp_path):
    results = load_results([_folder(tmp_path, _rate_search())])
    a = analyse(results, settings=settings_of(results))
    persisted = results.trials.assign(arm=results.trials.spec_method.map({"off": "off", "mtp": "mtp:3"}))
    expected = persisted.groupby(["arm", "offered_rate_req_s"]).goodput_req_s.median()
    got = _goodput_by_arm(a)
    assert len(got) == len(expected) == 9
    for (arm, rate), value in expected.items():
        assert got[(arm, rate)] == pytest.approx(value), (arm, rate)
    assert got[("off", 1.0)] == pytest.approx(1.0)  # spec off is not 0 under the synthetic profile


def test_goodput_under_another_slo_counts_the_same_requests_for_every_arm(tmp_path):
    """A report-time SLO recounts from the requests: spec off's (copied under its profile) are found too."""
    from runner.config.report import with_overrides

    results = load_results([_folder(tmp_path, _rate_search())])
    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=350.0),))
    a = analyse(results, settings=with_overrides(settings_of(results), slo=slo))
    got = _goodput_by_arm(a)
    assert got[("off", 2.0)] == pytest.approx(7 / DURATION)  # 0.1 ×6 and 0.3 meet 350 ms; 0.45 ×3 do not
    assert got[("mtp:3", 6.0)] == pytest.approx(7 / DURATION)


def test_the_answer_states_each_arms_highest_rate_the_ratio_and_what_to_deploy(tmp_path):
    results = load_results([_folder(tmp_path, _rate_search())])
    a = analyse(results, settings=settings_of(results))
    verdict = a.rate_verdicts[0]
    assert [x.arm for x in verdict.arms] == ["mtp:3", "off"] and verdict.deploy == "mtp:3"
    mtp, off = verdict.arms
    assert 6.0 <= mtp.lo <= mtp.estimate <= mtp.hi <= 9.0 and mtp.hi == pytest.approx(9.0)
    assert 2.0 <= off.lo <= off.estimate <= off.hi == pytest.approx(4.0)
    assert verdict.ratio_lo == pytest.approx(mtp.lo / off.hi) and verdict.ratio_hi == pytest.approx(mtp.hi / off.lo)
    row = a.answer.iloc[0]
    assert row.deploy == "mtp:3" and "highest rate within TTFT p99 ≤ 500 ms" in row["by how much"]
    assert "deploy mtp:3" in a.rate_lines[0] and "indeterminate" not in a.rate_lines[0]
    assert a.draft_lines == []  # not a choice per offered rate where the arms ran other rates


def test_overlapping_intervals_are_indeterminate(tmp_path):
    """mtp:3 as slow as off: its crossing lies in the same bracket, so the data cannot tell them apart."""
    s = _rate_search()
    slow = {1.5: [0.1] * 10, 3.0: [0.2] * 7 + [0.9] * 3, 9.0: [1.0] * 10, math.inf: [4.0] * 10}
    keep = [t for t in s.trials if t.spec_method == "off"]
    s.trials, s.requests = keep, [r for r in s.requests if r.trial_id in {t.trial_id for t in keep}]
    for rate, values in slow.items():
        for repeat in range(3):
            s.trial("mtp:3", params={"input_len": 64, "output_len": 32, "arrival": "poisson", "request_rate": rate},
                    repeat=repeat, requests=[{"session": i, "prompt_tokens": 64, "output_tokens": 32, "ttft_s": v,
                                              "output_hash": f"h{i}"} for i, v in enumerate(values)],
                    tok_s=180.0, arrival="poisson", offered_rate_req_s=rate, duration_s=DURATION,
                    request_throughput_req_s=min(rate, 5.0), ttft_p99_s=max(values),
                    goodput_req_s=1.0, spec_acceptance_profile=PROFILE)
    results = load_results([_folder(tmp_path, s)])
    a = analyse(results, settings=settings_of(results))
    assert a.rate_verdicts[0].deploy == "indeterminate"
    assert "**indeterminate**" in a.rate_lines[0] and a.answer.iloc[0].deploy == "indeterminate"


def test_saturation_probes_are_not_client_behind(tmp_path):
    results = load_results([_folder(tmp_path, _rate_search())])
    a = analyse(results, settings=settings_of(results))
    assert not any("Client behind" in b for b in a.blocking)
    assert not a.rate_points.client_behind.any()


def test_the_matrix_compares_arms_only_at_rates_both_ran(tmp_path):
    from runner.report.matrix import arm_load_matrices

    s = _rate_search()
    results = load_results([_folder(tmp_path, s)])
    a = analyse(results, settings=settings_of(results))
    (title, frame), = arm_load_matrices(a.points, a.outcomes, a.trials)
    assert list(frame.columns) == ["arm", "request_rate=inf"] and "only some arms ran" in title


def test_open_loop_plots_are_against_offered_rate(tmp_path):
    report = write_report(run_dirs=[_folder(tmp_path, _rate_search())], out_dir=tmp_path / "out")
    names = {p.name for p in report.plots}
    assert "latency_vs_rate.png" in names and not any("concurrency" in n or "throughput" in n for n in names)
    assert json.loads((tmp_path / "out" / "answer.json").read_text())["highest_rate"]


def test_a_run_whose_engines_all_failed_says_which_and_why(tmp_path, capsys):
    s = Sweep()
    s.engine("off", status="failed", failure_kind="out_of_memory", failure_reason="another process holds the GPU")
    s.engine("mtp:1", status="failed", failure_kind="out_of_memory", failure_reason="another process holds the GPU")
    run_dir = s.write(tmp_path / "failed")
    report = write_report(run_dirs=[run_dir], out_dir=tmp_path / "out", echo=True)
    text = report.path.read_text()
    assert "all 2 engine(s) failed to start" in text and "another process holds the GPU" in text
    assert "| off |" in text and "| mtp:1 |" in text
    assert "failed to start" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "answer.json").read_text())["failed_engines"]


def _study_a() -> Sweep:
    """off pc=on, mtp:3 pc=off, mtp:3 pc=on over a 3-turn multi-turn point, 3 repeats: turns 1 and 2 hit the cache;
    mtp:3 with caching serves one 16-token block fewer per hit at turn 2 only, and none without caching."""
    import dataclasses

    s = Sweep()
    s.engine("off")
    s.engine("mtp:3")
    s.engines["mtp:3 nopc"] = dataclasses.replace(s.engines["mtp:3"], engine_id="e-mtp3-nopc",
                                                  enable_prefix_caching=False)
    params = {"context_len": 512, "turns": 3, "turn_tokens": 128, "output_len": 32}
    cached = {"off": {0: 0, 1: 640, 2: 800}, "mtp:3": {0: 0, 1: 640, 2: 784}, "mtp:3 nopc": {0: 0, 1: 0, 2: 0}}
    for arm, by_turn in cached.items():
        for repeat in range(3):
            requests = [{"session": session, "turn": turn, "prompt_tokens": 512 + 160 * turn, "output_tokens": 32,
                         "ttft_s": 0.1, "cached_tokens": by_turn[turn], "output_hash": f"h{session}{turn}"}
                        for session in range(2) for turn in range(3)]
            s.trial(arm, workload="multi_turn", params=params, concurrency=2, repeat=repeat, requests=requests,
                    tok_s=50.0, enable_prefix_caching=arm != "mtp:3 nopc")
    return s


def test_the_prefix_cache_deficit_is_measured_on_the_same_requests(tmp_path):
    from runner.report.cache_deficit import cache_deficit

    results = load_results([_study_a().write(tmp_path / "a")])
    a = analyse(results, settings=settings_of(results))
    d = cache_deficit(a.trials, a.requests)
    assert len(d) == 1  # only the arm with caching and speculation; spec off is the reference
    row = d.iloc[0]
    assert row.reference == "off pc=on" and row.arm == "mtp:3 pc=on" and row.hits == 3 * 2 * 2  # repeats × sessions × turns with a hit
    assert row["lost per hit"] == pytest.approx(16 / 2) and row["share of hits"] == pytest.approx(0.5)
    assert row["share of cached tokens"] == pytest.approx(16 / (640 + 800))
    assert "8 prompt tokens lost per cache hit, at 50 % of hits" in a.deficit_lines[0]
    assert "Prefix-cache deficit" in write_report(run_dirs=[results.run_dirs[0]], out_dir=tmp_path / "o").path.read_text()
