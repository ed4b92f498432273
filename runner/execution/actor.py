"""The Ray actor that pins one engine to one device and runs trials on it.

One engine per actor process: vLLM's Prometheus registry is per process, and a
second engine would wipe the first one's counters.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import time
import traceback
from typing import Optional

from runner.config.execution import EngineStart, Warmup
from runner.config.sections import ModelSection
from runner.execution.drafts import DraftNotSet, DraftSetter, draft_columns, ran_settings, trimmed
from runner.execution.energy import Unmetered, open_meter
from runner.execution.engine import EngineHost, host_class
from runner.execution.failures import fault_point, parse_startup_failure
from runner.execution.isolation import CounterWindow, GcPauses, ResetFailed, drain, quiet_heap, reset_prefix_cache
from runner.execution.results import StartResult, TrialResult
from runner.measurement import counters
from runner.slo import Slo
from runner.measurement.records import RunKeys, failed_trial_row, request_rows, trial_row
from runner.measurement.sampling import sampled
from runner.measurement.shipped import fetch_payload
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext, WholeRun
from runner.measurement.workloads.open_loop import probe_monitor
from runner.models.source import ModelSource, resolve_model_source
from runner.plan.grid import EngineConfig, Trial
from runner.schema import TrialStatus
from runner.vllm.device import device_total_gib
from runner.vllm.engine import import_engine_stack

KV_SAMPLE_EVERY_S = 0.2
# A warm-up keeps the trial's prompt lengths, turns and concurrency (what first-use costs depend on) but
# decodes at most this many tokens: longer decodes of the same batch compile nothing new.
WARMUP_OUTPUT_CAP = 64


class EngineActor:
    """Wrapped by `ray.remote` in the scheduler (resources differ per device kind); a pooled one is
    runner.pool.actor.PooledEngineActor."""

    def __init__(self, *, env: dict[str, str], keys: RunKeys, slo: Slo = Slo(), warmup: Warmup = Warmup.AUTO,
                 warmup_output_cap: Optional[int] = WARMUP_OUTPUT_CAP, first_trial_twice: bool = True,
                 engine_start: EngineStart = EngineStart.SPAWN):
        for name, value in env.items():  # None: unset what the node's environment may carry
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)
        self.keys = keys
        self.slo = slo
        self.host: Optional[EngineHost] = None
        self.engine: Optional[EngineConfig] = None
        self.warmup = Warmup.on_engine(warmup)
        self.warmup_output_cap = warmup_output_cap
        # (warm-up mode, workload, params, concurrency, api) already warmed on this engine: first-use costs paid.
        self.warm_shapes: set[tuple] = set()
        self.warm_points: set[tuple] = set()  # light warm-up: workload points run once at one session
        self.warm_batches: set[tuple] = set()  # light warm-up: (workload, api, concurrency) given a short pass
        # The first trial after a load (or a pool wake) runs twice with the same prompts and keeps the second: on
        # CPU the first ran slower even after a full warm-up where engines sat side by side (docs/benchmarks.md);
        # the gap between the two is the report's first-trial check (later rounds send other prompts).
        self.first_trial_twice = first_trial_twice
        self.first_run_due = False
        # How vLLM's engine-core process starts (runner/vllm/fork_server.py); installed once, in prepare.
        self.engine_start = EngineStart(engine_start).resolved()
        self.start_method = None
        self.drafts = DraftSetter()  # what the engine drafts now (a trial's k set on the largest-k engine)
        # start() waits for a spare's prepare() still importing: a second vLLM import beside it fails.
        self._setup = asyncio.Lock()
        self.gc_pauses = GcPauses().install()
        # The engine's GPU energy meter, made at its start while it is idle (runner.execution.energy).
        self.energy = Unmetered("no engine started")
        self.start_columns: dict = {}  # the load's engine-row columns (a pooled engine's, for a later command's row)
        self.log_offset = 0  # a pooled engine's log for a later command starts where the earlier one's ended
        fd, self.log_path = tempfile.mkstemp(prefix="runner-engine-", suffix=".log")
        # vLLM's and Ray's output, the engine core child's included, goes to this engine's log.
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)

    def read_log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    async def start(self, *, engine: EngineConfig, model: ModelSource | ModelSection) -> StartResult:
        self.engine = engine
        if not isinstance(model, ModelSource):  # a model config: resolved here, on the node that loads it
            try:
                model = await asyncio.to_thread(_resolve_model, model)  # a build must not block read_log
            except Exception as exc:
                return StartResult(ok=False, failure_kind="model_unavailable",
                                   failure_reason=f"{type(exc).__name__}: {exc}"[:600])
        self.host = host_class(getattr(engine, "api", "async"))(engine=engine, model=model)
        self.drafts = DraftSetter()
        try:
            async with self._setup:
                await asyncio.to_thread(self._install_start_method)
            columns = await self.host.start()
            self.energy = await asyncio.to_thread(open_meter, self.host.device_uuids)
            quiet_heap()
            self.start_columns = {**columns, "engine_start": str(self.start_method)}
            self.first_run_due = self.first_trial_twice
            return StartResult(ok=True, columns=self.start_columns)
        except Exception as exc:  # a start-up failure is a result, not a crash of the sweep
            detail = "".join(traceback.format_exception(exc))
            print(detail, flush=True)
            await asyncio.sleep(0.5)  # let the child's last lines reach the log
            failure = parse_startup_failure(log=self.read_log(), exception=detail)
            added = getattr(self.host, "added_engine_args", None)
            self.host = None
            numbers = {**failure.numbers, **({"added_engine_args": added} if added else {})}
            return StartResult(ok=False, failure_kind=failure.kind, failure_reason=failure.reason,
                               failure_numbers=numbers)

    async def run_trial(self, *, trial: Trial, attempt: int = 1) -> TrialResult:
        assert self.host is not None and self.engine is not None, "start() the engine first"
        workload = workload_class(trial.workload)()
        params = trial.params
        try:
            await self.drafts.apply(self.host, trial)  # before the warm-up: a shape is warm at one draft count
        except Exception as exc:
            return self._failed(trial, attempt, kind="draft_count_unset", exc=exc)
        try:
            await fetch_payload(params)  # the prompt set or trace the driver shipped: once per node, per process
            warmup_s = await self._warm_up(trial=trial, workload=workload, params=params)
            await reset_prefix_cache(self.host)
        except ResetFailed as exc:
            return self._failed(trial, attempt, kind="prefix_cache_reset_failed", exc=exc)
        except Exception as exc:
            await drain(self.host)
            return self._failed(trial, attempt, kind="warmup_error", exc=exc)
        started = time.perf_counter()
        result = await self._measure(trial=trial, workload=workload, params=params, attempt=attempt,
                                     warmup_s=warmup_s)
        if result.trial.status == TrialStatus.OK:
            await fault_point(trial=trial, attempt=attempt)  # test hook; inert unless RUNNER_FAULTS is set
        if self.first_run_due and result.trial.status == TrialStatus.OK:
            self.first_run_due = False
            return await self._run_again(trial=trial, workload=workload, params=params, attempt=attempt,
                                         warmup_s=warmup_s, first=result, first_s=time.perf_counter() - started)
        return result

    async def _run_again(self, *, trial: Trial, workload, params, attempt: int, warmup_s: Optional[float],
                         first: TrialResult, first_s: float) -> TrialResult:
        """The engine's first trial after a load or a pool wake, run again with the same prompts (prefix cache
        reset): the second run is the trial's figure; the first goes to `first_runs` for the report's check."""
        try:
            await reset_prefix_cache(self.host)
        except ResetFailed:
            return first  # no check this time: the first run stands
        again = await self._measure(trial=trial, workload=workload, params=params, attempt=attempt,
                                    warmup_s=warmup_s)
        if again.trial.status != TrialStatus.OK:
            return first
        again.trial.first_run_s = first_s
        again.first_run = first
        return again

    async def _measure(self, *, trial: Trial, workload, params, attempt: int,
                       warmup_s: Optional[float]) -> TrialResult:
        """One measured run of the trial (its seeds fixed by the trial's repeat, so a rerun sends the same prompts)."""
        window = CounterWindow(finished=lambda: self.host.finished_requests, meter=self.energy)
        await window.open_whole()
        peak = [0.0]
        sampler = asyncio.create_task(self._sample_kv_usage(peak))
        started_at = time.time()
        t0 = time.perf_counter()
        self.gc_pauses.start()
        probe = probe_monitor(params, slo=self.slo)
        try:
            results = await workload.run(TrialContext(
                engine=sampled(self.host, params, base_seed=params.seed * 1_000_003 + trial.repeat),
                concurrency=trial.concurrency, repeat=trial.repeat, params=params, api=trial.api, window=window,
                probe=probe))
            wall_s = time.perf_counter() - t0
            await window.close_whole()
        except Exception as exc:
            self.gc_pauses.stop()
            sampler.cancel()
            await drain(self.host)  # the next trial must not share the engine with this one's leftovers
            return self._failed(trial, attempt, kind="workload_error", exc=exc)
        gc_columns = self.gc_pauses.stop()
        sampler.cancel()
        row = trial_row(keys=self.keys, trial=trial, settings=ran_settings(self.engine, trial), results=results,
                        measured_phases=params.measured_phases(), wall_s=wall_s, started_at=started_at,
                        counter_deltas=window.deltas(), kv_usage_peak=peak[0], slo=self.slo, attempts=attempt,
                        warmup_s=warmup_s, warmup=self.warmup.value, arrival_columns=params.arrival_columns(),
                        **params.source_columns(max_model_len=self.engine.settings.max_model_len), **gc_columns,
                        **(probe.columns() if probe is not None else {}), **draft_columns(self.engine, trial))
        row = dataclasses.replace(row, **self.energy.columns(output_tokens=row.output_tokens_total))
        reqs = request_rows(keys=self.keys, trial_id=trial.trial_id, engine_id=trial.engine_id, results=results,
                            t0=t0)
        return trimmed(TrialResult(trial=row, requests=reqs), trial)

    async def _warm_up(self, *, trial: Trial, workload, params) -> Optional[float]:
        """Unmeasured runs the first time this engine sees a trial shape (compiles, kernel JITs, the n-gram
        proposer's first real request); their prompts differ from every measured repeat's. full: the shape once;
        light: the workload point once at one session (few tokens out), then a short pass per new concurrency."""
        if self.warmup is Warmup.OFF:
            return None
        # Keyed by mode too: a pooled engine warmed light by one command is warmed again for one asking full.
        drafts = trial.draft.label if trial.draft is not None else None  # a shape warm at one k is not at another
        shape = (self.warmup, trial.workload, trial.params_json, trial.concurrency, trial.api, drafts)
        point = (trial.workload, trial.params_json, trial.api, drafts)
        batch = (trial.workload, trial.api, trial.concurrency, drafts)
        if shape in self.warm_shapes:
            return 0.0
        if self.warmup_output_cap and getattr(params, "output_len", 0) > self.warmup_output_cap:
            params = dataclasses.replace(params, output_len=self.warmup_output_cap)
        if getattr(params, "requests_per_session", 1) > 1:  # one request per session covers the batch's shapes
            params = dataclasses.replace(params, requests_per_session=1)
        started = time.perf_counter()
        if self.warmup is Warmup.LIGHT:
            if point not in self.warm_points:
                await self._unmeasured(trial, workload, params.point_variant(), concurrency=1)
                self.warm_points.add(point)
                self.warm_batches.add((trial.workload, trial.api, 1, drafts))
            if batch not in self.warm_batches:
                await self._unmeasured(trial, workload, params.short_variant(), concurrency=trial.concurrency)
                self.warm_batches.add(batch)
        else:
            await self._unmeasured(trial, workload, params.warmup_variant(), concurrency=trial.concurrency)
            self.warm_points.add(point)  # the full copy covers what light would run for this point and batch
            self.warm_batches.add(batch)
        self.warm_shapes.add(shape)
        return time.perf_counter() - started

    async def _unmeasured(self, trial: Trial, workload, params, *, concurrency: int) -> None:
        await workload.run(TrialContext(engine=sampled(self.host, params, base_seed=-1 - trial.repeat),
                                        concurrency=concurrency, repeat=-1 - trial.repeat, params=params,
                                        api=trial.api, window=WholeRun()))

    def _failed(self, trial: Trial, attempt: int, *, kind: str, exc: BaseException) -> TrialResult:
        reason = f"{type(exc).__name__}: {exc}"[:600]
        row = failed_trial_row(keys=self.keys, trial=trial, settings=ran_settings(self.engine, trial), kind=kind,
                               reason=reason, attempts=attempt)
        for name, value in draft_columns(self.engine, trial).items():
            setattr(row, name, value)
        return TrialResult(trial=row, requests=[])

    async def _sample_kv_usage(self, peak: list[float]) -> None:
        while True:
            usage = counters.gauge(counters.KV_USAGE)
            if usage is not None:
                peak[0] = max(peak[0], usage)
            await asyncio.sleep(KV_SAMPLE_EVERY_S)

    async def shutdown(self) -> None:
        if self.host is not None:
            if getattr(self.host, "_asleep", False):  # exiting asleep crashed vLLM's cumem allocator
                try:
                    await self.host.wake_up()
                except Exception as exc:  # shut down all the same; the engine's log says why it went down asleep
                    print(f"runner: the wake before shutdown failed ({type(exc).__name__}: {exc}); shutting the "
                          f"engine down asleep", flush=True)
            self.host.shutdown()
            self.host = None

    # ---- residency: the actor starts ahead of its engine; engines sleep between turns ----
    async def prepare(self) -> dict:
        """Imports vLLM and torch and creates the device context before the engine loads (so that cost
        overlaps the previous engine's trials); returns the memory figures residency is planned from."""
        from runner.vllm.fork_server import begin_fork_server

        async with self._setup:
            if self.engine_start is EngineStart.FORKSERVER:
                begin_fork_server()  # its vLLM import runs beside this process's own
            await asyncio.to_thread(import_engine_stack)
            await asyncio.to_thread(self._install_start_method)
        return memory_report()

    def memory(self) -> dict:
        return memory_report()

    def _install_start_method(self) -> None:
        from runner.vllm.fork_server import use_fork_server

        if self.start_method is None:
            forked = use_fork_server(self.engine_start is EngineStart.FORKSERVER)
            self.start_method = EngineStart.FORKSERVER if forked else EngineStart.SPAWN

    async def sleep(self) -> float:
        """Level 1 (weights to host RAM, KV dropped); returns the seconds it took."""
        return await self.host.sleep() if self.host is not None else 0.0

    async def wake_up(self) -> float:
        return await self.host.wake_up() if self.host is not None else 0.0

    async def reset_draft(self) -> None:
        """The engine back at its own draft count (a kept engine parked or claimed: the next holder's trials set
        their own)."""
        await self.drafts.reset(self.host)

    async def is_sleeping(self) -> bool:
        return bool(await self.host.is_sleeping()) if self.host is not None else False


def memory_report() -> dict:
    """Device total / free and this process's context (CUDA), and the node's available RAM (GiB)."""
    out: dict = {"host_available_gib": _host_available_gib()}
    total = device_total_gib()  # through NVML (vLLM's CUDA platform): no CUDA context in this process
    if total is not None:
        out["device_total_gib"] = total
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:  # which GPU this lane's engines share with others (their starts take turns there)
        out["device_key"] = f"{_node_id()}:{visible}"
    return out


def _node_id() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:
        import socket

        return socket.gethostname()


def _host_available_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return None


def _resolve_model(model_cfg: ModelSection) -> ModelSource:
    return resolve_model_source(model_cfg)
