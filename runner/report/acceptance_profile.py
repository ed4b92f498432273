"""Synthetic acceptance, measured against set: per arm and point, each draft position's acceptance (vLLM's
per-position counters over the trial) beside the rate the engine was forced to, and whether the repeats drew
their own accept/reject sequences (their accepted-token counts differ). Pure: reads the trials frame only.

A profile's rates are unconditional (position i is accepted in that share of drafts, as vLLM's per-position
counter reports it), so measured and set compare directly; an engine drafting k uses the first k rates. Where
every repeat accepted exactly the same number of tokens, the draws were replicated rather than drawn (the
fault this section was written to catch): the per-position figures then say nothing about the profile.
"""
from __future__ import annotations

import json
import math
from typing import Optional

import pandas as pd

from runner.report.profiles import PROFILE_PARAM
from runner.schema import TrialStatus

TOLERANCE = 0.02  # |measured − set| per position counted as on the profile


def _rates(value) -> Optional[list[float]]:
    """A profile as rates: the engine's JSON column, or the report's point text ("0.86/0.74"); None: real."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value in ("", "real"):
        return None
    try:
        parsed = json.loads(value) if isinstance(value, str) and value.startswith("[") else \
            [float(x) for x in str(value).split("/")]
        return [float(x) for x in parsed]
    except (TypeError, ValueError):
        return None


def _profile(row) -> Optional[list[float]]:
    own = _rates(row.get("spec_acceptance_profile"))
    if own is not None:
        return own
    params = json.loads(row.get("workload_params_json") or "{}")
    return _rates(params.get(PROFILE_PARAM))


def _positions(value) -> list[float]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [float(v) for v in list(value)]


def _fmt(values: list[float]) -> str:
    return " / ".join(f"{v:.3f}" for v in values) if values else "–"


def acceptance_profile_table(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (arm, workload, point, concurrency) with a synthetic profile: set and measured per position."""
    if trials is None or not len(trials) or "spec_acceptance_per_position" not in trials:
        return pd.DataFrame()
    ok = trials[trials.status == TrialStatus.OK] if "status" in trials else trials
    groups: dict[tuple, list] = {}
    for row in ok.to_dict("records"):
        rates = _profile(row)
        measured = _positions(row.get("spec_acceptance_per_position"))
        if rates is None or not measured:
            continue
        key = (row.get("arm") or row.get("engine_id"), row.get("workload"), row.get("workload_params_json"),
               row.get("concurrency"))
        groups.setdefault(key, []).append((rates, measured, row.get("spec_num_accepted_tokens")))
    out = []
    for (arm, workload, params, concurrency), repeats in sorted(
            groups.items(), key=lambda kv: (str(kv[0][:3]), float(kv[0][3] or 0))):
        k = min(len(m) for _, m, _ in repeats)
        rates = repeats[0][0][:k]
        per_position = [sorted(m[i] for _, m, _ in repeats) for i in range(k)]
        medians = [float(pd.Series(v).median()) for v in per_position]
        worst = max((abs(m - r) for m, r in zip(medians, rates)), default=math.nan)
        accepted = [int(a) for _, _, a in repeats if a is not None and not (isinstance(a, float) and math.isnan(a))]
        distinct = "–" if len(accepted) < 2 else ("yes" if len(set(accepted)) > 1 else "**no: replicated draws**")
        out.append({"arm": arm, "workload": workload, "c": concurrency, "k": k, "repeats": len(repeats),
                    "set per position": _fmt(rates), "measured (median)": _fmt(medians),
                    "measured range": " / ".join(f"{min(v):.3f}–{max(v):.3f}" for v in per_position),
                    "largest gap to set": round(worst, 4),
                    f"within {TOLERANCE}": "yes" if worst <= TOLERANCE else "no",
                    "accepted tokens per repeat": ", ".join(str(a) for a in accepted) or "–",
                    "repeats drew apart": distinct, "params": params})
    return pd.DataFrame(out)


def acceptance_profile_section(trials: pd.DataFrame) -> str:
    """report.md's "Synthetic acceptance: measured against set" section ("" where no trial ran a profile)."""
    from runner.report.render import md_table, section

    table = acceptance_profile_table(trials)
    if not len(table):
        return ""
    shown = table.drop(columns=["params"])
    return section("Synthetic acceptance: measured against set",
                   "Per position: the share of drafts accepted there (vLLM's per-position counters over the trial, "
                   "median over repeats) against the rate the engine was forced to. Each request draws its own "
                   "accept/reject sequence (its own seed), so the measured rates approach the set ones as requests "
                   "grow, and repeats differ; \"replicated draws\" means every repeat accepted exactly the same "
                   "tokens.", md_table(shown))
