"""One in-process vLLM `AsyncLLM`: start, stream requests with client timestamps, read capacity."""
from __future__ import annotations

import itertools
import os
import socket
import time
from typing import Optional

from runner.execution.spec_compat import with_version_compat
from runner.measurement.latency import Timeline
from runner.measurement.sampling import GREEDY, Sampling
from runner.measurement.workloads.base import RequestResult
from runner.models.source import ModelSource
from runner.plan.grid import EngineConfig
from runner.plan.spec_variants import speculative_config


def engine_kwargs(*, engine: EngineConfig, model: ModelSource) -> dict:
    """The keyword arguments for vLLM's `AsyncEngineArgs`."""
    s = engine.settings
    kwargs = dict(engine.engine_args)
    kwargs.update(
        model=model.path,
        tokenizer=model.tokenizer or model.path,
        load_format=model.load_format,
        max_model_len=s.max_model_len,
        gpu_memory_utilization=s.gpu_memory_utilization,
        enable_prefix_caching=s.enable_prefix_caching,
        tensor_parallel_size=s.tensor_parallel_size,
        disable_log_stats=False,
        worker_extension_cls="runner.execution.worker_probe.MemoryProbe",
    )
    spec = speculative_config(s, engine.spec_extra)
    if spec is not None:
        kwargs["speculative_config"] = spec
        if per_request_spec_supported():
            kwargs.setdefault("per_request_spec_decode_metrics", "summary")
    return kwargs


def per_request_spec_supported() -> bool:
    """vLLM ≥ 0.32 can report acceptance per finished request; 0.26 has no such engine argument."""
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    return any(f.name == "per_request_spec_decode_metrics" for f in dataclasses.fields(AsyncEngineArgs))


def per_request_spec_status(kwargs: dict) -> str:
    """What the engine row says about per-request acceptance (the reason when requests carry none)."""
    if "speculative_config" not in kwargs:
        return "none: no speculative decoding"
    level = kwargs.get("per_request_spec_decode_metrics")
    if level and level != "none":
        return level
    if not per_request_spec_supported():
        return f"unavailable: vLLM {vllm_version()} has no per_request_spec_decode_metrics"
    return "off: per_request_spec_decode_metrics=none"


def vllm_version() -> str:
    import vllm

    return getattr(vllm, "__version__", "unknown")


class EngineHost:
    """Owns one AsyncLLM for its whole life; all calls come from one event loop."""

    def __init__(self, *, engine: EngineConfig, model: ModelSource):
        self.config = engine
        self.model = model
        self.max_model_len = engine.settings.max_model_len
        self.vocab_size = model.vocab_size
        self.first_token_id = model.first_token_id
        self._llm = None
        self._tokenizer = None
        self._ids = itertools.count()
        self.in_flight: set[str] = set()
        # Requests this host saw finish: a measure window waits until vLLM's counters have counted them all.
        self.finished_requests = 0
        self.request_seeds = True  # see _seed
        # Engine arguments the runner added for the installed vLLM (JSON; None: none), for the engine row.
        self.added_engine_args: Optional[str] = None

    async def start(self) -> dict:
        """Loads the engine; returns the engine-record columns it can fill."""
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        from runner.execution.step_logger import StepLogger

        kwargs, self.added_engine_args = with_version_compat(engine_kwargs(engine=self.config, model=self.model))
        started = time.perf_counter()
        self._llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs), stat_loggers=[StepLogger])
        load_s = time.perf_counter() - started
        self._check_request_seeds()
        if not self.vocab_size:
            self.vocab_size = self._llm.vllm_config.model_config.get_vocab_size()
        return {"load_s": load_s, **self._capacity(), **await self._memory(), "api": "async",
                "per_request_spec_metrics": per_request_spec_status(kwargs),
                "added_engine_args_json": self.added_engine_args}

    def _vllm_config(self):
        return self._llm.vllm_config

    def _check_request_seeds(self) -> None:
        from vllm.platforms import current_platform

        # vLLM's CPU runner cannot rewind a request's seeded generator when it discards a partial prefill's
        # sample (RuntimeError "CPU Generator does not use offset"): there, sampled requests draw from the
        # engine's own seeded stream instead of a seed each.
        self.request_seeds = not current_platform.is_cpu()

    def _seed(self, seed: int, sampling: Sampling):
        return seed if self.request_seeds or sampling.greedy else None

    async def _rpc(self, method: str):
        return await self._llm.collective_rpc(method)

    def _capacity(self) -> dict:
        vc = self._vllm_config()
        cache = vc.cache_config
        blocks = cache.num_gpu_blocks or 0
        # vLLM's own group-aware figures where it has them: with an MTP layer the KV cache has more than
        # one group, and blocks × block size over-counts the tokens it can hold.
        tokens = getattr(cache, "kv_cache_size_tokens", None) or blocks * cache.block_size
        concurrency = getattr(cache, "kv_cache_max_concurrency", None)
        if concurrency is None and self.max_model_len:
            concurrency = tokens / self.max_model_len
        return {
            "kv_capacity_tokens": tokens,
            "num_kv_blocks": blocks,
            "block_size": cache.block_size,
            "max_concurrency_at_max_len": concurrency,
            "vllm_version": vllm_version(),
            "hostname": socket.gethostname(),
        }

    async def _memory(self) -> dict:
        try:
            reports = await self._rpc("runner_memory_report")
        except Exception as exc:  # a figure we cannot read must not fail the engine
            return {"memory_source": f"unavailable: {type(exc).__name__}: {exc}"[:300]}
        first = reports[0] if reports else {}
        return {
            "weights_gib": first.get("weights_gib"),
            "kv_budget_gib": first.get("kv_budget_gib"),
            "memory_source": first.get("source"),
            "device_name": first.get("device_name"),
            "device_kind": first.get("device_kind"),
        }

    async def stream(self, *, prompt_token_ids: list[int], max_tokens: int, session: int = 0, turn: int = 0,
                     phase: str = "measured", ignore_eos: bool = True, seed: int = 0,
                     sampling: Sampling = GREEDY, scheduled_at: Optional[float] = None) -> RequestResult:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos, seed=self._seed(seed, sampling),
                                output_kind=RequestOutputKind.DELTA, **sampling.params())
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
                timeline.add_chunk(at=now, tokens=len(completion.token_ids))
                token_ids.extend(completion.token_ids)
                final = out
        finally:
            self.in_flight.discard(request_id)
        if final is not None and final.finished:
            self.finished_requests += 1
        return RequestResult(timeline=timeline, prompt_tokens=len(prompt_token_ids), output_token_ids=token_ids,
                             session=session, turn=turn, phase=phase,
                             send_lag_s=None if scheduled_at is None else sent - scheduled_at, **_engine_side(final))

    async def abort_in_flight(self) -> int:
        """Aborts every request still running (a failed workload's leftovers); returns how many."""
        ids = list(self.in_flight)
        if ids:
            await self._llm.abort(ids)
        return len(ids)

    async def reset_prefix_cache(self) -> Optional[bool]:
        """vLLM's answer: False while requests still hold blocks; None where this vLLM does not say."""
        return await self._llm.reset_prefix_cache()

    def encode_text(self, text: str) -> list[int]:
        """Text → token ids with the model's tokenizer (for text prompt sources), no special tokens."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model.tokenizer or self.model.path)
        return list(self._tokenizer.encode(text, add_special_tokens=False))

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
        target = self._llm if hasattr(self._llm, "is_sleeping") else self._llm.llm_engine
        return bool(await _maybe_await(target.is_sleeping()))


class OfflineEngineHost(EngineHost):
    """Owns one `LLM` (vLLM's offline API): a workload hands it a whole batch at once.

    `api` is part of the engine's identity (one engine per process, and an actor
    hosts either an AsyncLLM or an LLM); the plan gives offline trials their own engine.
    """

    async def start(self) -> dict:
        from vllm import LLM

        from runner.execution.step_logger import attach_to_llm

        kwargs, self.added_engine_args = with_version_compat(engine_kwargs(engine=self.config, model=self.model))
        started = time.perf_counter()
        self._llm = LLM(**kwargs)
        load_s = time.perf_counter() - started
        self._check_request_seeds()
        attach_to_llm(self._llm)
        if not self.vocab_size:
            self.vocab_size = self._vllm_config().model_config.get_vocab_size()
        return {"load_s": load_s, **self._capacity(), **await self._memory(), "api": "offline",
                "per_request_spec_metrics": per_request_spec_status(kwargs),
                "added_engine_args_json": self.added_engine_args}

    def _vllm_config(self):
        return self._llm.llm_engine.vllm_config

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

        from vllm import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos, seed=self._seed(seed, sampling),
                                **sampling.params())
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
                timeline=_batch_timeline(sent_at=sent_at, done_at=done_at, metrics=getattr(out, "metrics", None),
                                         tokens=len(token_ids)),
                prompt_tokens=len(prompt), output_token_ids=token_ids, session=session, phase=phase,
                **_engine_side(out)))
        return results

    async def abort_in_flight(self) -> int:
        return 0  # a batch is one blocking call: nothing of it outlives a failure

    async def reset_prefix_cache(self) -> Optional[bool]:
        return self._llm.reset_prefix_cache()

    def shutdown(self) -> None:
        if self._llm is not None:
            if self._asleep:
                try:
                    self._llm.wake_up()
                except Exception:
                    pass
            self._llm.llm_engine.engine_core.shutdown()  # LLM has no shutdown()
            self._llm = None


def _batch_timeline(*, sent_at: float, done_at: float, metrics, tokens: int) -> Timeline:
    timeline = Timeline(sent_at=sent_at)
    first = getattr(metrics, "first_token_ts", None) or done_at
    last = getattr(metrics, "last_token_ts", None) or done_at
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


def _engine_side(final) -> dict:
    """Engine timestamps, cached tokens and per-request acceptance, where this vLLM gives them."""
    if final is None:
        return {}
    out: dict = {"cached_tokens": getattr(final, "num_cached_tokens", None)}
    m = getattr(final, "metrics", None)
    queued, scheduled, first = (getattr(m, n, None) for n in ("queued_ts", "scheduled_ts", "first_token_ts"))
    if queued and scheduled:
        out["engine_queue_s"] = scheduled - queued
    if queued and first:
        out["engine_ttft_s"] = first - queued
    out.update(request_spec_figures(getattr(final.outputs[0], "spec_decode_metrics", None)))
    return out


def request_spec_figures(spec) -> dict:
    """vLLM 0.32's per-request `RequestSpecDecodeMetrics` (a histogram of accepted drafts per verify step and
    the draft tokens proposed), in vLLM's own definitions: rate = accepted / draft tokens, mean acceptance
    length = 1 + accepted / steps."""
    histogram = list(getattr(spec, "histogram", None) or [])
    if spec is None or not histogram:
        return {}
    steps = sum(histogram)
    accepted = sum(j * count for j, count in enumerate(histogram))
    drafted = int(getattr(spec, "num_draft_tokens", 0) or 0)
    # A chain drafter's accepted drafts are a prefix of its k: j accepted means positions 0..j-1 accepted.
    per_position = [sum(histogram[j] for j in range(i + 1, len(histogram))) for i in range(len(histogram) - 1)]
    return {
        "spec_accepted_per_position": per_position,
        "spec_num_steps": steps,
        "spec_num_draft_tokens": drafted,
        "spec_num_accepted_tokens": accepted,
        "spec_acceptance_rate": accepted / drafted if drafted else None,
        "spec_mean_acceptance_length": 1.0 + accepted / steps if steps else None,
    }
