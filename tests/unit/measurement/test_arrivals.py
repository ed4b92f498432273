"""Arrival schedules (seeded, pure) and the open-loop driver on a fake engine: requests leave on schedule
whether or not earlier ones finished, latency counts from the scheduled send, lag is recorded."""
from __future__ import annotations

import asyncio
import math
import random

import pytest

from runner.measurement.arrivals import (CLIENT_BEHIND_P99_S, Arrival, coefficient_of_variation, gaps, lag_columns,
                                         offered_rate, send_offsets)
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext
from runner.plan.grid import point_levels

from tests.support.fake_engine import SlowEngine
from tests.support.ks import exponential_cdf, ks_pvalue, ks_statistic


def test_gamma_with_burstiness_half_has_a_cv_near_root_two():
    offsets = send_offsets(count=20_001, rate=5.0, burstiness=0.5, seed=3)
    cv = coefficient_of_variation(gaps(offsets))
    assert cv == pytest.approx(math.sqrt(2), rel=0.05)
    assert offered_rate(offsets) == pytest.approx(5.0, rel=0.05)


def test_poisson_gaps_have_cv_one_and_the_set_mean():
    g = gaps(send_offsets(count=20_001, rate=8.0, seed=1))
    assert coefficient_of_variation(g) == pytest.approx(1.0, rel=0.05)
    assert sum(g) / len(g) == pytest.approx(1 / 8.0, rel=0.05)


def test_schedules_are_seeded_and_start_at_zero():
    a = send_offsets(count=50, rate=3.0, burstiness=0.5, seed=7)
    assert a == send_offsets(count=50, rate=3.0, burstiness=0.5, seed=7)
    assert a != send_offsets(count=50, rate=3.0, burstiness=0.5, seed=8)
    assert a[0] == 0.0 and a == sorted(a)
    assert send_offsets(count=4, rate=math.inf, seed=0) == [0.0] * 4
    assert send_offsets(count=0, rate=1.0) == []


def test_ks_accepts_the_exponential_and_refuses_the_wrong_rate():
    g = gaps(send_offsets(count=401, rate=10.0, seed=2))
    assert ks_pvalue(ks_statistic(g, exponential_cdf(10.0)), len(g)) > 0.05
    assert ks_pvalue(ks_statistic(g, exponential_cdf(20.0)), len(g)) < 1e-3
    # The statistic against a known case: one sample at the median of U(0, 1).
    assert ks_statistic([0.5], lambda x: x) == pytest.approx(0.5)


def test_lag_columns_exclude_slot_waits_and_flag_a_client_behind():
    on_time = lag_columns(lags=[0.001] * 100, slot_waits=[None] * 100)
    assert on_time["send_lag_p99_s"] == pytest.approx(0.001) and on_time["client_behind"] is False
    capped = lag_columns(lags=[0.5] * 100, slot_waits=[0.4995] * 100)  # waiting for a slot is not lag
    assert capped["client_behind"] is False
    late = lag_columns(lags=[0.0] * 90 + [CLIENT_BEHIND_P99_S * 3] * 10, slot_waits=[None] * 100)
    assert late["client_behind"] is True
    assert lag_columns(lags=[None, None], slot_waits=[None, None]) == {}


def run(workload: str, engine, concurrency: int = 1, **params):
    cls = workload_class(workload)
    parsed = cls.parse_params(params)
    assert parsed.validate() == []
    return asyncio.run(cls().run(TrialContext(engine=engine, concurrency=concurrency, repeat=0, params=parsed)))


def test_open_loop_decode_sends_on_schedule_while_earlier_requests_run():
    engine = SlowEngine(service_s=0.2)
    results = run("decode", engine, arrival="poisson", request_rate=200, num_requests=20, input_len=8,
                  output_len=2)
    assert len(results) == 20
    assert engine.peak > 5  # a closed loop at concurrency 1 would never overlap
    assert all(r.send_lag_s is not None and r.send_lag_s < 0.2 for r in results)
    # The schedule is the seeded one: sends in order, TTFT counted from the scheduled send.
    starts = [r.timeline.sent_at for r in results]
    assert starts == sorted(starts)
    assert all(r.timeline.chunk_times[0] - r.timeline.sent_at >= 0.2 for r in results)


def test_max_concurrency_caps_requests_in_flight_and_records_slot_waits():
    engine = SlowEngine(service_s=0.05)
    results = run("decode", engine, arrival="poisson", request_rate=math.inf, num_requests=6, max_concurrency=2,
                  input_len=8, output_len=2)
    assert engine.peak == 2
    waits = sorted(r.slot_wait_s for r in results)
    assert waits[0] < 0.02 and waits[-1] >= 0.09  # the last pair waited for two services
    assert lag_columns(lags=[r.send_lag_s for r in results], slot_waits=[r.slot_wait_s for r in results])[
        "send_lag_p99_s"] < waits[-1]


def test_open_loop_multi_turn_starts_sessions_on_the_clock_and_keeps_turns_closed():
    engine = SlowEngine(service_s=0.01)
    results = run("multi_turn", engine, arrival="gamma", request_rate=100, burstiness=0.5, num_sessions=4,
                  context_len=16, turns=3, turn_tokens=4, output_len=2)
    assert len(results) == 12
    for s in range(4):
        mine = sorted((r for r in results if r.session == s), key=lambda r: r.turn)
        assert mine[0].send_lag_s is not None and all(r.send_lag_s is None for r in mine[1:])
        # Each turn leaves after the previous one's last token.
        assert all(b.timeline.sent_at >= a.timeline.chunk_times[-1] for a, b in zip(mine, mine[1:]))


def test_open_loop_points_record_their_cap_not_the_grid_concurrency():
    decode = workload_class("decode")
    assert point_levels(decode.parse_params({"arrival": "poisson", "request_rate": 2}), [1, 4]) == [0]
    assert point_levels(decode.parse_params({"arrival": "poisson", "request_rate": 2, "max_concurrency": 8}),
                        [1, 4]) == [8]
    assert point_levels(decode.parse_params({}), [1, 4]) == [1, 4]


def test_open_loop_warms_up_with_a_few_arrivals_at_once():
    params = workload_class("decode").parse_params({"arrival": "poisson", "request_rate": 0.5, "num_requests": 64})
    warm = params.warmup_variant()
    assert math.isinf(warm.rate()) and warm.num_requests == 8
    closed = workload_class("decode").parse_params({})
    assert closed.warmup_variant() is closed and closed.arrival_columns() == {"arrival": "closed"}
    assert params.arrival_columns() == {"arrival": "poisson", "offered_rate_req_s": 0.5}


@pytest.mark.parametrize("params,message", [
    ({"arrival": "poisson", "request_rate": 0}, "request_rate=0 must be > 0"),
    ({"arrival": "poisson", "request_rate": -2}, "request_rate=-2 must be > 0"),
    ({"arrival": "poisson"}, "needs a rate"),
    ({"arrival": "poisson", "request_rate": "fast"}, "not a number or inf"),
    ({"arrival": "poisson", "request_rate": 1, "burstiness": 0.5}, "use arrival=gamma"),
    ({"arrival": "gamma", "request_rate": 1, "burstiness": 0}, "burstiness=0 must be a number > 0"),
    ({"arrival": "closed", "request_rate": 3}, "needs an open-loop arrival"),
    ({"arrival": "uniform"}, "arrival='uniform' is unknown"),
    ({"arrival": "poisson", "request_rate": 1, "max_concurrency": 0}, "max_concurrency=0 must be ≥ 1"),
])
def test_bad_arrival_params_are_refused(params, message):
    errors = workload_class("decode").parse_params(params).validate()
    assert any(message in e for e in errors), errors


def test_inf_rate_is_accepted_as_text_or_number():
    for value in ("inf", math.inf, float("inf")):
        params = workload_class("decode").parse_params({"arrival": "poisson", "request_rate": value})
        assert params.validate() == [] and math.isinf(params.rate())
    assert Arrival("gamma") is Arrival.GAMMA


def test_schedules_never_touch_the_global_generator():
    random.seed(11)
    expected = random.random()
    random.seed(11)
    send_offsets(count=100, rate=2.0, seed=0)
    assert random.random() == expected
