"""The rate search's probes below saturation, bounded in time (sweep.rate_search.probe_s): the searched rates'
points carry the cap, saturation and the given rates do not, a line is the same line whatever its cap; an
open-loop schedule cut at max_duration_s keeps enough arrivals for a p99."""
from __future__ import annotations

import math

from runner.config.store import load_config
from runner.numerics.rate_bracket import line_params
from runner.measurement.workloads.decode import DecodeParams
from runner.measurement.workloads.open_loop import CAPPED_MIN_ARRIVALS
from runner.plan.stages import adaptive_study
from runner.scheduling.describe import describe_loads
from runner.config.execution import Residency
from tests.unit.scheduling.plans import rounds_plan


def _stages(*overrides):
    config = load_config(["tracking=none", "sweep=rate_search", "sweep.preset=cpu", *overrides])
    study = adaptive_study("rate_search")
    saturation = study.stage(0, config=config, rows=[])
    rows = [{"trial_id": t.trial_id, "engine_id": t.engine_id, "workload": t.workload,
             "workload_params_json": t.params_json, "repeat": t.repeat, "status": "ok",
             "ttft_p99_s": 1.0, "request_throughput_req_s": 100.0 * (1 + 0.01 * t.repeat)}
            for t in saturation.plan.trials]
    return config, study, saturation, study.stage(1, config=config, rows=rows)


def test_searched_rates_are_capped_and_stay_on_their_line():
    config, study, saturation, below = _stages()
    assert all("max_duration_s" not in t.point for t in saturation.plan.trials)
    assert below.plan.trials and all(t.point["max_duration_s"] == 15.0 for t in below.plan.trials)
    assert {line_params(t.params_json) for t in below.plan.trials} <= \
        {line_params(t.params_json) for t in saturation.plan.trials}
    assert "at most 15 s of arrivals each" in study.notes(config)[0]


def test_probe_s_null_sends_every_request():
    config, study, _, below = _stages("sweep.rate_search.probe_s=null")
    assert all("max_duration_s" not in t.point for t in below.plan.trials)
    assert "full num_requests" in study.notes(config)[0]


def test_a_capped_schedule_keeps_enough_arrivals_for_a_p99():
    def arrivals(rate, cap=15.0, n=500):
        return DecodeParams(arrival="poisson", request_rate=rate, num_requests=n, max_duration_s=cap).arrivals()

    assert arrivals(20.0) == 300  # 15 s at 20 req/s
    assert arrivals(2.0) == CAPPED_MIN_ARRIVALS  # 30 would leave the p99 on the slowest request alone
    assert arrivals(100.0) == 500 and arrivals(math.inf) == 500  # never more than asked; saturation uncapped
    assert arrivals(2.0, n=20) == 20
    assert DecodeParams(arrival="poisson", request_rate=2.0, max_duration_s=0).validate()
    assert DecodeParams(max_duration_s=20.0).validate()  # closed loop: a cap needs arrivals on a clock


def test_loads_line_counts_one_load_per_engine_and_what_an_earlier_stage_loaded():
    plan = rounds_plan(engines=3, trials=1, repeats=3)
    assert describe_loads(plan, resident=Residency.AUTO) == "loads: 3 for 3 engines"
    assert describe_loads(plan, resident=Residency.OFF) == "loads: 9 for 3 engines"
    line = describe_loads(plan, resident=Residency.AUTO, held=frozenset({"e0", "e1"}), adaptive=True)
    assert line.startswith("loads: 1 for 3 engines (2 loaded by an earlier stage, woken instead); later stages")
