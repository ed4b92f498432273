"""Caveats that make the Answer unusable or untrustworthy, said above it (not among the details). Pure.

Blocking: dummy weights (speeds and acceptance are not the model's), fewer repeats than a choice needs, a KV
capacity wall, an open-loop client that ran behind its schedule (the point measured the client; not a saturation
probe, whose sends are all at once by design), outputs that
repeat a few tokens (acceptance is not that of real text) or differ between arms (not like for like), prompts
clipped to fit (over_length: clip). Each line
says where and the fix.
"""
from __future__ import annotations

import pandas as pd

from runner.numerics.decision import DecisionKind
from runner.report.frames import is_saturation


def _where(frame: pd.DataFrame) -> str:
    counts = frame.groupby("workload", sort=False).size()
    return ", ".join(f"{w} ({n})" for w, n in counts.items())


def _arms(arms, most: int = 4) -> str:
    """The arms by name, or how many where they are too many to read (the section further down names them)."""
    names = list(dict.fromkeys(map(str, arms)))
    return ", ".join(names) if len(names) <= most else f"{len(names)} arms, listed further down"


def _dummy(config: dict, engines: pd.DataFrame) -> bool:
    model = (config or {}).get("model") or {}
    names = engines.model.astype(str) if len(engines) and "model" in engines else pd.Series(dtype=str)
    return model.get("load_format") == "dummy" or names.str.contains("dummy").any()


def _saturation(trials: pd.DataFrame) -> pd.Series:
    """Saturation probes (offered rate inf): every request sent at once by design, so their sends run "late"."""
    if "offered_rate_req_s" not in trials:
        return pd.Series(False, index=trials.index)
    return pd.Series([is_saturation(r) for r in trials.offered_rate_req_s], index=trials.index, dtype=bool)


def blocking_caveats(*, config: dict, engines: pd.DataFrame, trials: pd.DataFrame, outcomes: pd.DataFrame,
                     degenerate: pd.DataFrame, divergence: pd.DataFrame, min_repeats: int) -> list[str]:
    lines = []
    if _dummy(config, engines):
        lines.append("**Dummy weights** (model.load_format: dummy): speeds are not the real model's and its own "
                     "acceptance means nothing (only a synthetic acceptance profile stands in for text). Fix: real "
                     "weights before deploying.")
    few = outcomes[(outcomes.n_min > 0) & (outcomes.n_min < min_repeats)] if len(outcomes) else outcomes
    if len(few):
        lines.append(f"**Too few repeats** at {len(few)} of {len(outcomes)} points ({_where(few)}): fewer than "
                     f"{min_repeats}, so no choice there. Fix: sweep.repeats={min_repeats}.")
    walled = outcomes[outcomes.kind == DecisionKind.CAPACITY] if len(outcomes) else outcomes
    if len(walled):
        lines.append(f"**KV capacity wall** at {len(walled)} point(s) ({_where(walled)}): they measure the KV pool, "
                     "not the configuration. Fix: lower concurrency or context, or more KV memory.")
    if "client_behind" in trials and len(trials):
        behind = trials[trials.client_behind.fillna(False).astype(bool) & ~_saturation(trials)]
        if len(behind):
            lines.append(f"**Client behind** in {len(behind)} open-loop trial(s) ({_where(behind)}): the sends ran "
                         "late, so those points measured the client. Fix: a lower rate or a faster client host.")
    if "clipped_requests" in trials and len(trials):
        clipped = trials[trials.clipped_requests.fillna(0) > 0]
        if len(clipped):
            lines.append(f"**Prompts clipped** in {len(clipped)} trial(s) ({_where(clipped)}): "
                         f"{int(clipped.clipped_requests.sum())} request(s) sent only the last tokens of their "
                         "prompt (over_length: clip), so those points did not measure the file's prompts whole. "
                         "Fix: a larger sweep.grid.max_model_len, or fewer max_turns.")
    if len(degenerate):
        lines.append(f"**Degenerate outputs** ({_arms(degenerate.arm)}): outputs repeat a few tokens, so acceptance "
                     "there is not that of real text.")
    if len(divergence):
        lines.append(f"**Outputs differ** ({_arms(divergence.arm)}): arms generated other tokens than the reference "
                     "at the same point; not a like-for-like comparison.")
    return lines
