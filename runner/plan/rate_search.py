"""The highest rate each arm sustains within the config's `slo` (`sweep.adaptive=rate_search`). Pure.

1. saturation: every arm at `request_rate=inf` (everything at once), and any rates the workload gives: the
   request throughput measured there bounds every sustainable rate.
2. the first bracket from saturation: per arm and workload point (a line), the saturation ladder's rates just
   under that throughput (runner.numerics.rate_bracket.saturation_ladder: halfway into the precision band, then
   the lowest rate within `precision` of the rung above), `rates_per_stage` a stage. On an engine whose queue forms
   only near its capacity the top rung meets the target and the bracket [it, saturation] is within `precision`:
   one stage below saturation. Only when every rung misses does the line go wide: a low rate (`low_fraction` of
   the saturation throughput, where requests rarely queue) and `rates_per_stage` rates between it and the lowest
   miss.
3. then, per line, the ladder's rungs inside its bracket [last rate meeting the SLO, first missing it] where
   saturation bounds it, else `rates_per_stage` rates inside it, until the bracket is within `precision` of its
   lower end or within the noise of the repeats (the crossing's bootstrap interval as wide as the bracket:
   runner.numerics.rate_bracket), or `max_stages` ran.
Every line's rates of a stage run in that one stage (all arms at once). Each probe runs once first: a probe below
saturation stops sending once it is decided (its TTFT percentile's interval clear of the target, or the queue past
saving it: runner.numerics.rate_probe), and its verdict and interval go in its row. Only the undecided probes that
bound a line's answer (its bracket's ends, once the line asks for no new rate) take further repeats, up to
`sweep.repeats`, one a stage (spread over the sweep): a rate below a decided one, or above a missed one, is settled
by it. A rate decided "missed" below one that meets contradicts it (noise on one of them) and is repeated too.
Each line gets only its own rates (an arm's bracket says nothing of another's), or with `shared_rates` every arm
of a workload point gets the rates any of them asks for (comparable at every rate); rates are rounded to three
significant digits, so a rate names one trial id however a stage reached it. The report's "Against offered
rate" section reads the run as for any rate grid.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Optional, Sequence

from runner.config.checks import ConfigError
from runner.config.sections import RunConfig
from runner.measurement.arrivals import Arrival, parse_rate
from runner.numerics.rate_bracket import (Bracket, BracketState, RatePoint, bracket, line_params, rates_between,
                                             round_rate, saturation_ladder)
from runner.plan.grid import Plan, build_plan
from runner.plan.stages import Stage, select
from runner.schema import TrialStatus
from runner.slo import Slo

FIX_SLO = "slo.ttft=500"
SATURATION = "inf"
OPEN_ARRIVALS = (Arrival.POISSON, Arrival.GAMMA)

Line = tuple[str, str, str]  # (engine_id, workload, params without the rate)


def _report(config: RunConfig):
    """The report's settings: its SLO is the search's target, its seed the crossing interval's."""
    if not config.report.slo:
        raise ConfigError(f"sweep.adaptive=rate_search searches the highest rate within a latency target; "
                          f"slo sets none (fix: {FIX_SLO})")
    return config.report


def _values(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _given_rates(name: str, params: dict) -> list:
    """The workload's own rates as written (their trial ids stay those of a plain sweep), checked."""
    arrivals = _values(params.get("arrival", Arrival.CLOSED))
    for arrival in arrivals:
        if arrival not in OPEN_ARRIVALS:
            raise ConfigError(f"sweep.adaptive=rate_search offers requests at a rate; workload {name} has "
                              f"arrival={arrival!r} (fix: workload.{name}.arrival=poisson)")
    given = _values(params.get("request_rate"))
    for rate in given:
        try:
            value = parse_rate(rate)
        except ValueError as exc:
            raise ConfigError(f"workload.{name}: {exc} (fix: workload.{name}.request_rate=inf)") from None
        if not value > 0:
            raise ConfigError(f"workload.{name}.request_rate={rate!r} must be > 0 req/s or inf "
                              f"(fix: workload.{name}.request_rate=inf)")
    return given


def _with_rates(config: RunConfig, extra: dict[str, set[float]]) -> RunConfig:
    """The config whose workloads offer their given rates, saturation and `extra[workload]` (as an axis); the
    searched rates' probes capped at sweep.rate_search.probe_s (a line's points differ in their rate alone)."""
    workloads = {}
    probe_s = config.sweep.rate_search.probe_s
    for name, params in config.workload.items():
        given = _given_rates(name, params)
        known = {parse_rate(r) for r in given}
        rates = given + ([] if math.inf in known else [SATURATION])
        rates += sorted(r for r in extra.get(name, ()) if r not in known)
        capped = {"max_duration_s": probe_s} if extra.get(name) and probe_s and "max_duration_s" not in params else {}
        if extra.get(name) and _stops_when_decided(name) and "stop_when_decided" not in params:
            capped["stop_when_decided"] = True
        workloads[name] = {**params, "request_rate": rates, **capped}
    return replace(config, workload=workloads)


def _stops_when_decided(name: str) -> bool:
    """Whether the workload's open-loop driver hands its probe the stop rule (decode does)."""
    from runner.measurement.workloads import workload_class

    return bool(getattr(workload_class(name), "probe_stops", False))


def probe_line(config: RunConfig) -> str:
    """The plan's line on how long a probe below saturation sends (dry run, run start)."""
    probe_s = config.sweep.rate_search.probe_s
    if not probe_s:
        return "rate probes: each sends its workload's full num_requests (sweep.rate_search.probe_s=null)"
    from runner.measurement.workloads.open_loop import CAPPED_MIN_ARRIVALS

    return (f"rate probes below saturation: at most {probe_s:g} s of arrivals each, i.e. min(num_requests, "
            f"max({CAPPED_MIN_ARRIVALS}, rate × {probe_s:g} s)) requests (at least {CAPPED_MIN_ARRIVALS} per repeat: "
            f"the p99 lies between a repeat's two slowest; sweep.rate_search.probe_s sets the cap, null sends "
            f"num_requests); each stops sending once decided (its TTFT percentile's interval clear of the target, "
            f"or its queue past saving it) and runs once, repeated only where undecided at a bracket's end")


def _row_rate(row: dict) -> float:
    return parse_rate(json.loads(row.get("workload_params_json") or "{}").get("request_rate"))


def _line(row: dict) -> Line:
    return row["engine_id"], row["workload"], line_params(row.get("workload_params_json"))


def line_points(rows: list[dict], slo: Slo) -> dict[Line, list[RatePoint]]:
    """Per line, one point per offered rate from its ok trials (the repeats' figures in ms)."""
    grouped: dict[Line, dict[float, list[dict]]] = {}
    for row in rows:
        if row.get("status") == TrialStatus.OK:
            grouped.setdefault(_line(row), {}).setdefault(_row_rate(row), []).append(row)
    lines = {}
    for key, by_rate in grouped.items():
        points = []
        for rate, repeats in by_rate.items():
            throughputs = sorted(_number(r.get("request_throughput_req_s")) for r in repeats)
            x = throughputs[len(throughputs) // 2] if math.isinf(rate) else rate
            samples = {name: tuple(_number(r.get(slo.column(name))) * 1000.0 for r in repeats) for name in slo.limits}
            verdicts = tuple(r["probe_verdict"] for r in repeats if isinstance(r.get("probe_verdict"), str))
            points.append(RatePoint(offered=rate, x=x, samples=samples, verdicts=verdicts))
        lines[key] = points
    return lines


def _number(value) -> float:
    return math.nan if value is None else float(value)


def next_rates(b: Bracket, *, precision: float, low_fraction: float, count: int) -> list[float]:
    """The rates a line measures next (none: its search is done): the saturation ladder's rungs inside what is
    still open below saturation, then (every rung missed) a low rate and rates between, or rates inside the
    bracket."""
    ladder = saturation_ladder(b.saturation_x, precision=precision, count=count)
    if b.state == BracketState.OPEN:
        rungs = [r for r in ladder if b.low.x < r < b.high.x]
        return rungs[:count] or rates_between(b.low.x, b.high.x, count=count)
    if b.state != BracketState.LOWEST_MISSES or math.isnan(b.saturation_x):
        return []
    rungs = [r for r in ladder if r < b.lowest.x]
    if rungs:
        return rungs[:count]
    low = round_rate(low_fraction * b.saturation_x)
    if not 0 < low < b.lowest.x * (1 - precision):
        return []  # a rate at or near the low probe already missed: "below the lowest rate"
    # Before the low rate is known to meet it, rates between it and the lowest miss already narrow the bracket.
    return [low, *rates_between(low, b.lowest.x, count=count)]


def _saturation(trial) -> bool:
    return math.isinf(parse_rate(trial.point.get("request_rate")))


def _merged(a: Plan, b: Plan) -> Plan:
    """Both plans' trials, and the engines they need (a's order, then b's new ones)."""
    engines = list(a.engines) + [e for e in b.engines if e.engine_id not in {x.engine_id for x in a.engines}]
    return replace(a, engines=engines, trials=list(a.trials) + list(b.trials))


def repeats_wanted(b: Bracket, *, repeats: int, points: Sequence[RatePoint] = (), slo: Optional[Slo] = None
                   ) -> list[RatePoint]:
    """The probes worth another repeat (each with fewer than `repeats`): the bracket's ends still undecided, and
    a rate decided "missed" below one that meets (latency does not fall as the rate rises: one of the two is the
    machine's noise, and only more repeats can say which)."""
    contradicted = [p for p in points if p.decided == "missed" and slo is not None
                    and any(q.x > p.x and not q.saturation and q.meets(slo) for q in points)]
    ends = [p for p in (b.low, b.high) if p is not None and p.decided is None] + contradicted
    ends = [p for i, p in enumerate(ends) if all(p is not q for q in ends[:i])]
    return [p for p in ends if p.repeats < repeats]


def _shared(wanted: set[tuple[Line, float]], *, lines, tried: set) -> set[tuple[Line, float]]:
    """Each rate wanted on a workload point, for every arm measured there (not those that ran it already)."""
    rates: dict[tuple[str, str], set[float]] = {}
    for (_, workload, params), rate in wanted:
        rates.setdefault((workload, params), set()).add(rate)
    return {(line, rate) for line in lines for rate in rates.get(line[1:], ()) if (line, rate) not in tried}


class RateSearch:
    def plannable(self, config: RunConfig) -> RunConfig:
        _report(config)
        if config.sweep.race:
            raise ConfigError("sweep.adaptive=rate_search keeps every arm to find its own rate; a race eliminates "
                              "arms (fix: sweep.race=false)")
        if config.sweep.converge:
            raise ConfigError("sweep.adaptive=rate_search sets its own repeats per rate; sweep.converge stops points "
                              "by the arms' verdict (fix: sweep.converge=false)")
        if not config.workload:
            raise ConfigError("the sweep names no workload (fix: workload=[decode])")
        return _with_rates(config, {})

    def notes(self, config: RunConfig) -> list[str]:
        return [probe_line(config)]

    def stage(self, index: int, *, config: RunConfig, rows: list[dict]) -> Optional[Stage]:
        if index == 0:
            return Stage(name="saturation", plan=select(build_plan(self.plannable(config)),
                                                        lambda trial, engine: trial.repeat == 0),
                         why="every arm at request_rate=inf (and the given rates), once: its throughput bounds "
                             "every sustainable rate (repeated only where its verdict is undecided)")
        search = config.sweep.rate_search
        report = _report(config)
        tried = {(_line(r), _row_rate(r)) for r in rows}
        lines = line_points(rows, report.slo)
        wanted: set[tuple[Line, float]] = set()
        again: dict[tuple[Line, float], int] = {}  # (line, rate) → the repeat to run next
        for line, points in lines.items():
            b = bracket(points, report.slo, precision=search.precision, seed=report.seed)
            new = {(line, r) for r in next_rates(b, precision=search.precision, low_fraction=search.low_fraction,
                                                 count=search.rates_per_stage) if (line, r) not in tried}
            if new and index < search.max_stages:
                wanted |= new
            else:  # the line asks for no new rate: its undecided ends take their next repeat
                again.update({(line, p.offered): p.repeats for p in repeats_wanted(
                    b, repeats=config.sweep.repeats, points=points, slo=report.slo)})
        if search.shared_rates:
            wanted = _shared(wanted, lines=lines, tried=tried)
        if not wanted and not again or index >= search.max_stages + config.sweep.repeats:
            return None
        extra: dict[str, set[float]] = {}
        for (_, workload, _), rate in [*wanted, *again]:
            if not math.isinf(rate):
                extra.setdefault(workload, set()).add(rate)

        def keep(trial, engine) -> bool:
            key = ((engine.engine_id, trial.workload, line_params(trial.params_json)),
                   parse_rate(trial.point.get("request_rate")))
            return trial.repeat == 0 if key in wanted else again.get(key) == trial.repeat

        # Saturation's repeats from the config without the probes' keys: the same point (and ids) as its first run.
        plan: Plan = _merged(select(build_plan(_with_rates(config, extra)), lambda t, e: not _saturation(t) and keep(t, e)),
                             select(build_plan(_with_rates(config, {})), lambda t, e: _saturation(t) and keep(t, e)))
        parts = []
        if wanted:
            shown = ", ".join(f"{r:g}" for r in sorted({r for _, r in wanted}))
            parts.append(f"{len(wanted)} new (line, rate) pairs over {len({line for line, _ in wanted})} arm "
                         f"line(s): {shown} req/s")
        if again:
            shown = ", ".join(f"{r:g}" for r in sorted({r for _, r in again}))
            parts.append(f"{len(again)} undecided bracket end(s) repeated: {shown} req/s")
        return Stage(name=f"rates-{index}", plan=plan, why="; ".join(parts))
