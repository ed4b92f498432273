"""What a workload is: typed params, a size check, and an async driver of requests."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Protocol

from runner.measurement.latency import Timeline
from runner.schema import RequestRecord

if TYPE_CHECKING:
    from runner.traffic.chat import ChatRenderer
    from runner.measurement.sampling import Sampling
from runner.numerics.deciding import (  # noqa: F401  (re-exported: each workload names its metric)
    DECODE_SPEED, DECODE_SPEED_PER_RUN, FIRST_REQUEST_TTFT_P50, REPEAT_TTFT_P50, TTFT_P50, TURN2_TTFT_P50,
    DecidingMetric)


SHORT_PROMPT_TOKENS = 128  # a light warm-up's short pass: prompt tokens per length field
SHORT_OUTPUT_TOKENS = 8


@dataclass(kw_only=True)
class RequestResult(RequestRecord):
    """One request as the engine's host returns it: its row (the schema's RequestRecord: what the engine reported,
    the client's lags, the prompt set's category) before the trial's keys and the timing columns, which
    runner.measurement.records derives from this client-side timeline."""

    timeline: Timeline


class Engine(Protocol):
    """The engine as a workload sees it (see runner.execution.engine.EngineHost)."""

    max_model_len: int
    vocab_size: int
    first_token_id: int

    async def stream(self, *, prompt_token_ids: list[int], max_tokens: int, session: int = 0, turn: int = 0,
                     phase: str = "measured", ignore_eos: bool = True, seed: int = 0,
                     sampling: Optional[Sampling] = None, scheduled_at: Optional[float] = None,
                     on_first_token: Optional[Callable[[float], None]] = None) -> RequestResult:
        """`scheduled_at` (perf_counter): the request's timeline starts there and its lag is recorded;
        `on_first_token(at)` is called when its first token arrives (an open-loop probe's stop rule)."""
        ...

    async def reset_prefix_cache(self) -> None: ...

    def encode_text(self, text: str) -> list[int]: ...

    def chat_renderer(self, mode: str) -> "ChatRenderer":
        """The model's tokenizer under a `chat_template` setting (runner.traffic.chat)."""
        ...

    async def generate_batch(self, *, prompts: list[list[int]], max_tokens: int, sessions: list[int],
                             phase: str = "measured", ignore_eos: bool = True, seed: int = 0,
                             sampling: Optional[Sampling] = None) -> list[RequestResult]: ...


@dataclass(kw_only=True)
class WorkloadParams:
    """Common params; each workload subclasses with its own fields and defaults."""

    seed: int = 0
    # Where prompt tokens come from (see runner.measurement.prompts): synthetic | corpus | jsonl.
    prompt_source: str = "synthetic"
    prompt_file: Optional[str] = None
    # Sampling (runner.measurement.sampling): temperature 0 = greedy, the only setting under which arms' outputs
    # compare; the penalties are vLLM's and keep greedy output deterministic.
    temperature: float = 0.0
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    # Integer fields that may be 0 (all others must be ≥ 1).
    zero_allowed: ClassVar[tuple[str, ...]] = ("seed",)
    # Number fields that are no count (a rate): the class checks them itself.
    not_counts: ClassVar[tuple[str, ...]] = ()

    def max_sequence_tokens(self) -> int:
        """The longest prompt + output any request of this workload may need."""
        raise NotImplementedError

    def sequence_tokens_at(self, max_model_len: int) -> int:
        """The longest prompt + output sent to an engine of `max_model_len`: less than max_sequence_tokens() where
        the workload skips or clips what does not fit (a trace's over_length setting)."""
        return self.max_sequence_tokens()

    def over_length_error(self, max_model_len: int) -> Optional[str]:
        """Why this workload does not fit `max_model_len`, naming its own sizes and the fix (None: the generic
        message)."""
        return None

    def source_columns(self, *, max_model_len: int) -> dict:
        """Trial columns about the workload's data file (runner.schema.TrialRecord): what of it was skipped or
        clipped on an engine of `max_model_len`."""
        return {}

    def tokens_decoded_in_turn(self) -> int:
        """Output tokens one session decodes one after another (each a decode step of the batch): with the
        prompt tokens, what a run's length goes by on a GPU, where a decode step costs as much as hundreds of
        prefill tokens."""
        return int(getattr(self, "output_len", 0) or 0)

    def with_prompts(self, tokenizer) -> "WorkloadParams":
        """The params as the driver ships them to the actors: data files read, prompts measured with the model's
        tokenizer (runner.traffic.chat). Default: as they are."""
        return self

    def payload(self) -> Any:
        """What with_prompts read on the driver for the actors (None: nothing): shipped once per node."""
        return None

    def with_payload(self, payload) -> "WorkloadParams":
        """The params carrying `payload` (the same data, or its runner.measurement.shipped.ObjectStoreRef)."""
        return self

    def prompt_problems(self, *, tokenizer, max_model_lens: list[int]) -> list[str]:
        """Prompts that do not fit each max_model_len (after templating), each with its place and the fix."""
        return []

    def validate(self) -> list[str]:
        """Messages for values no run can use (sizes below one, …)."""
        errors = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.not_counts:
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                if f.name in self.zero_allowed and value < 0:
                    errors.append(f"{f.name}={value} must be ≥ 0")
                elif f.name not in self.zero_allowed and value < 1:
                    errors.append(f"{f.name}={value} must be ≥ 1")
        if not (isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 10):
            errors.append(f"temperature={self.temperature!r} must be a number in [0, 10] (0: greedy)")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            errors.append(f"top_p={self.top_p!r} must be in (0, 1]")
        for name in ("presence_penalty", "frequency_penalty"):
            if not (isinstance(getattr(self, name), (int, float)) and -2 <= getattr(self, name) <= 2):
                errors.append(f"{name}={getattr(self, name)!r} must be in [-2, 2] (vLLM's range)")
        if not (isinstance(self.repetition_penalty, (int, float)) and 0 < self.repetition_penalty <= 2):
            errors.append(f"repetition_penalty={self.repetition_penalty!r} must be in (0, 2]")
        from runner.measurement.prompts import check_prompt_source

        errors.extend(check_prompt_source(source=self.prompt_source, prompt_file=self.prompt_file))
        return errors

    def measured_phases(self) -> tuple[str, ...]:
        """Request phases that count toward the trial's latency figures."""
        return ("measured",)

    def warmup_variant(self) -> "WorkloadParams":
        """The params of this shape's unmeasured warm-up run (the same, unless a workload says otherwise)."""
        return self

    # Prompt-length fields a short warm-up pass caps (execution.warmup=light).
    length_fields: ClassVar[tuple[str, ...]] = ()

    def point_variant(self) -> "WorkloadParams":
        """A light warm-up's pass at a new workload point: the warm-up variant's prompts at full length with
        SHORT_OUTPUT_TOKENS out (the point's prefill, chunking and cache paths; the decode steps are the same
        at any output length)."""
        warm = self.warmup_variant()
        if isinstance(getattr(warm, "output_len", None), int):
            return dataclasses.replace(warm, output_len=min(warm.output_len, SHORT_OUTPUT_TOKENS))
        return warm

    def short_variant(self) -> "WorkloadParams":
        """A short pass at a new batch size: the point variant with prompts capped at SHORT_PROMPT_TOKENS (the
        batch's decode and scheduling paths, not a second full prefill)."""
        warm = self.point_variant()
        capped = {name: min(getattr(warm, name) or SHORT_PROMPT_TOKENS, SHORT_PROMPT_TOKENS)
                  for name in self.length_fields}
        return dataclasses.replace(warm, **capped)

    def arrival_columns(self) -> dict:
        """The trial's arrival columns (runner.schema.TrialRecord): how its requests arrived."""
        return {"arrival": "closed"}

    def trial_concurrency(self, grid_level: int) -> int:
        """The trial's concurrency at a grid level: closed-loop sessions; an open-loop workload records its
        max_concurrency cap instead (0: none), the grid's concurrency axis being no part of it."""
        return grid_level


class MeasureWindow(Protocol):
    """Brackets a workload's measured requests, so that engine counters (prefix-cache hits, speculative
    acceptance) cover those requests only: cold phases, warm-up prefixes and warm-up runs stay outside.
    A workload calls `begin()` once its prompts are built and its unmeasured phases are done, `end()` when
    its measured requests have finished; one that calls neither is measured whole."""

    async def begin(self) -> None: ...

    async def end(self) -> None: ...


class WholeRun:
    """The window of a caller that takes no counters (tests, warm-ups)."""

    async def begin(self) -> None:
        return None

    async def end(self) -> None:
        return None


@dataclass(kw_only=True)
class TrialContext:
    engine: Engine
    concurrency: int
    repeat: int
    params: WorkloadParams
    # "async": requests streamed through AsyncLLM; "offline": one LLM.generate batch.
    api: str = "async"
    window: MeasureWindow = field(default_factory=WholeRun)
    # An open-loop probe's monitor (runner.measurement.workloads.open_loop.ProbeMonitor): judges it against the
    # TTFT target and may stop its sends; None: not judged.
    probe: Any = None

    @property
    def seed(self) -> int:
        # A repeat must not reuse the prompts of the one before (cold means cold).
        return self.params.seed * 1_000_003 + self.repeat


class Workload:
    name: ClassVar[str]
    params_type: ClassVar[type[WorkloadParams]]
    description: ClassVar[str] = ""
    # The engine APIs this workload can drive (a workload's `api` param picks one).
    apis: ClassVar[tuple[str, ...]] = ("async",)
    # The figure that decides this workload in reports and races (and its direction).
    deciding: ClassVar[DecidingMetric]

    @classmethod
    def parse_params(cls, raw: dict[str, Any]) -> WorkloadParams:
        names = {f.name for f in dataclasses.fields(cls.params_type) if not f.name.startswith("_")}  # _: driver's
        unknown = sorted(set(raw) - names)
        if unknown:
            raise ValueError(
                f"workload {cls.name!r} has no parameter {unknown[0]!r}; valid: {', '.join(sorted(names))} "
                f"(fix: remove or rename workload.{cls.name}.{unknown[0]})"
            )
        return cls.params_type(**raw)

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        raise NotImplementedError
