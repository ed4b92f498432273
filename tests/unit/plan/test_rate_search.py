"""The highest sustainable rate (sweep.adaptive=rate_search): each stage planned from hand-made rows of the ones
before, on the rate-search study's CPU preset (no engine), and the bracket numerics under it."""
from __future__ import annotations

import math

import pytest

from runner.config.checks import ConfigError
from runner.config.store import load_config
from runner.numerics.rate_bracket import (BracketState, RatePoint, bracket, line_params, rates_between,
                                             round_rate, saturation_ladder)
from runner.numerics.rate_probe import order_bounds
from runner.plan.rate_search import line_points, next_rates
from runner.plan.stages import adaptive_study
from runner.slo import Metric, Slo, Target

# Per arm: the throughput saturation measures, and the rate where TTFT p99 reaches the preset's 50 ms target.
CAPACITY = {"off": 300.0, "mtp": 240.0}
LIMIT_MS = 50.0
KNEE = 0.5  # the share of the capacity past which TTFT rises: the crossing at 97 % of it
GPU = ["sweep.preset=null", "slo.ttft=500"]  # the file's own size, a target from the command line


def _config(*overrides):
    return load_config(["tracking=none", "sweep=rate_search", "sweep.preset=cpu", *overrides])


def _ttft_s(load: float, repeat: int, knee: float = KNEE) -> float:
    """A queue's TTFT: flat at 5 ms, rising past `knee` of the capacity; repeats 2 % apart."""
    return (0.005 + 0.2 * max(0.0, load - knee) ** 2) * (1.0, 1.02, 0.98)[repeat]


def _crossing(arm: str, knee: float = KNEE) -> float:
    return CAPACITY[arm] * (knee + math.sqrt((LIMIT_MS / 1000 - 0.005) / 0.2))


def _verdict(ttft_s: float) -> str:
    """A probe's verdict as its stop rule would give it: decided unless within 25 % of the target."""
    return "met" if ttft_s < 0.8 * LIMIT_MS / 1000 else "missed" if ttft_s > 1.25 * LIMIT_MS / 1000 else "undecided"


def _rows(stage, *, failed_rates=(), knee: float = KNEE) -> list[dict]:
    engines = {e.engine_id: e.settings for e in stage.plan.engines}
    rows = []
    for t in stage.plan.trials:
        capacity = CAPACITY[engines[t.engine_id].spec_method]
        rate = float(t.params.request_rate)
        ttft = _ttft_s(min(rate / capacity, 1.5), t.repeat, knee)
        rows.append({"trial_id": t.trial_id, "engine_id": t.engine_id, "workload": t.workload,
                     "workload_params_json": t.params_json, "repeat": t.repeat,
                     "status": "failed" if rate in failed_rates else "ok",
                     "ttft_p99_s": ttft, "probe_verdict": _verdict(ttft),
                     "request_throughput_req_s": min(rate, capacity) * (1.0, 0.99, 1.01)[t.repeat]})
    return rows


def _rates(stage) -> dict[str, set[float]]:
    engines = {e.engine_id: e.settings.spec_method for e in stage.plan.engines}
    rates: dict[str, set[float]] = {}
    for t in stage.plan.trials:
        rates.setdefault(engines[t.engine_id], set()).add(float(t.params.request_rate))
    return rates


def _run(config, study, *, failed_rates=(), knee: float = KNEE) -> tuple[list, list[dict]]:
    stages, rows = [], []
    while (stage := study.stage(len(stages), config=config, rows=rows)) is not None:
        stages.append(stage)
        rows += _rows(stage, failed_rates=failed_rates, knee=knee)
    return stages, rows


def _brackets(config, rows):
    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=LIMIT_MS),))
    return {key[0]: bracket(points, slo, precision=config.sweep.rate_search.precision)
            for key, points in line_points(rows, slo).items()}


def test_saturation_first_then_each_arm_narrowed_to_its_own_crossing():
    config = _config()
    study = adaptive_study("rate_search")
    stages, rows = _run(config, study)
    assert stages[0].name == "saturation"
    assert _rates(stages[0]) == {"off": {math.inf}, "mtp": {math.inf}}
    assert len(stages[0].plan.trials) == 2  # two arms, once: saturation's verdict (missed) is decided
    # Below saturation: the ladder under each arm's throughput, both rungs at once (the preset's rates_per_stage).
    assert _rates(stages[1]) == {"off": {286.0, 260.0}, "mtp": {229.0, 209.0}}
    assert {t.repeat for t in stages[1].plan.trials} == {0}
    # The top rung meets (undecided, so its repeats follow): no further rate is needed.
    assert all("new" not in s.why for s in stages[2:])
    assert 3 <= len(stages) <= 2 + config.sweep.repeats
    ids = [t.trial_id for s in stages for t in s.plan.trials]
    assert len(ids) == len(set(ids))  # no trial measured twice
    # Repeats only of undecided probes at a bracket's ends, never of decided ones.
    repeated = [r for r in rows if r["repeat"] > 0]
    assert len(repeated) < len(rows) / 2
    decided = {(r["engine_id"], r["workload_params_json"]) for r in rows if r["repeat"] == 0
               and r["probe_verdict"] != "undecided"}
    assert not [r for r in repeated if (r["engine_id"], r["workload_params_json"]) in decided]
    _assert_narrowed(config, stages, rows)


def _assert_narrowed(config, stages, rows, knee: float = KNEE):
    engines = {e.engine_id: e.settings.spec_method for s in stages for e in s.plan.engines}
    for engine_id, b in _brackets(config, rows).items():
        arm = engines[engine_id]
        assert b.state in (BracketState.PRECISE, BracketState.NOISE)
        assert b.low.x <= _crossing(arm, knee) <= b.high.x, (arm, b.text())
        assert b.high.x - b.low.x <= 0.1 * b.low.x


def test_a_knee_far_below_saturation_goes_wide_once_the_ladder_misses():
    config = _config()
    stages, rows = _run(config, adaptive_study("rate_search"), knee=0.1)  # the crossing at 57 % of the capacity
    assert _rates(stages[1]) == {"off": {286.0, 260.0}, "mtp": {229.0, 209.0}}
    # Both rungs missed: a tenth of the throughput and two rates between it and the lower rung.
    assert _rates(stages[2]) == {"off": {30.0, 61.6, 127.0}, "mtp": {24.0, 49.4, 102.0}}
    assert len(stages) <= config.sweep.rate_search.max_stages + config.sweep.repeats
    _assert_narrowed(config, stages, rows, knee=0.1)


def test_shared_rates_measure_every_arm_at_each_rate_any_arm_asks_for():
    config = _config("sweep.rate_search.shared_rates=true")
    study = adaptive_study("rate_search")
    stages, rows = _run(config, study)
    both = {286.0, 260.0, 229.0, 209.0}
    assert _rates(stages[1]) == {"off": both, "mtp": both}
    for stage in stages[2:]:
        if "repeated" in stage.why:  # an arm's own undecided ends
            continue
        rates = _rates(stage)
        assert rates["off"] == rates["mtp"]
    for engine_id, b in _brackets(config, rows).items():
        assert b.state in (BracketState.PRECISE, BracketState.NOISE)


def test_a_stage_is_planned_the_same_from_the_same_rows():
    config = _config()
    study = adaptive_study("rate_search")
    stages, rows = _run(config, study)
    earlier = _rows(stages[0]) + _rows(stages[1])
    again = study.stage(2, config=config, rows=earlier)
    assert [t.trial_id for t in again.plan.trials] == [t.trial_id for t in stages[2].plan.trials]


def _saturated():
    """(config, study, the saturation stage's rows) of the CPU preset."""
    config, study = _config(), adaptive_study("rate_search")
    return config, study, _rows(study.stage(0, config=config, rows=[]))


def test_saturation_within_the_target_ends_the_study():
    config, study, rows = _saturated()
    assert study.stage(1, config=config, rows=[dict(r, ttft_p99_s=0.010, probe_verdict="met") for r in rows]) is None
    # Undecided there, saturation takes its next repeat (and only that).
    again = study.stage(1, config=config, rows=[dict(r, ttft_p99_s=0.010, probe_verdict="undecided") for r in rows])
    assert {t.repeat for t in again.plan.trials} == {1} and "repeated" in again.why
    assert {t.params_json for t in again.plan.trials} == {r["workload_params_json"] for r in rows}  # the same point


def test_a_low_rate_that_misses_ends_that_arm():
    config, study, rows = _saturated()
    for index in (1, 2):  # the ladder, then the low rate and rates between: every one queues
        rows += [dict(r, ttft_p99_s=1.0, probe_verdict="missed")
                 for r in _rows(study.stage(index, config=config, rows=rows))]
    low = {r["workload_params_json"] for r in rows if '"request_rate": 30.0' in r["workload_params_json"]}
    assert low  # off's low rate ran (a tenth of its 300 req/s)
    assert study.stage(3, config=config, rows=rows) is None


def test_rates_whose_trials_failed_are_not_proposed_again():
    config = _config()
    study = adaptive_study("rate_search")
    stages, rows = _run(config, study, failed_rates={286.0, 260.0, 229.0, 209.0})
    ids = [t.trial_id for s in stages for t in s.plan.trials]
    assert len(ids) == len(set(ids)) and len(stages) <= config.sweep.rate_search.max_stages


def test_given_rates_run_with_saturation_as_written():
    config = _config(*GPU, "workload.decode.request_rate=[20,inf]")
    study = adaptive_study("rate_search")
    first = study.stage(0, config=config, rows=[])
    assert {t.params.request_rate for t in first.plan.trials} == {20, math.inf}  # Hydra reads inf as a float
    assert study.plannable(config).workload["decode"]["request_rate"] == [20, math.inf]
    assert study.plannable(_config(*GPU)).workload["decode"]["request_rate"] == ["inf"]  # the file's bare inf


def test_max_stages_bounds_the_search():
    config = _config("sweep.preset=null", f"slo.ttft={LIMIT_MS}", "sweep.rate_search.max_stages=2")
    stages, _ = _run(config, adaptive_study("rate_search"))
    assert [s.name for s in stages[:2]] == ["saturation", "rates-1"]
    assert all("new" not in s.why and "repeated" in s.why for s in stages[2:])  # no new rate after max_stages
    assert len(stages) <= 2 + config.sweep.repeats


@pytest.mark.parametrize("overrides, words", [
    (["sweep.adaptive=bogus"], "rate_search"),
    (["sweep.preset=null"], "fix: slo.ttft=500"),
    ([*GPU, "workload.decode.arrival=closed"], "fix: workload.decode.arrival=poisson"),
    ([*GPU, "workload.decode.request_rate=[0,inf]"], "fix: workload.decode.request_rate=inf"),
    ([*GPU, "workload.decode.request_rate=fast"], "fix: workload.decode.request_rate=inf"),
    ([*GPU, "sweep.race=true"], "fix: sweep.race=false"),
])
def test_a_search_it_cannot_run_is_refused_naming_the_fix(overrides, words):
    config = _config(*overrides)
    with pytest.raises(ConfigError) as info:
        adaptive_study(config.sweep.adaptive).plannable(config)
    assert words in str(info.value)


@pytest.mark.parametrize("override, fix", [
    ("sweep.rate_search.precision=0", "sweep.rate_search.precision=0.1"),
    ("sweep.rate_search.max_stages=1", "sweep.rate_search.max_stages=6"),
    ("sweep.rate_search.rates_per_stage=0", "sweep.rate_search.rates_per_stage=1"),
    ("sweep.rate_search.low_fraction=1.5", "sweep.rate_search.low_fraction=0.1"),
])
def test_bad_search_settings_are_refused_naming_the_override(override, fix):
    with pytest.raises(ConfigError, match=f"fix: {fix}"):
        _config("sweep.preset=null", override)  # the CPU preset sets rates_per_stage over the command line


def _point(rate, *ms, x=None):
    return RatePoint(offered=rate, x=rate if x is None else x, samples={SLO.targets[0].name: tuple(ms)})


SLO = Slo(targets=(Target(metric=Metric.TTFT, ms=50.0),))


def test_the_bracket_is_the_last_rate_within_the_target_and_the_first_past_it():
    points = [_point(math.inf, 400, x=300), _point(100, 20), _point(30, 10), _point(200, 80)]
    b = bracket(points, SLO, precision=0.1)
    assert (b.state, b.low.offered, b.high.offered, b.saturation_x) == (BracketState.OPEN, 100, 200, 300)
    assert bracket(points, SLO, precision=1.0).state == BracketState.PRECISE
    assert bracket([_point(math.inf, 40, x=300), _point(30, 10)], SLO, precision=0.1).state == \
        BracketState.SATURATION_MEETS
    lowest = bracket([_point(math.inf, 400, x=300), _point(30, 60)], SLO, precision=0.1)
    assert lowest.state == BracketState.LOWEST_MISSES and lowest.high.offered == 30
    assert bracket([], SLO, precision=0.1).state == BracketState.NO_POINTS


def test_a_bracket_the_repeats_cannot_resolve_is_within_the_noise():
    # Each end's repeats straddle the target: resampled, the crossing lands anywhere in [100, 200] and beyond.
    noisy = [_point(50, 10, 11, 12), _point(100, 35, 48, 65), _point(200, 41, 55, 70), _point(400, 90, 95, 99)]
    b = bracket(noisy, SLO, precision=0.1)
    assert b.state == BracketState.NOISE and b.interval[1] - b.interval[0] >= 100
    clear = [_point(100, 30, 31, 32), _point(200, 70, 71, 72)]
    assert bracket(clear, SLO, precision=0.1).state == BracketState.OPEN
    # A missing end far past the target, however its repeats spread (saturation's queue), leaves it open.
    queued = [_point(100, 30, 31, 32), _point(math.inf, 800, 1000, 4000, x=180)]
    assert bracket(queued, SLO, precision=0.1).state == BracketState.OPEN


def test_rates_between_are_geometric_and_rounded():
    assert rates_between(30, 300, count=2) == [64.6, 139.0]
    assert rates_between(100, 200, count=1) == [141.0]
    assert rates_between(100, 100.01, count=1) == []  # rounding leaves nothing strictly between
    assert rates_between(30, math.inf, count=1) == []
    assert round_rate(1234.5) == 1230.0


def test_a_line_is_the_params_without_the_rate():
    assert line_params('{"request_rate": 3, "input_len": 8}') == '{"input_len": 8}'


def test_a_miss_below_a_rate_that_meets_is_repeated():
    from runner.plan.rate_search import repeats_wanted

    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=LIMIT_MS),))
    spike = RatePoint(offered=7.0, x=7.0, samples={slo.targets[0].name: (3000.0,)}, verdicts=("missed",))
    fine = RatePoint(offered=16.0, x=16.0, samples={slo.targets[0].name: (20.0,)}, verdicts=("undecided",))
    sat = RatePoint(offered=math.inf, x=40.0, samples={slo.targets[0].name: (900.0,)}, verdicts=("missed",))
    points = [spike, fine, sat]
    b = bracket(points, slo, precision=0.1)
    assert b.state == BracketState.LOWEST_MISSES
    assert repeats_wanted(b, repeats=3, points=points, slo=slo) == [spike]
    assert repeats_wanted(b, repeats=1, points=points, slo=slo) == []


def _next(points, count=1):
    return next_rates(bracket(points, SLO, precision=0.1), precision=0.1, low_fraction=0.1, count=count)


def test_below_saturation_the_ladder_first_then_its_next_rung_then_wide():
    sat = _point(math.inf, 900, x=300)
    assert _next([sat]) == [286.0] and _next([sat], count=2) == [286.0, 260.0]
    assert _next([sat, _point(286, 80)]) == [260.0]  # the top rung missed: the next one
    # Both rungs missed: a tenth of the throughput and a rate between it and the lowest miss.
    assert _next([sat, _point(286, 80), _point(260, 70)]) == [30.0, 88.3]
    assert _next([sat, _point(286, 80), _point(260, 70), _point(30, 60)]) == []  # even the low rate misses
    # A given rate meeting below saturation: the rungs above it before rates between.
    assert _next([sat, _point(100, 20)]) == [286.0]
    assert _next([sat, _point(100, 20), _point(286, 80)]) == [260.0]
    assert _next([sat, _point(100, 20), _point(286, 80), _point(260, 60)]) == [161.0]  # bisection, as before
    assert _next([sat, _point(286, 20)]) == []  # [286, 300] is within precision


# The documented search (the sweep file's own size, slo.ttft=500) at the H200's saturation throughputs.
H200 = {"off": 23.4, "mtp": 27.1}


def _gpu_rows(stage, *, crossing: float) -> list[dict]:
    """Decided probes: TTFT p99 flat at 300 ms up to `crossing` of each arm's saturation throughput, past it the
    queue's; saturation misses (every request at once)."""
    engines = {e.engine_id: e.settings.spec_method for e in stage.plan.engines}
    rows = []
    for t in stage.plan.trials:
        sat = H200[engines[t.engine_id]]
        rate = float(t.params.request_rate)
        met = rate <= crossing * sat
        rows.append({"trial_id": t.trial_id, "engine_id": t.engine_id, "workload": t.workload,
                     "workload_params_json": t.params_json, "repeat": t.repeat, "status": "ok",
                     "ttft_p99_s": 0.3 if met else 9.0, "probe_verdict": "met" if met else "missed",
                     "request_throughput_req_s": min(rate, sat)})
    return rows


@pytest.mark.parametrize("crossing, stages_below, within", [(0.97, 1, 0.93), (0.92, 2, 0.85)])
def test_the_documented_search_brackets_from_saturation_in_few_stages(crossing, stages_below, within):
    config = _config(*GPU)
    assert (config.sweep.repeats, config.sweep.rate_search.precision) == (3, 0.1)
    study = adaptive_study("rate_search")
    stages, rows = [], []
    while (stage := study.stage(len(stages), config=config, rows=rows)) is not None:
        stages.append(stage)
        rows += _gpu_rows(stage, crossing=crossing)
    assert len(stages) == 1 + stages_below
    assert all(len({e.engine_id for e in s.plan.engines}) == 2 for s in stages)  # both arms in every stage
    assert len(rows) == 2 * (1 + stages_below)  # each probe once: every one decided
    # Never fewer requests than a p99 needs: each probe below saturation plans at least the 299 a "met" needs.
    need = next(n for n in range(1, 1000) if order_bounds(n, 0.99)[1] <= n)
    assert need == 299
    probes = [t for s in stages[1:] for t in s.plan.trials]
    assert probes and all(t.params.arrivals() >= need for t in probes)
    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=500.0),))
    engines = {e.engine_id: e.settings.spec_method for s in stages for e in s.plan.engines}
    for key, points in line_points(rows, slo).items():
        b = bracket(points, slo, precision=0.1)
        sat = H200[engines[key[0]]]
        assert b.state == BracketState.PRECISE and within * sat <= b.low.x <= crossing * sat <= b.high.x <= sat
