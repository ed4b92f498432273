"""Each engine's first trial after a load or a wake, its two runs side by side and against the same point in its
other rounds. Pure.

Warm-up exists so that nothing is measured cold by accident; this is the check that it worked. The first trial
after a load (or a pool wake) runs twice with the same prompts and keeps the second (the first is in
first_runs.parquet): a ratio outside the band says the first run paid for something the second did not (a
compile, a cold cache). Later rounds send other prompts, so the comparison against the same point (engine,
workload, params, concurrency) in other rounds also carries the prompt set's own effect (docs/benchmarks.md: on
an H200 one point's round-0 prompts ran slower in every command, a warm pooled engine's included).
"""
from __future__ import annotations

import pandas as pd

from runner.report.agreement import sign_test
from runner.report.samples import POINT, better_ratio, ok_trial_values

BAND = 0.10  # a first trial within 10 % of the later rounds' median passes


def first_trial_checks(trials: pd.DataFrame, samples: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """One row per load or wake followed by a trial whose point also ran in other rounds: `after` (load / wake),
    the trial's figure, the others' median, count and spread ((max − min) / median: where it is wider than the
    band, the others disagree among themselves by more than the check asks of the first), and `ratio` (> 1: the
    first trial was better)."""
    columns = ["source", "after", "engine_id", "workload", "workload_params_json", "concurrency", "round", "first",
               "later_median", "n_later", "later_spread", "ratio"]
    if phases is None or not len(phases) or not len(trials) or not len(samples):
        return pd.DataFrame(columns=columns)
    ok = ok_trial_values(trials, samples)
    rows = []
    events = phases[phases.phase.isin(["start", "wake"]) & phases.engine_id.notna()]
    for e in events.itertuples():
        mine = ok[(ok.source == e.source) & (ok.engine_id == e.engine_id) & (ok.started_at >= e.started_at)]
        if not len(mine):
            continue
        first = mine.sort_values("started_at").iloc[0]
        same = ok[(ok.source == first.source) & (ok.trial_id != first.trial_id)]
        for column in POINT:
            same = same[same[column] == first[column]]
        if not len(same):
            continue
        later = float(same.value.median())
        better = better_ratio(first.workload, first.value, later)
        rows.append({"source": first.source, "after": "load" if e.phase == "start" else "wake",
                     "engine_id": first.engine_id, "workload": first.workload,
                     "workload_params_json": first.workload_params_json, "concurrency": int(first.concurrency),
                     "round": first.get("round"), "first": float(first.value), "later_median": later,
                     "n_later": len(same), "later_spread": float((same.value.max() - same.value.min()) / later)
                     if later else None, "ratio": float(better)})
    return pd.DataFrame(rows, columns=columns)


def first_run_checks(trials: pd.DataFrame, samples: pd.DataFrame, first_runs: pd.DataFrame,
                     first_samples: pd.DataFrame, engines: pd.DataFrame) -> pd.DataFrame:
    """One row per first trial that ran twice: `after` (load / pool wake), the first run's figure, the kept second
    run's, and `ratio` (> 1: the first run was better)."""
    columns = ["source", "after", "engine_id", "workload", "workload_params_json", "concurrency", "round", "first",
               "kept", "ratio"]
    if first_runs is None or not len(first_runs) or not len(samples) or not len(first_samples):
        return pd.DataFrame(columns=columns)
    kept_value = samples.groupby(["source", "trial_id"]).value.median()
    first_value = first_samples.groupby(["source", "trial_id"]).value.median()
    pooled = set()
    if engines is not None and len(engines) and "reused_from_pool" in engines:
        pooled = {(s, e) for s, e, r in zip(engines.source, engines.engine_id, engines.reused_from_pool) if r is True}
    ok = trials[trials.status == "ok"].set_index(["source", "trial_id"])
    rows = []
    for key in first_value.index:
        if key not in kept_value.index or key not in ok.index:
            continue
        trial = ok.loc[key]
        first, kept = float(first_value[key]), float(kept_value[key])
        better = better_ratio(trial.workload, first, kept)
        rows.append({"source": key[0], "after": "pool wake" if (key[0], trial.engine_id) in pooled else "load",
                     "engine_id": trial.engine_id, "workload": trial.workload,
                     "workload_params_json": trial.workload_params_json, "concurrency": int(trial.concurrency),
                     "round": trial.get("round"), "first": first, "kept": kept, "ratio": float(better)})
    return pd.DataFrame(rows, columns=columns)


def first_run_line(checks: pd.DataFrame, *, band: float = BAND) -> str:
    """'N of M first trials after a load ran their first run within 10 % of the second'."""
    counts, worst = _counts_by_event(checks, band=band)
    if not counts:
        return ""
    return (f"{counts} ran their first run within {band:.0%} of the second, which is their figure (median ratio "
            f"{checks.ratio.median():.3f}; worst: {worst.ratio:.2f}× after a {worst.after}, {worst.workload} "
            f"c={worst.concurrency})")


def first_at_point_checks(trials: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """Per trial point with two or more repeats: its first measurement (the engine's first sight of that shape,
    right after its warm-up) against the median of the others."""
    columns = ["source", *POINT, "first", "later_median", "ratio"]
    rows = []
    if not len(trials) or not len(samples):
        return pd.DataFrame(columns=columns)
    ok = ok_trial_values(trials, samples)
    for key, group in ok.sort_values("started_at").groupby(["source", *POINT], sort=False):
        if len(group) < 2:
            continue
        first, later = float(group.value.iloc[0]), float(group.value.iloc[1:].median())
        workload = group.workload.iloc[0]
        rows.append({**dict(zip(["source", *POINT], key)), "concurrency": int(group.concurrency.iloc[0]),
                     "first": first, "later_median": later, "ratio": better_ratio(workload, first, later)})
    return pd.DataFrame(rows, columns=columns)


def point_line(checks: pd.DataFrame, *, band: float = BAND) -> str:
    """'N of M points' first measurements within 10 % of their later repeats'."""
    if not len(checks):
        return ""
    inside = int(((checks.ratio - 1).abs() <= band).sum())
    worse, better = int((checks.ratio < 1 - band).sum()), int((checks.ratio > 1 + band).sum())
    farthest = checks.iloc[(checks.ratio - 1).abs().argmax()]
    return (f"{inside} of {len(checks)} points' first measurements within {band:.0%} of their later repeats, "
            f"{worse} worse by more and {better} better (median ratio {checks.ratio.median():.3f}: below 1, first "
            f"measurements run worse; farthest: {farthest.ratio:.2f}×, {farthest.workload} c={farthest.concurrency}); "
            f"{shift_text(checks)}")


def shift_text(checks: pd.DataFrame) -> str:
    """Whether first figures run worse than their later ones as a rule, beyond each one's spread: a sign test over
    the checks' ratios (a first-use cost left in the figures moves most of them one way)."""
    better, worse = int((checks.ratio > 1).sum()), int((checks.ratio < 1).sum())
    p, p_text = sign_test(better, worse)
    if p_text is None:
        return f"the first better at {better}, worse at {worse}: too few for a sign test to show a shift"
    verdict = "no first-use cost shows" if p >= 0.05 else (
        "the first run worse as a rule: a first-use cost may be left" if worse > better else "the first better")
    return f"the first better at {better}, worse at {worse} (sign test {p_text}: {verdict})"


def summary_line(checks: pd.DataFrame, *, band: float = BAND) -> str:
    """'N of M first trials after a load (and K of L after a wake) within 10 % of the later rounds', and how many
    of those outside sit at points whose later rounds spread wider than the band themselves."""
    counts, worst = _counts_by_event(checks, band=band)
    if not counts:
        return ""
    outside = checks[(checks.ratio - 1).abs() > band]
    wide = int((outside.later_spread > band).sum())
    spread = (f"; of the {len(outside)} outside, {wide} at points whose later rounds differ among themselves by "
              f"more than {band:.0%}") if len(outside) else ""
    return (f"{counts} within {band:.0%} of the same point in later rounds (worst: {worst.ratio:.2f}× after a "
            f"{worst.after}, {worst.workload} c={worst.concurrency}){spread}; over all {len(checks)}, "
            f"{shift_text(checks)}")


def _counts_by_event(checks: pd.DataFrame, *, band: float) -> tuple[str, object]:
    """'N of M first trials after a load and K of L after a wake' (events in that order) and the worst check."""
    parts = []
    for after in ("load", "wake", "pool wake"):
        these = checks[checks.after == after]
        if len(these):
            parts.append(f"{int(((these.ratio - 1).abs() <= band).sum())} of {len(these)} first trials after a {after}")
    if not parts:
        return "", None
    return " and ".join(parts), checks.iloc[(checks.ratio - 1).abs().argmax()]
