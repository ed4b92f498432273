"""The one result schema: per request, per trial, per engine.

Every sink (Parquet, W&B) and every report derives its columns from these
dataclasses; nothing else declares a result column. Optional fields are
nullable; lists become Arrow list columns.

The states a column holds are the StrEnums below, defined once: a record's column stays a str (its Arrow type),
set from the enum; a StrEnum member equals its string, so frames read back from Parquet (plain strings)
compare with `frame.status == TrialStatus.OK`. Their values are what is on disk: never rename one.
"""
from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass, field
from typing import Optional

from runner.spec_arm import SpecArm

SCHEMA_VERSION = 1


class EngineStatus(enum.StrEnum):
    """engines.status: the engine loaded, or its start failed (failure_kind says why)."""

    OK = "ok"
    FAILED = "failed"


class TrialStatus(enum.StrEnum):
    """trials.status."""

    OK = "ok"
    FAILED = "failed"  # failure_kind says why (engine_start_failure(...) when its engine did not start)
    SKIPPED = "skipped"  # the race or a settled point stopped it (failure_kind RACE_ELIMINATED or CONVERGED):
    # neither a result nor a failure


class Phase(enum.StrEnum):
    """phases.phase: a span of a device lane's time (PhaseRecord); also the scheduler's lane state."""

    LAUNCH = "launch"  # lane -1: the command's process start to the first engine actor
    PREPARE = "prepare"  # process, imports, device context
    START = "start"  # the engine loads
    WAKE = "wake"
    TRIAL = "trial"
    SLEEP = "sleep"
    PRELOAD = "preload"  # waiting for engines loading beside this lane's own before its trials start (CPU)
    IDLE = "idle"  # no call in flight: the scheduler's lane state only, never a span


# ---- failure kinds (failure_kind) -----------------------------------------------------------------
RACE_ELIMINATED = "race_eliminated"  # a trial the race stopped (status SKIPPED)
CONVERGED = "converged"  # a repeat not taken: its point's decision had settled (sweep.converge; status SKIPPED)
_ENGINE_START = "engine_start:"


def engine_start_failure(engine_kind: str) -> str:
    """A trial's failure_kind when its engine did not start: `engine_start:<the engine's failure_kind>`."""
    return f"{_ENGINE_START}{engine_kind}"


def engine_start_cause(failure_kind) -> Optional[str]:
    """The engine's failure_kind behind a trial's engine_start_failure(...); None for any other kind."""
    if isinstance(failure_kind, str) and failure_kind.startswith(_ENGINE_START):
        return failure_kind[len(_ENGINE_START):]
    return None


@dataclass(kw_only=True)
class EngineSettings:
    """What makes two trials share one engine load (the engine's identity)."""

    model: str
    spec_method: str = "off"
    num_speculative_tokens: int = 0
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 2048
    tensor_parallel_size: int = 1
    # Everything else passed through to vLLM, as canonical JSON.
    engine_args_json: str = "{}"
    # A draft-count schedule ([[start, end, k], ...] as JSON; num_speculative_tokens is its largest k), or null:
    # the same k at every step.
    spec_schedule: Optional[str] = None
    # Synthetic per-position acceptance rates the engine was forced to (JSON, written for the largest k; an
    # engine drafting k used the first k), or null: the model's own acceptance.
    spec_acceptance_profile: Optional[str] = None

    @property
    def spec(self) -> SpecArm:
        """The speculative arm (method, k) of these settings."""
        return SpecArm.of(self.spec_method, self.num_speculative_tokens)


@dataclass(kw_only=True)
class EngineRecord(EngineSettings):
    sweep: str
    run_id: str
    engine_id: str
    status: str  # an EngineStatus
    failure_kind: Optional[str] = None
    failure_reason: Optional[str] = None
    failure_numbers_json: Optional[str] = None
    load_s: Optional[float] = None
    kv_capacity_tokens: Optional[int] = None
    num_kv_blocks: Optional[int] = None
    block_size: Optional[int] = None
    max_concurrency_at_max_len: Optional[float] = None
    weights_gib: Optional[float] = None
    kv_budget_gib: Optional[float] = None
    memory_source: Optional[str] = None
    vllm_version: Optional[str] = None
    device_name: Optional[str] = None
    device_kind: Optional[str] = None
    hostname: Optional[str] = None
    log_file: Optional[str] = None
    started_at: Optional[float] = None
    # "async" (AsyncLLM, streamed) or "offline" (LLM.generate batches): part of the engine's identity.
    api: Optional[str] = None
    # Per-request acceptance: the vLLM option in use ("summary"), or why requests carry none.
    per_request_spec_metrics: Optional[str] = None
    # How vLLM's engine-core process was started in the actor: "spawn" or "forkserver" (execution.engine_start).
    engine_start: Optional[str] = None
    # Engine arguments the runner added for the installed vLLM (JSON), e.g. PIECEWISE CUDA graphs for a
    # draft-count schedule on a vLLM that does not switch to them itself; null: none.
    added_engine_args_json: Optional[str] = None
    # Every argument the engine was started with (JSON, keys sorted), as the plan built them (runner.plan.vllm_args)
    # with the model's folder on the node that loaded it; the recommendation reads them back. Null: it did not start.
    vllm_args_json: Optional[str] = None
    # Woken from the engine pool (execution.keep_engines) instead of loaded: load_s is null, the `start` span a wake.
    reused_from_pool: bool = False
    # Engines side by side on its GPU (cluster.engines_per_gpu), each with its own share of it.
    engines_on_device: int = 1
    # A start on a shared GPU that failed for memory and was retried: the first failure ("kind: reason").
    start_retried_after: Optional[str] = None


@dataclass(kw_only=True)
class TrialRecord(EngineSettings):
    sweep: str
    run_id: str
    trial_id: str
    engine_id: str
    workload: str
    workload_params_json: str
    api: str = "async"
    # The engine that ran it (engine_id) was loaded at this k; num_speculative_tokens and spec_schedule are what
    # the trial ran (a smaller k or a schedule set on the largest-k engine: draft_set_live). Null: rows before it.
    engine_num_speculative_tokens: Optional[int] = None
    draft_set_live: bool = False
    concurrency: int = 1
    # The engine's real batch size over the measure window (vLLM's running requests at each engine step, plus
    # those the step finished): what a dynamic draft-count schedule keys on, unlike the client's concurrency.
    engine_steps: Optional[int] = None  # engine steps that carried at least one request
    batch_size_mean: Optional[float] = None  # requests per step
    batch_size_p50: Optional[float] = None
    batch_size_max: Optional[int] = None
    repeat: int = 0
    status: str = TrialStatus.OK  # a TrialStatus
    failure_kind: Optional[str] = None
    failure_reason: Optional[str] = None
    attempts: int = 1
    # The interleaved round it ran in (= its repeat) and its index in the sweep's execution order (across resumes).
    round: Optional[int] = None
    position: Optional[int] = None
    # Engines that ran side by side on this trial's GPU (cluster.engines_per_gpu): above 1 its speed figures are
    # shared-device figures, not the engine's own speed.
    engines_on_device: int = 1
    started_at: Optional[float] = None
    # The measured requests' span: first measured request sent → its last token (throughput divides by it).
    duration_s: Optional[float] = None
    # The whole workload run: cold phases, warm-up prefixes and fixed_task's warm-up runs included.
    wall_s: Optional[float] = None
    # Unmeasured warm-up of this trial's shape on its engine just before it (0: shape already warm; null: off).
    warmup_s: Optional[float] = None
    # The warm-up mode the engine ran under (execution.warmup, `auto` resolved for the device).
    warmup: Optional[str] = None
    # The engine's first trial after a load or a pool wake runs twice with the same prompts and this row is the
    # second run; the first is in the `first_runs` table and took this many seconds (null: one run).
    first_run_s: Optional[float] = None
    num_requests: int = 0
    output_tokens_total: int = 0
    prompt_tokens_total: int = 0
    ttft_mean_s: Optional[float] = None
    ttft_p50_s: Optional[float] = None
    ttft_p90_s: Optional[float] = None
    ttft_p99_s: Optional[float] = None
    tpot_mean_s: Optional[float] = None
    tpot_p50_s: Optional[float] = None
    tpot_p90_s: Optional[float] = None
    tpot_p99_s: Optional[float] = None
    itl_mean_s: Optional[float] = None
    itl_p50_s: Optional[float] = None
    itl_p90_s: Optional[float] = None
    itl_p99_s: Optional[float] = None
    itl_token_mean_s: Optional[float] = None
    itl_token_p50_s: Optional[float] = None
    itl_token_p90_s: Optional[float] = None
    itl_token_p99_s: Optional[float] = None
    e2e_mean_s: Optional[float] = None
    e2e_p50_s: Optional[float] = None
    e2e_p90_s: Optional[float] = None
    e2e_p99_s: Optional[float] = None
    decode_tok_s_per_session: Optional[float] = None
    decode_tok_s_per_session_mean: Optional[float] = None
    decode_tok_s_aggregate: Optional[float] = None
    chunk_tokens_mean: Optional[float] = None
    chunk_tokens_p50: Optional[float] = None
    goodput_req_s: Optional[float] = None
    slo_attainment: Optional[float] = None
    spec_num_drafts: Optional[int] = None
    spec_num_draft_tokens: Optional[int] = None
    spec_num_accepted_tokens: Optional[int] = None
    spec_acceptance_rate: Optional[float] = None
    spec_mean_acceptance_length: Optional[float] = None
    spec_acceptance_per_position: list[float] = field(default_factory=list)
    prefix_cache_queries: Optional[int] = None
    prefix_cache_hits: Optional[int] = None
    prefix_cache_hit_rate: Optional[float] = None
    cached_tokens_total: Optional[int] = None
    num_preemptions: Optional[int] = None
    kv_usage_peak: Optional[float] = None
    # Python GC pauses in the actor's frontend during the trial (the heap is frozen after engine start).
    gc_pauses: Optional[int] = None
    gc_pause_total_ms: Optional[float] = None
    gc_pause_max_ms: Optional[float] = None
    distinct_token_share: Optional[float] = None
    output_hash: Optional[str] = None
    # How requests arrived (runner.measurement.arrivals): closed (sessions send when their last request finished),
    # poisson, gamma or trace; open loop offers `offered_rate_req_s` whatever the engine does.
    arrival: Optional[str] = None
    offered_rate_req_s: Optional[float] = None
    # Measured requests completed / duration_s (vLLM's request_throughput).
    request_throughput_req_s: Optional[float] = None
    # Open loop: how far sends ran behind their schedule (slot waits under max_concurrency excluded); a trial
    # whose p99 passed runner.measurement.arrivals.CLIENT_BEHIND_P99_S measured its client: client_behind.
    send_lag_p50_s: Optional[float] = None
    send_lag_p99_s: Optional[float] = None
    send_lag_max_s: Optional[float] = None
    client_behind: Optional[bool] = None
    # What of the workload's data file was not sent as recorded: requests over their limit skipped or clipped (a
    # trace's or a prompt set's `over_length`), and entries the reader skipped (a prompt file's null or
    # non-text messages, a trace's recorded failures). Null: the workload reads no file.
    over_length_skipped: Optional[int] = None
    over_length_clipped: Optional[int] = None
    source_skipped: Optional[int] = None
    # Open loop under a TTFT target (runner.numerics.rate_probe): the probe's verdict (met | missed |
    # undecided), the TTFT percentile's interval over the requests it sent (hi null: unbounded, too few requests),
    # the requests it planned, and why it stopped early (then its figures cover the requests sent up to the stop).
    probe_verdict: Optional[str] = None
    probe_ttft_lo_s: Optional[float] = None
    probe_ttft_hi_s: Optional[float] = None
    probe_planned_requests: Optional[int] = None
    probe_stop: Optional[str] = None
    # The measured requests' prompt_rendering values (joined with "+" where they differ), and how many of them
    # were clipped to fit (over_length=clip; the report names them in its caveats).
    prompt_rendering: Optional[str] = None
    clipped_requests: Optional[int] = None
    # The GPUs' energy over the measure window, summed over the engine's GPUs (runner.execution.energy; with
    # engines_on_device above 1 it is theirs together). Null with energy_unmeasured saying why (CPU, no NVML, a
    # window too short for the counter); energy_source: counter (NVML's total energy) or sampled (power readings).
    energy_j: Optional[float] = None
    power_mean_w: Optional[float] = None
    energy_per_output_token_j: Optional[float] = None
    power_idle_w: Optional[float] = None  # the idle engine's GPUs, read at its start
    energy_resolution_s: Optional[float] = None  # the counter's update interval (sampled: the sampling interval)
    energy_source: Optional[str] = None
    energy_gpus: Optional[int] = None
    energy_unmeasured: Optional[str] = None


@dataclass(kw_only=True)
class RequestRecord:
    """One request's row, declared once: the engine's host returns it without the trial's keys and timing
    columns (runner.measurement.workloads.base.RequestResult: this row and its client-side timeline), and
    runner.measurement.records.request_rows fills them in. The keys' defaults are for that first stage only."""

    sweep: str = ""
    run_id: str = ""
    trial_id: str = ""
    engine_id: str = ""
    request_index: int = 0
    session: int = 0
    turn: int = 0
    phase: str = "measured"  # e.g. "measured", "warmup", "cold", "repeat"
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: Optional[int] = None
    start_offset_s: float = 0.0
    ttft_s: Optional[float] = None
    e2e_s: Optional[float] = None
    tpot_s: Optional[float] = None
    # One gap per streamed chunk after the first (vLLM's ITL); chunk_sizes gives the tokens in each.
    itl_s: list[float] = field(default_factory=list)
    chunk_sizes: list[int] = field(default_factory=list)
    engine_queue_s: Optional[float] = None
    engine_ttft_s: Optional[float] = None
    spec_acceptance_rate: Optional[float] = None
    spec_mean_acceptance_length: Optional[float] = None
    spec_num_steps: Optional[int] = None
    spec_num_draft_tokens: Optional[int] = None
    spec_num_accepted_tokens: Optional[int] = None
    # Accepted drafts at each draft position over the request's verify steps (vLLM ≥ 0.32): divided by
    # spec_num_steps, vLLM's per-position acceptance for this request.
    spec_accepted_per_position: list[int] = field(default_factory=list)
    # Open loop: start_offset_s is the scheduled send and TTFT/E2E count from it; send_lag_s = actual − scheduled
    # send, slot_wait_s the part of it waiting for a max_concurrency slot.
    send_lag_s: Optional[float] = None
    slot_wait_s: Optional[float] = None
    # The prompt set's category of the request (prompt_set workload), e.g. MT-Bench's "coding".
    category: Optional[str] = None
    # What the prompt was rendered with (runner.traffic.chat.Rendering): chat_template (the tokenizer's, as a
    # chat request is) or raw (tokens as they are: synthetic prompts, chat_template=raw, a tokenizer without one).
    prompt_rendering: str = "raw"
    # Tokens cut from the front of the prompt to fit its limit (over_length=clip); 0: sent whole.
    prompt_clipped_tokens: int = 0
    output_hash: Optional[str] = None
    output_token_ids: list[int] = field(default_factory=list)
    error: Optional[str] = None


@dataclass(kw_only=True)
class PhaseRecord:
    """One span of a device lane's time, as the driver saw it: the sweep's timeline.

    `launch` (lane -1) runs from the command's process start to the first engine actor; on a lane, `prepare`
    (process, imports, device context), `start` (the engine loads; vLLM's own init is the engine's `load_s`),
    `wake`, `trial` (warm-up included: the trial's `warmup_s`), `sleep`. Time on a lane outside every span is
    the runner's: results written, teardown, the next call issued.
    """

    sweep: str
    run_id: str
    lane: int
    phase: str  # a Phase (never IDLE)
    engine_id: Optional[str] = None
    trial_id: Optional[str] = None
    round: Optional[int] = None
    started_at: float = 0.0  # epoch seconds
    duration_s: float = 0.0
    ok: bool = True
    # On a `start` span: vLLM's own init inside it (the engine's load_s of this load).
    load_s: Optional[float] = None


TABLES: dict[str, type] = {
    "engines": EngineRecord,
    "trials": TrialRecord,
    "requests": RequestRecord,
    "phases": PhaseRecord,
    # The first of two runs of each engine's first trial after a load (TrialRecord.first_run_s); no figure reads them.
    "first_runs": TrialRecord,
    "first_run_requests": RequestRecord,
}


def _arrow_type(type_text: str):
    import pyarrow as pa

    scalar = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    if type_text.startswith("list["):
        return pa.list_(scalar[type_text[5:-1]])
    return scalar[type_text]


def arrow_schema(record_type: type):
    """The Arrow schema of one table, derived from its dataclass."""
    import pyarrow as pa

    hints = typing.get_type_hints(record_type)
    fields = []
    for f in dataclasses.fields(record_type):
        fields.append(pa.field(f.name, _arrow_type(_hint_text(hints[f.name])), nullable=True))
    return pa.schema(fields, metadata={"schema_version": str(SCHEMA_VERSION)})


def _hint_text(hint) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return _hint_text(inner)
    if origin is list:
        return f"list[{args[0].__name__}]"
    return hint.__name__


def column_names(record_type: type) -> list[str]:
    return [f.name for f in dataclasses.fields(record_type)]
