"""One in-process vLLM `AsyncLLM`: start, stream requests with client timestamps, read capacity."""
from __future__ import annotations

import itertools
import json
import os
import socket
import time
from typing import Callable, Optional

from runner.measurement.latency import Timeline
from runner.measurement.sampling import GREEDY, Sampling
from runner.measurement.workloads.base import RequestResult
from runner.models.source import ModelSource
from runner.plan.grid import EngineConfig
from runner.vllm import draft_count as vllm_draft_count
from runner.vllm import engine as vllm_engine
from runner.vllm.device import is_cpu
from runner.vllm.outputs import engine_side, token_times


def engine_kwargs(*, engine: EngineConfig, model: ModelSource) -> dict:
    """The keyword arguments for vLLM's `AsyncEngineArgs`: the plan's (runner.plan.vllm_args), with the model's
    folder on this node."""
    if engine.vllm_args is None:
        raise ValueError(f"engine {engine.engine_id} carries no vLLM arguments (fix: plan it with "
                         f"runner.plan.grid.build_plan)")
    return engine.vllm_args.located(path=model.path, tokenizer=model.tokenizer,
                                    load_format=model.load_format).as_dict()


def ran_columns(kwargs: dict, engine: EngineConfig) -> dict:
    """The engine row's record of its arguments: all it ran, and what the runner added for this vLLM."""
    return {"vllm_args_json": json.dumps(kwargs, sort_keys=True, separators=(",", ":")),
            "added_engine_args_json": engine.vllm_args.added_json}


def per_request_spec_status(kwargs: dict) -> str:
    """What the engine row says about per-request acceptance (the reason when requests carry none)."""
    if "speculative_config" not in kwargs:
        return "none: no speculative decoding"
    level = kwargs.get("per_request_spec_decode_metrics")
    if level and level != "none":
        return level
    if not vllm_engine.per_request_spec_supported():
        return f"unavailable: vLLM {vllm_engine.vllm_version()} has no per_request_spec_decode_metrics"
    return "off: per_request_spec_decode_metrics=none"


class EngineHost:
    """Owns one AsyncLLM for its whole life; all calls come from one event loop."""

    def __init__(self, *, engine: EngineConfig, model: ModelSource):
        self.config = engine
        self.model = model
        self.max_model_len = engine.settings.max_model_len
        self.vocab_size = model.vocab_size
        self.first_token_id = model.first_token_id
        self.tokenizer_source = model.tokenizer or model.path  # what text prompts are tokenized with
        self._llm = None
        self._tokenizer = None
        self._ids = itertools.count()
        self.in_flight: set[str] = set()
        # Requests this host saw finish: a measure window waits until vLLM's counters have counted them all.
        self.finished_requests = 0
        self.request_seeds = True  # see _seed
        # Engine arguments the runner added for the installed vLLM (JSON; None: none), for a failed start's row.
        self.added_engine_args: Optional[str] = engine.vllm_args.added_json if engine.vllm_args else None
        # The GPUs' UUIDs, one per worker (tensor-parallel rank), as the workers report them; None: not said.
        self.device_uuids: Optional[list] = None

    async def start(self) -> dict:
        """Loads the engine; returns the engine-record columns it can fill."""
        from runner.execution.step_logger import StepLogger

        kwargs = engine_kwargs(engine=self.config, model=self.model)
        started = time.perf_counter()
        self._llm = vllm_engine.start_async(kwargs, stat_loggers=[StepLogger])
        load_s = time.perf_counter() - started
        self._check_request_seeds()
        if not self.vocab_size:
            self.vocab_size = self._vllm_config().model_config.get_vocab_size()
        return {"load_s": load_s, **self._capacity(), **await self._memory(), "api": "async",
                "per_request_spec_metrics": per_request_spec_status(kwargs), **ran_columns(kwargs, self.config)}

    def _vllm_config(self):
        return vllm_engine.engine_config(self._llm)

    def _check_request_seeds(self) -> None:
        # vLLM's CPU runner cannot rewind a request's seeded generator when it discards a partial prefill's
        # sample (RuntimeError "CPU Generator does not use offset"): there, sampled requests draw from the
        # engine's own seeded stream instead of a seed each.
        self.request_seeds = not is_cpu()

    def _seed(self, seed: int, sampling: Sampling):
        return seed if self.request_seeds or sampling.greedy else None

    async def _rpc(self, method: str):
        return await self._llm.collective_rpc(method)

    def _capacity(self) -> dict:
        return {**vllm_engine.capacity(self._vllm_config(), max_model_len=self.max_model_len),
                "vllm_version": vllm_engine.vllm_version(), "hostname": socket.gethostname()}

    async def _memory(self) -> dict:
        try:
            reports = await self._rpc("runner_memory_report")
        except Exception as exc:  # a figure we cannot read must not fail the engine
            return {"memory_source": f"unavailable: {type(exc).__name__}: {exc}"[:300]}
        first = reports[0] if reports else {}
        self.device_uuids = [r.get("device_uuid") for r in reports] or None
        return {
            "weights_gib": first.get("weights_gib"),
            "kv_budget_gib": first.get("kv_budget_gib"),
            "memory_source": first.get("source"),
            "device_name": first.get("device_name"),
            "device_kind": first.get("device_kind"),
        }

    async def stream(self, *, prompt_token_ids: list[int], max_tokens: int, session: int = 0, turn: int = 0,
                     phase: str = "measured", ignore_eos: bool = True, seed: int = 0,
                     sampling: Sampling = GREEDY, scheduled_at: Optional[float] = None,
                     on_first_token: Optional[Callable[[float], None]] = None) -> RequestResult:
        params = vllm_engine.sampling_params(stream=True, max_tokens=max_tokens, ignore_eos=ignore_eos,
                                             seed=self._seed(seed, sampling), **sampling.params())
        sent = time.perf_counter()
        # Open loop: latency counts from the scheduled send, so a late client shows instead of hiding.
        timeline = Timeline(sent_at=sent if scheduled_at is None else scheduled_at)
        token_ids: list[int] = []
        final = None
        request_id = f"r{next(self._ids)}-{os.getpid()}"
        self.in_flight.add(request_id)
        try:
            async for out in self._llm.generate({"prompt_token_ids": prompt_token_ids}, params, request_id):
                now = time.perf_counter()
                completion = out.outputs[0]
                if on_first_token is not None and not timeline.chunk_times and completion.token_ids:
                    on_first_token(now)
                timeline.add_chunk(at=now, tokens=len(completion.token_ids))
                token_ids.extend(completion.token_ids)
                final = out
        finally:
            self.in_flight.discard(request_id)
        if final is not None and final.finished:
            self.finished_requests += 1
        return RequestResult(timeline=timeline, prompt_tokens=len(prompt_token_ids), output_token_ids=token_ids,
                             session=session, turn=turn, phase=phase,
                             send_lag_s=None if scheduled_at is None else sent - scheduled_at, **engine_side(final))

    async def set_draft(self, ranges) -> dict:
        """The engine core's per-step draft count (runner.vllm.draft_count), between trials."""
        return await vllm_draft_count.set_async(self._llm, ranges)

    async def abort_in_flight(self) -> int:
        """Aborts every request still running (a failed workload's leftovers); returns how many."""
        ids = list(self.in_flight)
        if ids:
            await self._llm.abort(ids)
        return len(ids)

    async def reset_prefix_cache(self) -> Optional[bool]:
        """vLLM's answer: False while requests still hold blocks; None where this vLLM does not say."""
        return await self._llm.reset_prefix_cache()

    def _hf_tokenizer(self):
        if self._tokenizer is None:
            from runner.traffic.chat import load_tokenizer

            self._tokenizer = load_tokenizer(self.model.tokenizer or self.model.path)
        return self._tokenizer

    def encode_text(self, text: str) -> list[int]:
        """Text → token ids with the model's tokenizer (for text prompt sources), no special tokens."""
        return list(self._hf_tokenizer().encode(text, add_special_tokens=False))

    def chat_renderer(self, mode: str):
        """The model's tokenizer rendering conversations under a workload's `chat_template` setting."""
        from runner.traffic.chat import ChatRenderer

        return ChatRenderer(self._hf_tokenizer(), mode)

    async def generate_batch(self, **_) -> list[RequestResult]:
        raise NotImplementedError("batches run on the offline host (workload param api: offline)")

    def shutdown(self) -> None:
        if self._llm is not None:
            self._llm.shutdown()  # the actor wakes an asleep engine first (cumem_allocator.cpp:235)
            self._llm = None

    # ---- sleep mode (CUDA, engines resident between turns): AsyncLLM and LLM, vLLM 0.26 and 0.32 ----
    _asleep = False

    async def sleep(self) -> float:
        started = time.perf_counter()
        await _maybe_await(self._llm.sleep(level=1))  # 0.32 adds mode=; level alone works on both
        self._asleep = True
        return time.perf_counter() - started

    async def wake_up(self) -> float:
        started = time.perf_counter()
        await _maybe_await(self._llm.wake_up())  # 0.32 returns whether fully awake, 0.26 None
        self._asleep = False
        return time.perf_counter() - started

    async def is_sleeping(self) -> bool:
        return bool(await _maybe_await(vllm_engine.sleep_target(self._llm).is_sleeping()))


class OfflineEngineHost(EngineHost):
    """Owns one `LLM` (vLLM's offline API): a workload hands it a whole batch at once.

    `api` is part of the engine's identity (one engine per process, and an actor
    hosts either an AsyncLLM or an LLM); the plan gives offline trials their own engine.
    """

    async def start(self) -> dict:
        from runner.execution.step_logger import StepLogger

        kwargs = engine_kwargs(engine=self.config, model=self.model)
        started = time.perf_counter()
        self._llm = vllm_engine.start_offline(kwargs)
        load_s = time.perf_counter() - started
        self._check_request_seeds()
        vllm_engine.add_stat_logger(self._llm, StepLogger())
        if not self.vocab_size:
            self.vocab_size = self._vllm_config().model_config.get_vocab_size()
        return {"load_s": load_s, **self._capacity(), **await self._memory(), "api": "offline",
                "per_request_spec_metrics": per_request_spec_status(kwargs), **ran_columns(kwargs, self.config)}

    async def _rpc(self, method: str):
        return self._llm.collective_rpc(method)  # synchronous on LLM

    async def stream(self, **_) -> RequestResult:
        raise NotImplementedError("the offline host runs batches only (workload param api: async streams)")

    async def generate_batch(self, *, prompts: list[list[int]], max_tokens: int, sessions: list[int],
                             phase: str = "measured", ignore_eos: bool = True, seed: int = 0,
                             sampling: Sampling = GREEDY) -> list[RequestResult]:
        """One `LLM.generate` over all prompts. No streaming: each request's timeline is its engine-side
        first and last token times (the engine core's monotonic clock, the same clock as perf_counter on
        Linux), measured from the batch's start; outside that window, the batch's end is used."""
        import asyncio

        params = vllm_engine.sampling_params(stream=False, max_tokens=max_tokens, ignore_eos=ignore_eos,
                                             seed=self._seed(seed, sampling), **sampling.params())
        inputs = [{"prompt_token_ids": p} for p in prompts]
        sent_at = time.perf_counter()
        # A worker thread keeps the actor's event loop (KV usage sampling) running during the batch.
        outputs = await asyncio.to_thread(self._llm.generate, inputs, params, use_tqdm=False)
        done_at = time.perf_counter()
        self.finished_requests += sum(1 for out in outputs if out.finished)
        results = []
        for prompt, session, out in zip(prompts, sessions, outputs):
            token_ids = list(out.outputs[0].token_ids)
            results.append(RequestResult(
                timeline=_batch_timeline(sent_at=sent_at, done_at=done_at, times=token_times(out),
                                         tokens=len(token_ids)),
                prompt_tokens=len(prompt), output_token_ids=token_ids, session=session, phase=phase,
                **engine_side(out)))
        return results

    async def set_draft(self, ranges) -> dict:
        return vllm_draft_count.set_offline(self._llm, ranges)

    async def abort_in_flight(self) -> int:
        return 0  # a batch is one blocking call: nothing of it outlives a failure

    async def reset_prefix_cache(self) -> Optional[bool]:
        return self._llm.reset_prefix_cache()

    def shutdown(self) -> None:
        if self._llm is not None:
            if self._asleep:
                try:
                    self._llm.wake_up()
                except Exception as exc:  # shut down all the same; the engine's log says why it went down asleep
                    print(f"runner: the wake before shutdown failed ({type(exc).__name__}: {exc}); shutting the "
                          f"engine down asleep", flush=True)
            vllm_engine.shutdown_offline(self._llm)
            self._llm = None


def _batch_timeline(*, sent_at: float, done_at: float, times: tuple, tokens: int) -> Timeline:
    timeline = Timeline(sent_at=sent_at)
    first = times[0] or done_at
    last = times[1] or done_at
    if not sent_at <= first <= last <= done_at + 1.0:
        first = last = done_at
    timeline.add_chunk(at=first, tokens=min(tokens, 1))
    timeline.add_chunk(at=last, tokens=tokens - 1)
    return timeline


async def _maybe_await(value):
    import inspect

    return await value if inspect.isawaitable(value) else value


def host_class(api: str) -> type[EngineHost]:
    hosts = {"async": EngineHost, "offline": OfflineEngineHost}
    try:
        return hosts[api]
    except KeyError:
        raise ValueError(f"unknown api {api!r}; valid: {', '.join(hosts)} (fix: workload.<name>.api=async)") from None
