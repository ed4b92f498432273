"""The report's settings: the `report` block of the run folder's persisted config.yaml, then CLI overrides. Part of
the config, below plan and report: the sweep checks it before start, and a rate search targets its SLO.

    report: {enabled: true, tie_band: 0.02, slo: {ttft_p99_ms: 500, tpot_p50_ms: 50}, gpu_hour_usd: null}

An older config's `report: true` means the defaults. A bad value is an error naming the override that fixes
it; the sweep checks it before any engine starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

from runner.measurement.stats import MIN_REPEATS, TIE_BAND

# SLO names → the trial column (seconds) each one bounds.
SLO_COLUMNS = {"ttft_p50_ms": "ttft_p50_s", "ttft_p99_ms": "ttft_p99_s", "tpot_p50_ms": "tpot_p50_s",
               "tpot_p99_ms": "tpot_p99_s", "e2e_p99_ms": "e2e_p99_s"}
_KEYS = ("enabled", "tie_band", "slo", "gpu_hour_usd", "seed")


class ReportSettingsError(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    enabled: bool = True
    tie_band: float = TIE_BAND
    slo: dict[str, float] = field(default_factory=dict)  # SLO name → limit in ms
    gpu_hour_usd: Optional[float] = None
    seed: int = 0  # the bootstrap's seed
    min_repeats: int = MIN_REPEATS

    def slo_text(self) -> str:
        names = {k: k.removesuffix("_ms").split("_") for k in self.slo}
        return ", ".join(f"{names[k][0].upper()} {' '.join(names[k][1:])} ≤ {v:g} ms" for k, v in self.slo.items())


def _number(value, *, name: str, low: float, fix: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ReportSettingsError(f"report.{name}={value!r} is not a number (fix: {fix})") from None
    if not number >= low:
        raise ReportSettingsError(f"report.{name}={value!r} must be ≥ {low:g} (fix: {fix})")
    return number


def parse_settings(raw: Any) -> ReportSettings:
    """From a config's `report` value: a bool (older configs), None, or the block."""
    if raw is None or isinstance(raw, bool):
        return ReportSettings(enabled=raw is not False)
    if not hasattr(raw, "items"):
        raise ReportSettingsError(f"report={raw!r} must be true/false or a block (fix: report.enabled=true)")
    raw = dict(raw)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ReportSettingsError(f"report has no setting {unknown[0]!r}; valid: {', '.join(_KEYS)} "
                                  f"(fix: remove report.{unknown[0]})")
    slo = {k: v for k, v in dict(raw.get("slo") or {}).items() if v is not None}
    bad = sorted(set(slo) - set(SLO_COLUMNS))
    if bad:
        raise ReportSettingsError(f"report.slo has no target {bad[0]!r}; valid: {', '.join(SLO_COLUMNS)} "
                                  f"(fix: report.slo.ttft_p99_ms=500)")
    slo = {k: _number(v, name=f"slo.{k}", low=1e-9, fix=f"report.slo.{k}=500") for k, v in slo.items()}
    usd = raw.get("gpu_hour_usd")
    return ReportSettings(
        enabled=bool(raw.get("enabled", True)),
        tie_band=_number(raw.get("tie_band", TIE_BAND), name="tie_band", low=0.0, fix="report.tie_band=0.02"),
        slo=slo, gpu_hour_usd=None if usd is None else _number(usd, name="gpu_hour_usd", low=1e-9,
                                                                fix="report.gpu_hour_usd=3.5"),
        seed=int(raw.get("seed", 0) or 0))


def with_overrides(settings: ReportSettings, *, tie_band: Optional[float] = None,
                   slo: Optional[dict[str, float]] = None, gpu_hour_usd: Optional[float] = None,
                   seed: Optional[int] = None) -> ReportSettings:
    """CLI flags over the persisted settings; an SLO given on the command line replaces the persisted one."""
    merged = {"tie_band": settings.tie_band if tie_band is None else tie_band,
              "slo": settings.slo if slo is None else slo,
              "gpu_hour_usd": settings.gpu_hour_usd if gpu_hour_usd is None else gpu_hour_usd,
              "seed": settings.seed if seed is None else seed}
    return replace(parse_settings(merged), enabled=settings.enabled)
