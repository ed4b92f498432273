"""The study's answer, decided once per workload: which arm to deploy (its engine arguments and `vllm serve` line),
by how much, how sure, the caveats that apply, the draft count. Pure.

The study is read from the saved config, never inferred from the data's shape: `sweep.adaptive` (rate_search:
each arm's highest rate within the SLO, runner.report.rate_answer; predict_schedule or a grid: the per-point
decisions, runner.numerics.decision) with its `question` and the draft counts it varies. One answerer per
workload returns one WorkloadAnswer; the Answer and Verdict tables, the blocking caveats, the Recommendation
section, recommendation.yaml, answer.json and the W&B summary render it and decide nothing themselves.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from runner.numerics.decision import one_for_all
from runner.plan.vllm_args import deployment, production, read_args
from runner.report.arm_engine import arm_engine
from runner.report.rate_answer import INDETERMINATE, RateVerdict
from runner.schema import EngineStatus
from runner.spec_arm import row_spec
from runner.vllm.serve import serve_command


class StudyKind(enum.StrEnum):
    RATE_SEARCH = "rate_search"
    PREDICT_SCHEDULE = "predict_schedule"
    GRID = "grid"


class Answerer(enum.StrEnum):
    HIGHEST_RATE = "highest rate within the SLO"
    PER_POINT = "per-point decisions, one setting for all points"
    LONE_ARM = "one arm measured: a measurement, not a choice"
    NO_RESULT = "no result"


RULES = {
    Answerer.HIGHEST_RATE: "deploy the arm whose highest rate within the SLO has its interval wholly above the "
                           "next arm's (the probes decide by their own intervals; one repeat: the bracket of "
                           "measured rates is the interval)",
    Answerer.PER_POINT: "per point the simplest arm tied for first; one setting for all points: the arm tied for "
                        "first at the most points (equal counts to the simpler arm); none while no point has a choice",
    Answerer.LONE_ARM: "only one arm was measured: nothing was compared, so nothing is chosen",
    Answerer.NO_RESULT: "no arm has a measured result",
}


@dataclass(frozen=True, kw_only=True)
class Study:
    kind: StudyKind
    question: Optional[dict] = None  # sweep.question as saved
    draft_counts: tuple[int, ...] = ()  # the k's the study runs (speculative arms)

    @classmethod
    def of(cls, config: dict) -> "Study":
        sweep = (config or {}).get("sweep") or {}
        adaptive = sweep.get("adaptive")
        kind = StudyKind(adaptive) if adaptive in set(StudyKind) - {StudyKind.GRID} else StudyKind.GRID
        grid = sweep.get("grid") or {}
        ks = [k for k in grid.get("num_speculative_tokens") or [] if isinstance(k, int)]
        ks += [a.get("num_speculative_tokens") for a in sweep.get("arms") or []
               if isinstance(a, dict) and isinstance(a.get("num_speculative_tokens"), int)]
        return cls(kind=kind, question=sweep.get("question") or None, draft_counts=tuple(sorted(set(ks))))


@dataclass(frozen=True, kw_only=True)
class Deploy:
    """What production runs: the arm's engine arguments without benchmark-only settings; `measured_with` names
    those the measurement used on top (synthetic acceptance, dummy weights)."""

    arm: str
    k: int = 0
    engine_args: Optional[dict[str, Any]] = None  # None: the run did not record what its engines ran
    serve: Optional[str] = None
    measured_with: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Caveat:
    tag: str  # the Answer table's word for it
    text: str  # recommendation.yaml's and report.md's sentence
    blocking: bool = False  # said above the Answer


@dataclass(frozen=True, kw_only=True)
class WorkloadAnswer:
    workload: str
    answerer: Answerer
    deploy: Optional[Deploy]
    why_none: str = ""  # where deploy is None: why
    deploy_text: str = "–"  # the Answer's cell (per load where it differs)
    by_how_much: str = "–"
    interval: str = "–"
    flips: str = "–"
    how_sure: str = "–"
    caveats: tuple[Caveat, ...] = ()
    draft_count: Optional[int] = None  # the deployed arm's k (None: spec off or nothing deployed)

    @property
    def choice(self) -> Optional[str]:
        return self.deploy.arm if self.deploy else None

    def record(self) -> dict[str, Any]:
        """answer.json's deploy block for this workload (no NaN: a missing value is null)."""
        d = self.deploy
        return {"answerer": self.answerer.value, "rule": RULES[self.answerer], "choice": self.choice,
                "why_none": self.why_none or None, "engine_args": d.engine_args if d else None,
                "vllm_serve": d.serve if d else None, "measured_with": (d.measured_with or None) if d else None,
                "by_how_much": self.by_how_much, "interval": self.interval, "flips": self.flips,
                "how_sure": self.how_sure, "draft_count": self.draft_count,
                "caveats": [c.text for c in self.caveats]}


def deploy_of(arm: str, engines: pd.DataFrame, *, trials: pd.DataFrame, config: dict) -> Deploy:
    """The arm's Deploy from what its engine ran (engines.vllm_args_json) at the k its trials ran
    (runner.report.arm_engine: an engine may run several k), as production takes it."""
    ok = engines[engines.status == EngineStatus.OK] if len(engines) else engines
    row = arm_engine(arm, engines=ok, trials=trials) or {}
    k = row_spec(row).k if row else 0
    ran = read_args(row.get("vllm_args_json"))
    if ran is None:
        return Deploy(arm=arm, k=k)
    model_cfg = (config or {}).get("model") or {}
    args, measured_with = production(deployment(ran, model=model_cfg.get("path") or str(row.get("model"))))
    return Deploy(arm=arm, k=k, engine_args=args, serve=serve_command(args), measured_with=measured_with)


def measured_with_text(deploy: Optional[Deploy]) -> str:
    """The benchmark-only settings beside the serve line, in words."""
    if deploy is None or not deploy.measured_with:
        return ""
    return "measured with " + ", ".join(f"{k}={_plain(v)}" for k, v in deploy.measured_with.items()) + \
        " (benchmark only, not in the serve line)"


def _plain(value) -> str:
    return "[" + ", ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in value) + "]" \
        if isinstance(value, (list, tuple)) else str(value)


def _k_of(deploy: Optional[Deploy]) -> Optional[int]:
    return deploy.k if deploy is not None and deploy.k > 0 else None


def rate_search_answer(workload: str, verdicts: list[RateVerdict], cells: dict[str, str], *, engines: pd.DataFrame,
                       trials: pd.DataFrame, config: dict, caveats: tuple[Caveat, ...]) -> WorkloadAnswer:
    """A rate search's workload: deploy the arm the highest-rate verdict names on every line (rate_answer's rule)."""
    chosen = {v.deploy for v in verdicts}
    arms = {a.arm for v in verdicts for a in v.arms}
    why = ""
    arm = next(iter(chosen)) if len(chosen) == 1 else None
    if len(arms) == 1:
        arm, why = None, f"only {next(iter(arms))} measured: a measurement, not a choice"
    elif arm is None:
        why = ("no arm meets the SLO at any measured rate" if chosen == {None} else
               "the lines disagree" if len(chosen) > 1 else "")
    elif arm == INDETERMINATE:
        arm, why = None, "indeterminate: the highest-rate intervals overlap"
    answerer = Answerer.LONE_ARM if len(arms) == 1 else Answerer.HIGHEST_RATE
    deploy = deploy_of(arm, engines, trials=trials, config=config) if arm else None
    ratio = [v.ratio_text() for v in verdicts if len(v.arms) > 1 and v.deploy]
    deploy_text = cells.get("deploy", "–") if arm or INDETERMINATE in chosen else f"none: {why}"
    return WorkloadAnswer(workload=workload, answerer=answerer, deploy=deploy, why_none=why, deploy_text=deploy_text,
                          by_how_much=cells.get("by how much", "–"), interval="; ".join(ratio) or "–",
                          flips="–", how_sure=cells.get("how sure", "–"), caveats=caveats,
                          draft_count=_k_of(deploy))


def per_point_answer(workload: str, outcomes: pd.DataFrame, *, engines: pd.DataFrame, trials: pd.DataFrame,
                     config: dict, simplicity: dict[str, tuple], caveats: tuple[Caveat, ...]) -> WorkloadAnswer:
    """A grid's (or a predict-then-validate study's) workload: one setting for all its points."""
    measured = set(outcomes.leader.dropna()) | {a for t in outcomes.tied for a in t}
    if not measured:
        return WorkloadAnswer(workload=workload, answerer=Answerer.NO_RESULT, deploy=None,
                              why_none="no arm has a result", deploy_text="none: no result", caveats=caveats)
    arms_at_points = set(outcomes.arms.astype(int))
    if arms_at_points == {1} and len(measured) == 1:
        arm = next(iter(measured))
        return WorkloadAnswer(workload=workload, answerer=Answerer.LONE_ARM, deploy=None,
                              why_none=f"only {arm} measured: a measurement, not a choice",
                              deploy_text=f"none: only {arm} measured (nothing compared)", caveats=caveats)
    arm = one_for_all(list(outcomes.decision), simplicity)
    why = "" if arm else "no point has a choice (too few repeats, a capacity wall or no result)"
    deploy = deploy_of(arm, engines, trials=trials, config=config) if arm else None
    return WorkloadAnswer(workload=workload, answerer=Answerer.PER_POINT, deploy=deploy, why_none=why,
                          caveats=caveats, draft_count=_k_of(deploy))


def finite_or_none(value):
    """A value for YAML or JSON: NaN becomes null, ±inf a word; containers walked."""
    if isinstance(value, float):
        return None if math.isnan(value) else ("inf" if value == math.inf else "-inf" if value == -math.inf
                                               else value)
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value
