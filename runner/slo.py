"""The latency targets (SLO): one typed value that the actor (goodput), the rate search and the report read. Pure.

The config's `slo` block names its targets as vLLM's benchmark does (`vllm bench serve --goodput ttft:500 tpot:50
e2el:2000`), in ms, with the percentile each one bounds:

    slo: {ttft: 500, tpot: 50, e2el: null, percentile: 99}

A request is good when each of its figures is within its target (goodput, as vLLM counts it); a point meets the SLO
when the median over repeats of each target's percentile figure (`ttft_p99_s`, …) is within it. The two older
blocks, `report.slo` (ttft_p99_ms, …) and `execution.slo` (ttft_ms, …), are read for one release with a warning
that names the new key.
"""
from __future__ import annotations

import enum
import math
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional

PERCENTILES = (50, 90, 99)  # the trial's percentile columns
DEFAULT_PERCENTILE = 99


class SloError(ValueError):
    """A target that cannot be read; the message names the override that fixes it."""


class Metric(enum.StrEnum):
    """vLLM's `--goodput` names."""

    TTFT = "ttft"
    TPOT = "tpot"
    E2EL = "e2el"


_COLUMN_PREFIX = {Metric.TTFT: "ttft", Metric.TPOT: "tpot", Metric.E2EL: "e2e"}  # the trial's column names


@dataclass(frozen=True, kw_only=True)
class Target:
    metric: Metric
    ms: float
    percentile: int = DEFAULT_PERCENTILE

    @property
    def name(self) -> str:
        """vLLM's name of the figure it bounds (`p99_ttft_ms`)."""
        return f"p{self.percentile}_{self.metric}_ms"

    @property
    def column(self) -> str:
        """The trial column (seconds) it bounds."""
        return f"{_COLUMN_PREFIX[self.metric]}_p{self.percentile}_s"

    @property
    def text(self) -> str:
        return f"{self.metric.upper()} p{self.percentile} ≤ {self.ms:g} ms"


@dataclass(frozen=True, kw_only=True)
class Slo:
    targets: tuple[Target, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.targets)

    @property
    def limits(self) -> dict[str, float]:
        """Figure name (Target.name) → limit in ms."""
        return {t.name: t.ms for t in self.targets}

    def column(self, name: str) -> str:
        return next(t.column for t in self.targets if t.name == name)

    def request_limits_s(self) -> dict[Metric, float]:
        """Per metric, the tightest target in seconds: the per-request limit goodput counts against."""
        limits: dict[Metric, float] = {}
        for t in self.targets:
            limits[t.metric] = min(limits.get(t.metric, math.inf), t.ms / 1000.0)
        return limits

    def text(self) -> str:
        return ", ".join(t.text for t in self.targets)

    def over(self, older: "Slo") -> "Slo":
        """These targets, then `older`'s for the metrics these do not set."""
        mine = {t.metric for t in self.targets}
        return Slo(targets=self.targets + tuple(t for t in older.targets if t.metric not in mine))


def _ms(value, *, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SloError(f"{where}={value!r} is not a number of ms (fix: {where}=500)") from None
    if not number > 0:
        raise SloError(f"{where}={value!r} must be > 0 ms (fix: {where}=500)")
    return number


def _percentile(value, *, where: str) -> int:
    if isinstance(value, bool) or value not in PERCENTILES:
        raise SloError(f"{where}={value!r}: valid: {', '.join(map(str, PERCENTILES))} (fix: {where}=99)")
    return int(value)


def _key(where: str, key: str) -> str:
    """How the user writes one key: `slo.ttft` in the config, `--slo ttft` on the report's command line."""
    return f"{where} {key}" if where.startswith("--") else f"{where}.{key}"


def slo_of(raw: Optional[Mapping], *, where: str = "slo") -> Slo:
    """From the `slo` block's keys (ttft, tpot, e2el in ms; percentile): the command line, a persisted config."""
    raw = dict(raw or {})
    unknown = sorted(set(raw) - {*Metric, "percentile"})
    if unknown:
        raise SloError(f"{where} has no key {unknown[0]!r}; valid: {', '.join(Metric)}, percentile "
                       f"(fix: {_key(where, 'ttft')}=500)")
    given = raw.get("percentile")  # null: the default; any other value one of PERCENTILES (0 is not p99)
    percentile = _percentile(DEFAULT_PERCENTILE if given is None else given, where=_key(where, "percentile"))
    return Slo(targets=tuple(Target(metric=m, ms=_ms(raw[m], where=_key(where, m)), percentile=percentile)
                             for m in Metric if raw.get(m) is not None))


@dataclass(kw_only=True)
class SloSection:
    """The config's `slo` block (null: no target)."""

    ttft: Optional[float] = None  # ms to the first token
    tpot: Optional[float] = None  # ms per output token after the first
    e2el: Optional[float] = None  # ms from sending to the last token
    percentile: int = DEFAULT_PERCENTILE  # the trial figure each target bounds (50, 90 or 99)

    def value(self) -> Slo:
        return slo_of(vars(self))


# The older blocks' keys: report.slo's bound a percentile, execution.slo's each request (goodput).
OLD_REPORT_KEYS = {f"{_COLUMN_PREFIX[m]}_p{p}_ms": (m, p) for m in Metric for p in PERCENTILES}
OLD_EXECUTION_KEYS = {f"{_COLUMN_PREFIX[m]}_ms": m for m in Metric}


def _deprecated(old: str, new: str) -> None:
    print(f"warning: {old} is deprecated and read for one release only: use {new}", file=sys.stderr)


def old_report_slo(raw: Any) -> Slo:
    """`report.slo` of older configs ({ttft_p99_ms: 500, ...}), with a warning per key set (stderr)."""
    return _old_slo(raw, section="report.slo", keys=OLD_REPORT_KEYS, valid="slo.ttft, slo.tpot and slo.e2el with "
                    "slo.percentile")


def old_execution_slo(raw: Any) -> Slo:
    """`execution.slo` of older configs ({ttft_ms: 500, ...}), with a warning per key set (stderr)."""
    keys = {key: (metric, DEFAULT_PERCENTILE) for key, metric in OLD_EXECUTION_KEYS.items()}
    return _old_slo(raw, section="execution.slo", keys=keys, valid="slo.ttft, slo.tpot and slo.e2el")


def _old_slo(raw: Any, *, section: str, keys: dict, valid: str) -> Slo:
    targets = []
    for key, value in dict(raw or {}).items():
        if value is None:
            continue
        if key not in keys:
            raise SloError(f"{section} has no target {key!r}; the targets are now {valid} (fix: slo.ttft=500)")
        metric, percentile = keys[key]
        tail = "" if percentile == DEFAULT_PERCENTILE else f" slo.percentile={percentile}"
        _deprecated(f"{section}.{key}", f"slo.{metric}={value:g}{tail}")
        targets.append(Target(metric=metric, ms=_ms(value, where=f"{section}.{key}"), percentile=percentile))
    return Slo(targets=tuple(targets))


def config_slo(config: Mapping) -> Slo:
    """A persisted config's SLO (a plain mapping): `slo`, then the older blocks for metrics it does not set."""
    report = config.get("report")
    execution = config.get("execution")
    return slo_of(config.get("slo")).over(
        old_report_slo(report.get("slo") if hasattr(report, "get") else None).over(
            old_execution_slo(execution.get("slo") if hasattr(execution, "get") else None)))
