"""A rate probe stops once decided (runner.numerics.rate_probe: the pure rule; the open-loop driver that
applies it, on a stand-in engine with a queue)."""
from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from runner.measurement.latency import Timeline
from runner.numerics.rate_probe import ProbeDecision, StopRule, misses_allowed, order_bounds
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import RequestResult, TrialContext
from runner.measurement.workloads.open_loop import probe_monitor
from runner.slo import Metric, Slo, Target

RULE = StopRule(target_s=0.5, percentile=99, planned=300, min_requests=50)


def test_the_interval_is_distribution_free_order_statistics():
    assert order_bounds(50, 0.99) == (48, 51)  # 50 requests: no upper bound on a p99
    assert order_bounds(300, 0.99)[1] == 300  # 300: the slowest one bounds it (95 % one-sided)
    lo, hi = order_bounds(1000, 0.5)
    assert lo < 500 < hi and hi - lo < 60


@pytest.mark.parametrize("planned, q", [(50, 0.99), (300, 0.99), (200, 0.9), (7, 0.5)])
def test_misses_allowed_is_the_edge_of_what_the_percentile_can_absorb(planned, q):
    allowed = misses_allowed(planned, q)
    # One more miss than allowed: the percentile is a miss whatever the others are (linear interpolation).
    worst_case = np.array([0.0] * (planned - allowed - 1) + [1.0] * (allowed + 1))
    assert np.percentile(worst_case, q * 100) > 0.5
    # As many as allowed: the percentile can still be within the target.
    best_case = np.array([0.0] * (planned - allowed) + [0.5001] * allowed)
    assert np.percentile(best_case, q * 100) <= 0.5


def test_met_needs_enough_answered_requests_all_within_the_bound():
    assert RULE.judge([0.1] * 250).decision is ProbeDecision.UNDECIDED  # too few to bound a p99
    met = RULE.judge([0.1] * 300)
    assert met.decision is ProbeDecision.MET and met.hi_s == pytest.approx(0.1)
    # A request still waiting counts as unbounded: not met until it answers.
    assert RULE.judge([0.1] * 299, [0.05]).decision is ProbeDecision.UNDECIDED
    assert StopRule(target_s=0.5, percentile=99, planned=300, can_meet=False).judge([0.1] * 300).decision \
        is ProbeDecision.UNDECIDED


def test_a_growing_queue_decides_a_miss_before_its_requests_answer():
    # Four requests already waiting past the target: p99 over 300 planned cannot be met.
    verdict = RULE.judge([0.1] * 20, [0.6, 0.7, 0.8, 0.9])
    assert verdict.decision is ProbeDecision.MISSED and "4 of 300" in verdict.reason
    # Three of 53 is clearly above a p99 (its interval's lower end); three of 203 is not; nor are the first few
    # requests alone (fewer than min_requests), however slow.
    assert RULE.judge([0.1] * 50, [0.6, 0.7, 0.8]).decision is ProbeDecision.MISSED
    assert RULE.judge([0.1] * 200, [0.6, 0.7, 0.8]).decision is ProbeDecision.UNDECIDED
    assert RULE.judge([0.06, 0.07], [0.6]).decision is ProbeDecision.UNDECIDED
    # The lower end of the interval above the target decides it too.
    assert StopRule(target_s=0.5, percentile=50, planned=10_000).judge([0.9] * 40).decision is ProbeDecision.MISSED


class QueueEngine:
    """One request at a time, each `service_s`: offered faster than that, the queue (and TTFT) grows."""

    max_model_len = 4096
    vocab_size = 1000
    first_token_id = 0

    def __init__(self, service_s: float):
        self.service_s = service_s
        self.lock = asyncio.Lock()
        self.sent = 0

    async def stream(self, *, prompt_token_ids, max_tokens, session=0, turn=0, phase="measured", ignore_eos=True,
                     seed=0, scheduled_at=None, on_first_token=None):
        self.sent += 1
        sent = time.perf_counter()
        t = Timeline(sent_at=sent if scheduled_at is None else scheduled_at)
        async with self.lock:
            await asyncio.sleep(self.service_s)
            if on_first_token is not None:
                on_first_token(time.perf_counter())
            t.add_chunk(at=time.perf_counter(), tokens=max_tokens)
        return RequestResult(timeline=t, prompt_tokens=len(prompt_token_ids), output_token_ids=[1] * max_tokens,
                             session=session, turn=turn, phase=phase, send_lag_s=sent - t.sent_at)


def _probe(engine, *, target_ms: float, stop: bool = True, **params):
    cls = workload_class("decode")
    parsed = cls.parse_params({"arrival": "poisson", "input_len": 8, "output_len": 2, "stop_when_decided": stop,
                               **params})
    assert parsed.validate() == []
    probe = probe_monitor(parsed, slo=Slo(targets=(Target(metric=Metric.TTFT, ms=target_ms),)))
    results = asyncio.run(cls().run(TrialContext(engine=engine, concurrency=0, repeat=0, params=parsed, probe=probe)))
    return results, probe.columns()


def test_an_overloaded_probe_stops_sending_once_its_queue_decides_the_miss():
    engine = QueueEngine(service_s=0.02)  # 50 req/s served, 200 offered
    started = time.perf_counter()
    results, columns = _probe(engine, target_ms=50, request_rate=200, num_requests=400)
    assert columns["probe_verdict"] == "missed"
    assert len(results) == engine.sent < 100  # 400 planned: 2 s of sends; stopped well before
    assert time.perf_counter() - started < 1.5
    assert columns["probe_planned_requests"] == 400 and columns["probe_stop"].startswith("stopped after")
    assert columns["probe_ttft_lo_s"] > 0.05


def test_a_clearly_met_probe_stops_after_enough_requests():
    engine = QueueEngine(service_s=0.0005)
    results, columns = _probe(engine, target_ms=500, request_rate=300, num_requests=1000)
    assert columns["probe_verdict"] == "met"
    assert 299 <= len(results) < 1000
    assert columns["probe_ttft_hi_s"] < 0.5


def test_without_the_stop_a_probe_sends_everything_and_is_still_judged():
    engine = QueueEngine(service_s=0.0005)
    results, columns = _probe(engine, target_ms=500, stop=False, request_rate=300, num_requests=100)
    assert len(results) == 100
    assert columns["probe_verdict"] == "undecided" and columns["probe_ttft_hi_s"] is None  # 100: p99 unbounded
    assert columns["probe_stop"] is None


def test_the_stop_needs_an_open_loop_and_stops_nothing_at_inf():
    closed = workload_class("decode").parse_params({"stop_when_decided": True})
    assert any("stop_when_decided" in e for e in closed.validate())
    at_once = workload_class("decode").parse_params({"arrival": "poisson", "request_rate": math.inf,
                                                    "stop_when_decided": True})
    assert at_once.validate() == []
    probe = probe_monitor(at_once, slo=Slo(targets=(Target(metric=Metric.TTFT, ms=50),)))
    assert probe is not None and not probe.stop  # judged, never stopped
    bad = workload_class("decode").parse_params({"arrival": "poisson", "request_rate": 5, "stop_when_decided": "yes"})
    assert any("stop_when_decided='yes'" in e for e in bad.validate())
