"""A rate search's Answer: per workload (and line), each arm's highest rate within the SLO with its interval, the
ratio between the arms with its interval, and what to deploy — "indeterminate" where the intervals overlap. Pure.

An arm's interval is the crossing's bootstrap over its repeats (runner.report.rates.highest_rates), never narrower
than the bracket of measured rates around it: the last rate that meets the SLO and the first that misses it bound
the crossing whatever the repeats say. Every measured rate meeting it, saturation included: "≥" that throughput
(no upper end). Even the lowest rate missing it: "<" that rate. The leader is the arm with the highest estimate; it
is deployed when its interval lies wholly above the runner-up's. The ratio's interval divides the ends of the two
intervals (leader's low end over the runner-up's high end, and the reverse): conservative, as the arms were
measured independently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import pandas as pd

from runner.report.brief import fit

INDETERMINATE = "indeterminate"


@dataclass(frozen=True, kw_only=True)
class ArmRate:
    arm: str
    order: int
    estimate: float  # req/s; NaN where even the lowest measured rate misses the SLO
    lo: float
    hi: float  # inf where every measured rate meets it
    repeats: int

    @property
    def rank(self) -> float:
        return -math.inf if math.isnan(self.estimate) else self.estimate

    def text(self) -> str:
        if math.isnan(self.estimate):
            return f"< {self.hi:.3g} req/s (the lowest rate misses it)"
        if math.isinf(self.hi):
            return f"≥ {self.lo:.3g} req/s (every measured rate meets it)"
        return f"{self.estimate:.3g} req/s [{self.lo:.3g}–{self.hi:.3g}]"


def arm_rates(best: pd.DataFrame, points: pd.DataFrame) -> dict[tuple[str, str], list[ArmRate]]:
    """(workload, line) → its arms' rates, from runner.report.rates.highest_rates and the points it read."""
    out: dict[tuple[str, str], list[ArmRate]] = {}
    for r in best.to_dict("records"):
        mine = points[(points.workload == r["workload"]) & (points.line == r["line"]) & (points.arm == r["arm"])]
        xs = list(mine.x)
        meets = list(mine.meets)
        estimate = float(r["highest rate"])
        if not any(meets) or not meets[0]:
            lo, hi, estimate = 0.0, float(xs[0]), math.nan
        elif all(meets):
            lo, hi = float(xs[-1]), math.inf
        else:
            miss = meets.index(False)
            lo = min(float(r["ci_lo"]), float(xs[miss - 1]))
            hi = max(float(r["ci_hi"]), float(max(xs[miss], xs[miss - 1])))
        out.setdefault((r["workload"], r["line"]), []).append(ArmRate(
            arm=r["arm"], order=int(r["arm_order"]), estimate=estimate, lo=lo, hi=hi, repeats=int(r["repeats"])))
    return out


@dataclass(frozen=True, kw_only=True)
class RateVerdict:
    workload: str
    line: str
    arms: tuple[ArmRate, ...]  # highest estimate first
    deploy: Optional[str]  # None: no arm meets the SLO at any measured rate; INDETERMINATE: the intervals overlap
    ratio: float = math.nan  # leader / runner-up
    ratio_lo: float = math.nan
    ratio_hi: float = math.nan

    @property
    def leader(self) -> ArmRate:
        return self.arms[0]

    def ratio_text(self) -> str:
        if math.isnan(self.ratio):
            return "–"
        hi = "∞" if math.isinf(self.ratio_hi) else f"{self.ratio_hi:.2f}"
        return f"{self.ratio:.2f}× [{self.ratio_lo:.2f}–{hi}×]"

    def sentence(self, slo_text: str, line_text: str = "") -> str:
        where = f" ({line_text})" if line_text and line_text != "all" else ""
        rates = "; ".join(f"{a.arm} {a.text()}" for a in self.arms)
        head = f"**{self.workload}**{where}: highest rate within {slo_text} — {rates}"
        if self.deploy is None:
            return head + ". No arm meets the SLO at any measured rate: deploy none of them at these rates."
        if len(self.arms) == 1:
            return head + f". Only {self.leader.arm} measured: a measurement, not a choice (nothing to deploy)."
        runner = self.arms[1]
        if self.deploy == INDETERMINATE:
            return (head + f". {self.leader.arm} / {runner.arm}: {self.ratio_text()}; the intervals overlap, so "
                    f"**indeterminate**: more repeats or rates between would tell.")
        return head + f". {self.leader.arm} sustains {self.ratio_text()} {runner.arm}'s rate: **deploy {self.deploy}**."


RULE = ("Highest rate within the SLO: interpolated between the last offered rate that meets it and the first that "
        "misses it (saturation at its measured throughput); its interval is the bootstrap over repeats, never "
        "narrower than those two measured rates. Deploy the arm with the highest rate when its interval lies wholly "
        "above the next arm's, else indeterminate; the ratio's interval divides the ends of the two intervals.")


def rate_verdicts(best: pd.DataFrame, points: pd.DataFrame) -> list[RateVerdict]:
    verdicts = []
    for (workload, line), arms in arm_rates(best, points).items():
        arms = sorted(arms, key=lambda a: (-a.rank, a.order))
        leader = arms[0]
        if math.isnan(leader.estimate):
            verdicts.append(RateVerdict(workload=workload, line=line, arms=tuple(arms), deploy=None))
            continue
        if len(arms) == 1:
            verdicts.append(RateVerdict(workload=workload, line=line, arms=tuple(arms), deploy=leader.arm))
            continue
        runner = arms[1]
        apart = leader.lo > runner.hi
        ratio = leader.estimate / runner.estimate if runner.estimate > 0 else math.inf
        lo = leader.lo / runner.hi if runner.hi > 0 else math.inf
        hi = leader.hi / runner.lo if runner.lo > 0 else math.inf
        if math.isnan(runner.estimate):
            ratio = math.inf
        verdicts.append(RateVerdict(workload=workload, line=line, arms=tuple(arms),
                                    deploy=leader.arm if apart else INDETERMINATE,
                                    ratio=ratio, ratio_lo=lo, ratio_hi=hi))
    return verdicts


def answer_row(verdicts: list[RateVerdict], *, slo_text: str, line_text) -> dict:
    """The Answer table's cells for one workload's lines (`line_text(line)`: its params in words)."""
    def with_line(v: RateVerdict, text: str) -> str:
        words = line_text(v.line)
        return f"{words}: {text}" if len(verdicts) > 1 and words and words != "all" else text

    deploy = [with_line(v, "no arm within the SLO" if v.deploy is None else v.deploy) for v in verdicts]
    by = []
    for v in verdicts:
        rates = ", ".join(f"{a.arm} {a.text()}" for a in v.arms)
        ratio = f"; {v.leader.arm}/{v.arms[1].arm} {v.ratio_text()}" if len(v.arms) > 1 and v.deploy else ""
        by.append(with_line(v, f"highest rate within {slo_text}: {rates}{ratio}"))
    sure = []
    for v in verdicts:
        n = min(a.repeats for a in v.arms)
        if v.deploy == INDETERMINATE:
            state = "intervals overlap"
        elif v.deploy is None or len(v.arms) == 1:
            state = "no comparison"
        else:
            state = "intervals apart"
        # One repeat: the probes decided by their own intervals, and the bracket of measured rates is the spread.
        spread = "the bracket of measured rates" if n == 1 else f"{n} repeats"
        sure.append(with_line(v, f"interval [{v.ratio_text().partition('[')[2].rstrip(']') or '–'}], {state}, "
                                 f"from {spread}"))
    return {"deploy": fit("; ".join(deploy)), "by how much": fit("; ".join(by)), "flips": "–",
            "how sure": fit("; ".join(sure))}


def recommendation_block(verdicts: list[RateVerdict], *, slo_text: str, line_text) -> list[dict]:
    """recommendation.yaml's highest_rate_within_slo for one workload: per line, the arms, the ratio, the choice."""
    def number(x: float):
        return None if math.isnan(x) else ("inf" if math.isinf(x) else round(x, 4))

    return [{"params": line_text(v.line) or "all", "slo": slo_text,
             "deploy": v.deploy if v.deploy is not None else "none within the SLO",
             "arms": [{"arm": a.arm, "req_s": number(a.estimate), "interval": [number(a.lo), number(a.hi)],
                       "repeats": a.repeats} for a in v.arms],
             "ratio": number(v.ratio), "ratio_interval": [number(v.ratio_lo), number(v.ratio_hi)]}
            for v in verdicts]


@dataclass(kw_only=True)
class RateSearch:
    """Everything the report says against offered rate, computed once."""

    points: pd.DataFrame  # runner.report.rates.rate_points
    best: pd.DataFrame  # runner.report.rates.highest_rates (empty without an SLO)
    verdicts: list[RateVerdict] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)  # workloads whose Answer is their highest rate
    rows: dict[str, dict] = field(default_factory=dict)  # workload → its Answer cells
    lines: list[str] = field(default_factory=list)  # the Answer in sentences
    recommendation: dict[str, list[dict]] = field(default_factory=dict)  # workload → highest_rate_within_slo


def rate_search(trials: pd.DataFrame, requests: pd.DataFrame, slo, *, seed: int,
                params_text: Callable[[str, str], str], answers: bool) -> RateSearch:
    """The open-loop trials against offered rate and, with an SLO, each workload's verdict on its highest rate.
    `answers`: the study is a rate search (sweep.adaptive, as saved), so each workload with a verdict is
    answered by it, not by a choice per offered rate (its arms were measured at other rates)."""
    from runner.report.rates import highest_rates, rate_points

    points = rate_points(trials, requests, slo)
    best = highest_rates(points, slo, seed=seed) if len(points) and slo else pd.DataFrame()
    verdicts = rate_verdicts(best, points) if len(best) else []
    answered = list(dict.fromkeys(v.workload for v in verdicts)) if answers else []
    slo_text = slo.text() if slo else ""
    out = RateSearch(points=points, best=best, verdicts=verdicts, answered=answered)
    for w in answered:
        mine = [v for v in verdicts if v.workload == w]
        line_text = (lambda line, w=w: params_text(w, line))
        out.rows[w] = answer_row(mine, slo_text=slo_text, line_text=line_text)
        out.recommendation[w] = recommendation_block(mine, slo_text=slo_text, line_text=line_text)
        out.lines += [v.sentence(slo_text, line_text(v.line)) for v in mine]
    return out
