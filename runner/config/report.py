"""The report's settings: the `report` block of the run folder's persisted config.yaml with the config's SLO
(runner.slo), then CLI overrides. Part of the config, below plan and report: the sweep checks it before start.

    report: {enabled: true, tie_band: 0.02, gpu_hour_usd: null, seed: 0}

`report: true` / `report: false` mean the defaults, enabled or not. A bad value is an error naming the override
that fixes it; the sweep checks it before any engine starts. The block's `slo` is the older name of the root's
`slo` (read by runner.slo, for one release).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

from runner.numerics.stats import MIN_REPEATS, TIE_BAND
from runner.slo import Slo

_KEYS = ("enabled", "tie_band", "slo", "gpu_hour_usd", "seed")


class ReportSettingsError(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    enabled: bool = True
    tie_band: float = TIE_BAND
    slo: Slo = field(default_factory=Slo)  # the config's latency targets (runner.slo)
    gpu_hour_usd: Optional[float] = None
    seed: int = 0  # the bootstrap's seed
    min_repeats: int = MIN_REPEATS


def _number(value, *, name: str, low: float, fix: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ReportSettingsError(f"report.{name}={value!r} is not a number (fix: {fix})") from None
    if not number >= low:
        raise ReportSettingsError(f"report.{name}={value!r} must be ≥ {low:g} (fix: {fix})")
    return number


def parse_settings(raw: Any, *, slo: Slo = Slo()) -> ReportSettings:
    """From a config's `report` value (a bool, None, or the block) and its SLO (runner.slo reads the block's
    older `slo`)."""
    if raw is None or isinstance(raw, bool):
        return ReportSettings(enabled=raw is not False, slo=slo)
    if not hasattr(raw, "items"):
        raise ReportSettingsError(f"report={raw!r} must be true/false or a block (fix: report.enabled=true)")
    raw = dict(raw)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ReportSettingsError(f"report has no setting {unknown[0]!r}; valid: {', '.join(_KEYS)} "
                                  f"(fix: remove report.{unknown[0]})")
    usd = raw.get("gpu_hour_usd")
    return ReportSettings(
        enabled=bool(raw.get("enabled", True)),
        tie_band=_number(raw.get("tie_band", TIE_BAND), name="tie_band", low=0.0, fix="report.tie_band=0.02"),
        slo=slo, gpu_hour_usd=None if usd is None else _number(usd, name="gpu_hour_usd", low=1e-9,
                                                                fix="report.gpu_hour_usd=3.5"),
        seed=int(raw.get("seed", 0) or 0))


def with_overrides(settings: ReportSettings, *, tie_band: Optional[float] = None, slo: Optional[Slo] = None,
                   gpu_hour_usd: Optional[float] = None, seed: Optional[int] = None) -> ReportSettings:
    """CLI flags over the persisted settings; an SLO given on the command line replaces the persisted one."""
    merged = {"tie_band": settings.tie_band if tie_band is None else tie_band,
              "gpu_hour_usd": settings.gpu_hour_usd if gpu_hour_usd is None else gpu_hour_usd,
              "seed": settings.seed if seed is None else seed}
    return replace(parse_settings(merged, slo=settings.slo if slo is None else slo), enabled=settings.enabled)
