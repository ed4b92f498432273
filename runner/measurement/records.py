"""Turn one trial's request results and counter deltas into schema rows. Pure."""
from __future__ import annotations

import dataclasses
from typing import Sequence

from runner.measurement.arrivals import lag_columns, offered_rate
from runner.measurement.latency import (chunk_gaps, combine_hashes, distinct_token_share, e2e, hash_tokens,
                                        trial_latency_summary, tpot, ttft)
from runner.measurement.workloads.base import RequestResult
from runner.schema import EngineSettings, RequestRecord, TrialRecord, TrialStatus
from runner.slo import Slo


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunKeys:
    sweep: str
    run_id: str


def request_rows(*, keys: RunKeys, trial_id: str, engine_id: str, results: Sequence[RequestResult],
                 t0: float = 0.0, keep_token_ids: bool = True) -> list[RequestRecord]:
    """One row per request; `t0` is the trial's start on the same clock as the timelines."""
    rows = []
    for i, r in enumerate(results):
        t = r.timeline
        columns = {f.name: getattr(r, f.name) for f in dataclasses.fields(RequestRecord)}
        columns.update(
            sweep=keys.sweep, run_id=keys.run_id, trial_id=trial_id, engine_id=engine_id, request_index=i,
            output_tokens=t.output_tokens, start_offset_s=t.sent_at - t0 if t0 else 0.0, ttft_s=ttft(t),
            e2e_s=e2e(t), tpot_s=tpot(t), itl_s=chunk_gaps(t), chunk_sizes=list(t.chunk_sizes),
            spec_accepted_per_position=list(r.spec_accepted_per_position),
            output_hash=hash_tokens(r.output_token_ids),
            output_token_ids=list(r.output_token_ids) if keep_token_ids else [],
        )
        rows.append(RequestRecord(**columns))
    return rows


def trial_row(*, keys: RunKeys, trial, settings: EngineSettings, results: Sequence[RequestResult],
              measured_phases: Sequence[str], wall_s: float, started_at: float, counter_deltas: dict,
              kv_usage_peak: float | None, slo: Slo = Slo(), attempts: int = 1,
              arrival_columns: dict | None = None, **columns) -> TrialRecord:
    """`counter_deltas` must cover the measured requests only (the workload's measure window);
    `arrival_columns` are the params' (WorkloadParams.arrival_columns); `columns` are the actor's own figures
    (warm-up time, GC pauses)."""
    measured = [r for r in results if r.phase in measured_phases] or list(results)
    cached = [r.cached_tokens for r in measured if r.cached_tokens is not None]
    scheduled = [r.timeline.sent_at for r in measured if r.send_lag_s is not None]
    arrival = dict(arrival_columns or {"arrival": "closed"})
    if arrival.get("arrival", "closed") != "closed" and arrival.get("offered_rate_req_s") is None:
        arrival["offered_rate_req_s"] = offered_rate(scheduled)  # a trace's own rate
    return TrialRecord(
        **dataclasses.asdict(settings),
        sweep=keys.sweep, run_id=keys.run_id, trial_id=trial.trial_id, engine_id=trial.engine_id,
        workload=trial.workload, workload_params_json=trial.params_json, api=trial.api,
        concurrency=trial.concurrency, repeat=trial.repeat, status=TrialStatus.OK, attempts=attempts,
        started_at=started_at, wall_s=wall_s, num_requests=len(measured),
        prompt_tokens_total=sum(r.prompt_tokens for r in measured),
        prompt_rendering="+".join(sorted({r.prompt_rendering for r in measured})) or None,
        clipped_requests=sum(1 for r in measured if r.prompt_clipped_tokens),
        cached_tokens_total=sum(cached) if cached else None,
        kv_usage_peak=kv_usage_peak,
        distinct_token_share=distinct_token_share([r.output_token_ids for r in measured]),
        output_hash=combine_hashes([hash_tokens(r.output_token_ids) for r in measured]),
        **trial_latency_summary([r.timeline for r in measured], slo=slo),
        **lag_columns(lags=[r.send_lag_s for r in measured], slot_waits=[r.slot_wait_s for r in measured]),
        **arrival,
        **counter_deltas,
        **columns,
    )


def failed_trial_row(*, keys: RunKeys, trial, settings: EngineSettings, kind: str, reason: str,
                     attempts: int = 1) -> TrialRecord:
    return TrialRecord(
        **dataclasses.asdict(settings),
        sweep=keys.sweep, run_id=keys.run_id, trial_id=trial.trial_id, engine_id=trial.engine_id,
        workload=trial.workload, workload_params_json=trial.params_json, api=trial.api,
        concurrency=trial.concurrency, repeat=trial.repeat, status=TrialStatus.FAILED, failure_kind=kind,
        failure_reason=reason, attempts=attempts,
    )
