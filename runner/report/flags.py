"""What keeps a number from meaning what it seems to: capacity walls, output divergence, failures, bandwidth."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from runner.report.arms import POINT_FIELDS
from runner.schema import EngineStatus, TrialStatus

# Live KV demand at or above this share of the pool counts as the capacity wall: block rounding, pinned
# prefix-cache blocks and the scheduler's watermark make the pool run out before demand reaches 100%
# (the reference study hit it at 1.05M live tokens against a 1.32M-token pool, i.e. ~80%).
CAPACITY_WALL_SHARE = 0.8
# A peak KV usage this high, or any preemption, is the engine itself saying the pool ran out.
KV_USAGE_WALL = 0.95

# Peak memory bandwidth in bytes/s of devices the report knows, matched as substrings of the device name
# (first match wins, so the more specific names come first).
KNOWN_BANDWIDTH = (
    ("H100 PCIe", 2.0e12),
    ("H200", 4.8e12),
    ("H100", 3.35e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
)


def live_kv_demand(trials: pd.DataFrame, requests: pd.DataFrame) -> pd.Series:
    """Tokens the trial's concurrent sessions hold at once: the sum of the `concurrency` largest session contexts.

    A session's context is its largest request (prompt + output; a multi-turn session's last turn holds its
    whole history). Warm-up requests (session < 0) are not sessions. Without request rows the mean request
    size × concurrency stands in.
    """
    demand = pd.Series(np.nan, index=trials.index, dtype=float)
    if len(requests):
        live = requests[requests.session >= 0]
        per_session = (live.assign(context=live.prompt_tokens + live.output_tokens)
                       .groupby(["source", "trial_id", "session"]).context.max())
        sessions_of = {key: g.sort_values(ascending=False).to_numpy()
                       for key, g in per_session.groupby(level=[0, 1])}
        for index, source, trial_id, concurrency in zip(trials.index, trials.source, trials.trial_id,
                                                        trials.concurrency):
            sizes = sessions_of.get((source, trial_id))
            if sizes is not None:
                demand[index] = float(sizes[: max(int(concurrency), 1)].sum())
    missing = demand.isna() & (trials.num_requests.fillna(0) > 0)
    mean_size = (trials.prompt_tokens_total + trials.output_tokens_total) / trials.num_requests.replace(0, np.nan)
    demand[missing] = (mean_size * trials.concurrency)[missing]
    return demand


def capacity_flags(trials: pd.DataFrame, requests: pd.DataFrame, engines: pd.DataFrame) -> pd.DataFrame:
    """One row per trial at the KV capacity wall, with its demand, pool and the evidence."""
    pools = engines.set_index(["source", "engine_id"]).kv_capacity_tokens.to_dict() if len(engines) else {}
    frame = trials.copy()
    frame["demand_tokens"] = live_kv_demand(trials, requests)
    frame["pool_tokens"] = [pools.get((s, e)) for s, e in zip(frame.source, frame.engine_id)]
    frame["pool_tokens"] = pd.to_numeric(frame.pool_tokens, errors="coerce")
    frame["demand_share"] = frame.demand_tokens / frame.pool_tokens
    preempted = frame.num_preemptions.fillna(0) > 0
    usage = pd.to_numeric(frame.kv_usage_peak, errors="coerce").fillna(0) >= KV_USAGE_WALL
    by_demand = frame.demand_share.fillna(0) >= CAPACITY_WALL_SHARE
    frame["why"] = [", ".join(w for w, on in (("demand ≥ 80% of pool", d), ("preemptions", p),
                                                (f"KV usage peak ≥ {KV_USAGE_WALL:.0%}", u)) if on)
                    for d, p, u in zip(by_demand, preempted, usage)]
    walled = frame[(by_demand | preempted | usage) & (frame.status == TrialStatus.OK)]
    return walled[["source", "workload", "workload_params_json", "concurrency", "repeat", "arm", "trial_id",
                   "demand_tokens", "pool_tokens", "demand_share", "num_preemptions", "kv_usage_peak", "why"]]


def walled_points(flags: pd.DataFrame) -> set[tuple]:
    """(workload, params, concurrency) points where any arm hit the wall."""
    return {tuple(r) for r in flags[list(POINT_FIELDS)].itertuples(index=False)}


def _request_differences(requests: pd.DataFrame, *, source_a: str, trial_a: str, source_b: str,
                         trial_b: str) -> tuple[int, int]:
    """(requests whose output differs, requests compared), matched by session, turn and phase."""
    key = ["session", "turn", "phase"]
    a = requests[(requests.source == source_a) & (requests.trial_id == trial_a)]
    b = requests[(requests.source == source_b) & (requests.trial_id == trial_b)]
    merged = a[key + ["output_hash"]].merge(b[key + ["output_hash"]], on=key, suffixes=("_a", "_b"))
    return int((merged.output_hash_a != merged.output_hash_b).sum()), len(merged)


def _greedy(params_json) -> bool:
    """Greedy on the model's own acceptance: a sampled output, or one whose drafts a synthetic profile accepted,
    is not the target model's greedy output."""
    try:
        params = json.loads(params_json or "{}")
        return float(params.get("temperature", 0) or 0) == 0.0 and params.get("acceptance", "real") == "real"
    except (TypeError, ValueError, AttributeError):
        return True


def divergence_flags(trials: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Arms whose outputs differ from the reference arm's at the same point and repeat (greedy decoding).

    The reference is the spec-off arm where there is one (else the first arm): at temperature 0 a
    speculative method that only changes speed must produce the reference's tokens.
    """
    ok = trials[(trials.status == TrialStatus.OK) & trials.output_hash.notna()]
    ok = ok[[_greedy(p) for p in ok.workload_params_json]]  # sampled outputs differ between arms by design
    rows = []
    for key, group in ok.groupby([*POINT_FIELDS, "repeat"], sort=False):
        if group.arm.nunique() < 2:
            continue
        group = group.sort_values(["k", "arm_order"])
        reference = group.iloc[0]
        for _, other in group.iloc[1:].iterrows():
            if other.output_hash == reference.output_hash or other.arm == reference.arm:
                continue
            differ, compared = _request_differences(requests, source_a=reference.source, trial_a=reference.trial_id,
                                                    source_b=other.source, trial_b=other.trial_id)
            rows.append({"workload": key[0], "workload_params_json": key[1], "concurrency": key[2],
                         "repeat": key[3], "reference": reference.arm, "arm": other.arm,
                         "requests_differing": differ, "requests_compared": compared})
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "concurrency", "repeat", "reference",
                                       "arm", "requests_differing", "requests_compared"])


def failures(engines: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Failed configurations and trials with their reasons; a trial failed because its engine did is folded in."""
    rows = []
    failed_engines = engines[engines.status != EngineStatus.OK] if len(engines) else engines
    for _, e in failed_engines.iterrows():
        numbers = json.loads(e.failure_numbers_json) if isinstance(e.failure_numbers_json, str) else {}
        n_trials = int(((trials.source == e.source) & (trials.engine_id == e.engine_id)).sum()) if len(trials) else 0
        rows.append({"arm": e.arm, "what": "engine start", "kind": e.failure_kind, "reason": e.failure_reason,
                     "numbers": ", ".join(f"{k}={v}" for k, v in numbers.items()), "trials": n_trials})
    engine_failed = set(zip(failed_engines.source, failed_engines.engine_id)) if len(failed_engines) else set()
    # A trial the race skipped is not a failure (see runner.report.race_report).
    failed_trials = trials[~trials.status.isin([TrialStatus.OK, TrialStatus.SKIPPED])] if len(trials) else trials
    keep = np.array([(s, e) not in engine_failed for s, e in zip(failed_trials.source, failed_trials.engine_id)],
                    dtype=bool)
    failed_trials = failed_trials[keep]
    for (arm, workload, kind, reason), group in failed_trials.groupby(
            ["arm", "workload", "failure_kind", "failure_reason"], dropna=False, sort=False):
        rows.append({"arm": arm, "what": f"{workload} trial", "kind": kind, "reason": reason, "numbers": "",
                     "trials": len(group)})
    return pd.DataFrame(rows, columns=["arm", "what", "kind", "reason", "numbers", "trials"])


# Below this median share of distinct token ids among a request's output tokens, outputs are loops of a
# few tokens (dummy weights, a tiny model): acceptance there says nothing about real text.
DEGENERATE_SHARE = 0.25


def _forced(profile, params_json) -> bool:
    """The trial ran at a synthetic acceptance profile (its column, or the report's `acceptance` point param)."""
    from runner.report.profiles import PROFILE_PARAM

    if isinstance(profile, str) and profile:
        return True
    try:
        given = json.loads(params_json or "{}").get(PROFILE_PARAM)
    except (TypeError, ValueError, AttributeError):
        return False
    return given not in (None, "real")


def degenerate_flags(trials: pd.DataFrame) -> pd.DataFrame:
    """Arms (per workload) whose median distinct-token share is below DEGENERATE_SHARE; none without the column,
    none where every speculative arm ran at forced acceptance."""
    if "distinct_token_share" not in trials or not len(trials):
        return pd.DataFrame(columns=["workload", "arm", "distinct_token_share", "trials"])
    ok = trials[(trials.status == TrialStatus.OK)].assign(
        distinct_token_share=lambda f: pd.to_numeric(f.distinct_token_share, errors="coerce"))
    ok = ok.dropna(subset=["distinct_token_share"])
    # Forced (synthetic) acceptance does not read the text: only a workload where some arm speculates at its own
    # acceptance has an acceptance that degenerate text would mislead.
    forced = pd.Series([_forced(p, j) for p, j in zip(
        ok.spec_acceptance_profile if "spec_acceptance_profile" in ok else [None] * len(ok),
        ok.workload_params_json if "workload_params_json" in ok else [None] * len(ok))], index=ok.index, dtype=bool)
    real_spec = ok[(ok.k > 0) & ~forced] if "k" in ok else ok[~forced]
    ok = ok[~forced & ok.workload.isin(set(real_spec.workload))]
    rows = []
    for (workload, arm), group in ok.groupby(["workload", "arm"], sort=False):
        share = float(group.distinct_token_share.median())
        if share < DEGENERATE_SHARE:
            rows.append({"workload": workload, "arm": arm, "distinct_token_share": share, "trials": len(group)})
    return pd.DataFrame(rows, columns=["workload", "arm", "distinct_token_share", "trials"])


def device_bandwidth(device_name) -> float | None:
    name = str(device_name or "")
    for pattern, bandwidth in KNOWN_BANDWIDTH:
        if pattern.lower() in name.lower():
            return bandwidth
    return None


def bandwidth_shares(points: pd.DataFrame, engines: pd.DataFrame, *,
                     bandwidth_override: float | None = None) -> pd.DataFrame:
    """Decode speed per session as a share of the bound of reading all weights once per token.

    At any batch size a decode step reads the weights once for all sessions, so the per-session bound is
    bandwidth / weight bytes. Speculative decoding emits more than one token per read, so its share can
    pass 100%: it is a yardstick, not a ceiling.
    """
    from runner.report.samples import deciding_metric

    decode = points[np.array([deciding_metric(w).unit == "tok/s" for w in points.workload], dtype=bool)]
    ok_engines = engines[engines.status == EngineStatus.OK] if len(engines) else engines
    rows = []
    for _, p in decode.iterrows():
        engine = ok_engines[(ok_engines.arm == p.arm)]
        if not len(engine):
            continue
        engine = engine.iloc[0]
        bandwidth = bandwidth_override or device_bandwidth(engine.device_name)
        weights = engine.weights_gib
        bound = bandwidth / (weights * 2**30) if bandwidth and weights and weights > 0 else None
        rows.append({"workload": p.workload, "workload_params_json": p.workload_params_json,
                     "concurrency": p.concurrency, "arm": p.arm, "device": engine.device_name,
                     "bandwidth_tb_s": bandwidth / 1e12 if bandwidth else None, "weights_gib": weights,
                     "tok_s": p["median"], "bound_tok_s": bound,
                     "share": p["median"] / bound if bound else None})
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "concurrency", "arm", "device",
                                       "bandwidth_tb_s", "weights_gib", "tok_s", "bound_tok_s", "share"])
