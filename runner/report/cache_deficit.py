"""The prefix-cache deficit of speculative decoding: per arm with prefix caching and speculation, the prompt tokens
served from cache against the spec-off arm with caching on the same requests. Pure.

With a drafter that runs one token ahead (MTP, EAGLE), vLLM recomputes the last matched block of each cache hit, so
a hit serves fewer tokens than the same request's hit without speculation. Requests are matched by what they are
(workload point, repeat, session, turn: the same prompt in every arm), measured requests only. A hit is a request
the reference (spec off, caching on, same folder) served from cache. Per repeat: tokens lost per hit = the mean over
the reference's hits of (reference's cached tokens − the arm's); share of hits = the hits where the arm served fewer;
share of cached tokens lost = Σ lost / Σ the reference's. Shown as the median over repeats [lowest–highest].
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.report.render import md_table, section
from runner.schema import TrialStatus

MATCH = ["source", "workload", "workload_params_json", "concurrency", "repeat", "session", "turn"]
COLUMNS = ["workload", "workload_params_json", "concurrency", "arm", "arm_order", "reference", "repeats", "hits",
           "cached per hit (reference)", "cached per hit (arm)", "lost per hit", "lost per hit lo", "lost per hit hi",
           "share of hits", "share of cached tokens"]


def _caching(frame: pd.DataFrame) -> pd.Series:
    return frame.enable_prefix_caching.fillna(True).astype(bool)


def _references(trials: pd.DataFrame) -> dict[str, str]:
    """Per folder: the first spec-off arm with prefix caching (None where it has none)."""
    off = trials[(trials.spec_method.fillna("off") == "off") & _caching(trials)].sort_values("arm_order")
    return off.groupby("source", sort=False).arm.first().to_dict()


def cache_deficit(trials: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """One row per (workload point, speculative arm with caching) whose reference served hits there."""
    if not len(trials) or not len(requests) or "cached_tokens" not in requests:
        return pd.DataFrame(columns=COLUMNS)
    ok = trials[trials.status == TrialStatus.OK]
    references = _references(ok)
    spec = ok[(ok.spec_method.fillna("off") != "off") & _caching(ok) & ok.source.isin(references)]
    if not len(spec):
        return pd.DataFrame(columns=COLUMNS)
    measured = requests[requests.error.isna() & (requests.phase == "measured")]
    keys = ["source", "trial_id", "workload", "workload_params_json", "concurrency", "repeat", "arm", "arm_order"]
    rows = measured[["source", "trial_id", "session", "turn", "cached_tokens"]].merge(ok[keys], on=["source",
                                                                                               "trial_id"])
    rows["cached_tokens"] = pd.to_numeric(rows.cached_tokens, errors="coerce")
    ref = rows[[references.get(s) == a for s, a in zip(rows.source, rows.arm)]]
    ref = ref[ref.cached_tokens > 0][[*MATCH, "cached_tokens"]].rename(columns={"cached_tokens": "ref_cached"})
    out = []
    for (workload, params, concurrency, arm), mine in rows[rows.arm.isin(set(spec.arm))].groupby(
            ["workload", "workload_params_json", "concurrency", "arm"], sort=False):
        paired = mine.merge(ref, on=MATCH)
        paired = paired[paired.cached_tokens.notna()]
        if not len(paired):
            continue
        paired["lost"] = paired.ref_cached - paired.cached_tokens
        per_repeat = paired.groupby("repeat").agg(lost=("lost", "mean"), ref=("ref_cached", "sum"),
                                                  lost_sum=("lost", "sum"))
        out.append({"workload": workload, "workload_params_json": params, "concurrency": int(concurrency),
                    "arm": arm, "arm_order": mine.arm_order.iloc[0], "reference": references[mine.source.iloc[0]],
                    "repeats": len(per_repeat), "hits": len(paired),
                    "cached per hit (reference)": float(paired.ref_cached.mean()),
                    "cached per hit (arm)": float(paired.cached_tokens.mean()),
                    "lost per hit": float(per_repeat.lost.median()), "lost per hit lo": float(per_repeat.lost.min()),
                    "lost per hit hi": float(per_repeat.lost.max()),
                    "share of hits": float((paired.lost > 0).mean()),
                    "share of cached tokens": float(paired.lost.sum() / paired.ref_cached.sum())})
    if not out:
        return pd.DataFrame(columns=COLUMNS)
    return pd.DataFrame(out, columns=COLUMNS).sort_values(["workload", "workload_params_json", "concurrency",
                                                           "arm_order"], kind="stable").reset_index(drop=True)


def _range(lo: float, hi: float) -> str:
    return f"{lo:.3g}" if np.isclose(lo, hi) else f"{lo:.3g}–{hi:.3g}"


def deficit_lines(deficit: pd.DataFrame) -> list[str]:
    """The Answer's words per workload and arm: tokens lost per hit and the share of hits, over its points."""
    lines = []
    for (workload, arm), mine in deficit.groupby(["workload", "arm"], sort=False):
        lost = _range(mine["lost per hit"].min(), mine["lost per hit"].max())
        share = _range(100 * mine["share of hits"].min(), 100 * mine["share of hits"].max())
        tokens = _range(100 * mine["share of cached tokens"].min(), 100 * mine["share of cached tokens"].max())
        reference = mine.reference.iloc[0]
        if (mine["lost per hit hi"] <= 0).all():
            lines.append(f"- **{workload}, {arm}**: no prefix-cache deficit — every one of {int(mine.hits.sum())} "
                         f"cache hits served as many prompt tokens as {reference} ({len(mine)} point(s)).")
            continue
        lines.append(f"- **{workload}, {arm}**: prefix-cache deficit against {reference} on the same requests: "
                     f"{lost} prompt tokens lost per cache hit, at {share} % of hits ({tokens} % of the cached "
                     f"tokens; {int(mine.hits.sum())} hits over {len(mine)} point(s)): those tokens are prefilled "
                     f"again.")
    return lines


def deficit_section(a) -> str:
    d = a.cache_deficit
    if not len(d):
        return ""
    table = pd.DataFrame({
        "workload": d.workload, "params": [a.params_text(w, p) or "–" for w, p in zip(d.workload,
                                                                                     d.workload_params_json)],
        "c": d.concurrency, "arm": d.arm, "against": d.reference, "hits": d.hits, "repeats": d.repeats,
        "cached per hit (against)": d["cached per hit (reference)"].round(1),
        "cached per hit (arm)": d["cached per hit (arm)"].round(1),
        "lost per hit [repeats]": [f"{m:.3g} [{_range(lo, hi)}]" for m, lo, hi in
                                   zip(d["lost per hit"], d["lost per hit lo"], d["lost per hit hi"])],
        "share of hits": [f"{v:.0%}" for v in d["share of hits"]],
        "share of cached tokens": [f"{v:.1%}" for v in d["share of cached tokens"]]})
    return section("Prefix-cache deficit of speculative decoding",
                   __doc__.split("\n\n", 1)[1].replace("\n", " ").strip(), md_table(table))
