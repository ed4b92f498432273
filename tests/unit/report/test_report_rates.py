"""Open-loop trials against offered rate: each arm's highest rate within the SLO, its interval, and goodput."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from runner.report.rates import highest_rates, line_params, rate_points, request_goodput
from runner.slo import Metric, Slo, Target

SLO = Slo(targets=(Target(metric=Metric.TTFT, ms=100.0),))


def trials(arm: str, ttft_by_rate: dict, repeats: int = 3, spread: float = 0.0, behind=()):
    rows = []
    for rate, ttft_ms in ttft_by_rate.items():
        for r in range(repeats):
            rows.append({"source": "s", "trial_id": f"{arm}-{rate}-{r}", "status": "ok", "workload": "decode",
                         "workload_params_json": json.dumps({"arrival": "poisson", "request_rate": rate,
                                                             "input_len": 8}, sort_keys=True),
                         "arm": arm, "arm_order": 0 if arm == "off" else 1, "arrival": "poisson",
                         "offered_rate_req_s": float(rate), "request_throughput_req_s": min(float(rate), 9.0),
                         "ttft_p50_s": ttft_ms / 2000, "ttft_p99_s": (ttft_ms + spread * (r - 1)) / 1000,
                         "tpot_p50_s": 0.01, "duration_s": 10.0, "client_behind": rate in behind})
    return pd.DataFrame(rows)


NO_REQUESTS = pd.DataFrame(columns=["source", "trial_id", "phase", "error", "ttft_s", "tpot_s", "e2e_s"])


def test_the_highest_rate_is_interpolated_between_the_bracketing_rates():
    t = trials("off", {1: 20, 2: 40, 4: 80, 8: 160})
    best = highest_rates(rate_points(t, NO_REQUESTS, SLO), SLO).iloc[0]
    assert best["highest rate"] == pytest.approx(4 + (100 - 80) * (8 - 4) / (160 - 80))
    assert "between 4 and 8" in best["within the SLO"]
    assert best.ci_lo == pytest.approx(best.ci_hi) == pytest.approx(5.0)  # repeats agree: no spread


def test_the_interval_widens_with_the_repeats_spread():
    t = trials("off", {2: 40, 4: 90, 8: 130}, spread=30)
    best = highest_rates(rate_points(t, NO_REQUESTS, SLO), SLO).iloc[0]
    assert best.ci_lo < best["highest rate"] < best.ci_hi
    assert 2 <= best.ci_lo and best.ci_hi <= 8


def test_every_rate_meeting_or_none_says_so():
    table = highest_rates(rate_points(pd.concat([trials("off", {1: 10, 2: 20}), trials("mtp:1", {1: 200, 2: 300})]),
                                      NO_REQUESTS, SLO), SLO).set_index("arm")
    assert table.loc["off", "within the SLO"].startswith("≥ 2 req/s")
    assert table.loc["mtp:1", "within the SLO"].startswith("< 1 req/s") and math.isnan(table.loc["mtp:1",
                                                                                                  "highest rate"])


def test_saturation_sits_last_at_its_measured_throughput_and_is_never_client_behind():
    t = trials("off", {2: 20, 4: 40, math.inf: 400}, behind=(math.inf,))
    points = rate_points(t, NO_REQUESTS, SLO)
    assert list(points.offered) == [2, 4, math.inf] and list(points.x) == [2, 4, 9.0]
    best = highest_rates(points, SLO).iloc[0]
    assert "between 4 and 9" in best["within the SLO"]
    assert best["client behind at"] == "–"  # a saturation probe sends everything at once by design


def test_goodput_counts_requests_within_the_tightest_limit_per_figure():
    t = trials("off", {2: 20}, repeats=1)
    requests = pd.DataFrame([{"source": "s", "trial_id": "off-2-0", "phase": "measured", "error": None,
                              "ttft_s": v, "tpot_s": 0.01, "e2e_s": 1.0} for v in (0.01, 0.05, 0.2, 0.3)])
    good = request_goodput(t, requests, Slo(targets=(Target(metric=Metric.TTFT, ms=100),
                                                     Target(metric=Metric.TTFT, ms=60, percentile=50))))
    assert good.iloc[0] == pytest.approx(2 / 10.0)


def test_lines_leave_the_rate_axes_out():
    assert line_params(json.dumps({"request_rate": 3, "input_len": 8, "time_scale": 0.5})) == '{"input_len": 8}'


def test_the_bracket_is_named_with_its_width_and_whether_the_repeats_resolve_it():
    best = highest_rates(rate_points(trials("off", {4: 80, 8: 160}), NO_REQUESTS, SLO), SLO).iloc[0]
    assert best.bracket == "4–8 req/s (100% wide)"
    noisy = highest_rates(rate_points(trials("off", {4: 95, 5: 105}, spread=30), NO_REQUESTS, SLO), SLO).iloc[0]
    assert noisy.bracket == "4–5 req/s (25% wide, within the repeats' noise)"
