"""The Ray actor that pins one engine to one device and runs trials on it.

One engine per actor process: vLLM's Prometheus registry is per process, and a
second engine would wipe the first one's counters.
"""
from __future__ import annotations

import asyncio
import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Optional

from runner.execution.engine import EngineHost, ModelSource, host_class
from runner.execution.failures import fault_point, parse_startup_failure
from runner.measurement import counters
from runner.measurement.metrics import Slo
from runner.measurement.records import RunKeys, failed_trial_row, request_rows, trial_row
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext
from runner.plan.grid import EngineConfig, Trial

# Counters reach the registry from vLLM's output handler a moment after the last
# token reaches the client; wait this long so a trial's counters do not bleed into the next.
COUNTER_SETTLE_S = 0.25
KV_SAMPLE_EVERY_S = 0.2


@dataclass(kw_only=True)
class StartResult:
    ok: bool
    columns: dict = field(default_factory=dict)
    failure_kind: Optional[str] = None
    failure_reason: Optional[str] = None
    failure_numbers: dict = field(default_factory=dict)


@dataclass(kw_only=True)
class TrialResult:
    trial: object
    requests: list


class EngineActor:
    """Wrapped by `ray.remote` in the scheduler (resources differ per device kind)."""

    def __init__(self, *, env: dict[str, str], keys: RunKeys, slo: dict | None = None):
        for name, value in env.items():  # None: unset what the node's environment may carry
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)
        self.keys = keys
        self.slo = Slo(**(slo or {}))
        self.host: Optional[EngineHost] = None
        self.engine: Optional[EngineConfig] = None
        fd, self.log_path = tempfile.mkstemp(prefix="runner-engine-", suffix=".log")
        # vLLM's and Ray's output, the engine core child's included, goes to this engine's log.
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)

    def pid(self) -> int:
        return os.getpid()

    def read_log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    async def start(self, *, engine: EngineConfig, model: ModelSource | dict) -> StartResult:
        self.engine = engine
        if isinstance(model, dict):  # a model config: resolved here, on the node that loads it
            try:
                model = await asyncio.to_thread(_resolve_model, model)  # a build must not block read_log
            except Exception as exc:
                return StartResult(ok=False, failure_kind="model_unavailable",
                                   failure_reason=f"{type(exc).__name__}: {exc}"[:600])
        self.host = host_class(getattr(engine, "api", "async"))(engine=engine, model=model)
        try:
            columns = await self.host.start()
            return StartResult(ok=True, columns=columns)
        except Exception as exc:  # a start-up failure is a result, not a crash of the sweep
            detail = "".join(traceback.format_exception(exc))
            print(detail, flush=True)
            await asyncio.sleep(0.5)  # let the child's last lines reach the log
            failure = parse_startup_failure(log=self.read_log(), exception=detail)
            self.host = None
            return StartResult(ok=False, failure_kind=failure.kind, failure_reason=failure.reason,
                               failure_numbers=failure.numbers)

    async def run_trial(self, *, trial: Trial, attempt: int = 1) -> TrialResult:
        assert self.host is not None and self.engine is not None, "start() the engine first"
        workload = workload_class(trial.workload)()
        params = workload.parse_params(dict(trial.params))
        await self.host.reset_prefix_cache()
        await asyncio.sleep(COUNTER_SETTLE_S)
        before = counters.snapshot()
        peak = [0.0]
        sampler = asyncio.create_task(self._sample_kv_usage(peak))
        started_at = time.time()
        t0 = time.perf_counter()
        try:
            results = await workload.run(TrialContext(engine=self.host, concurrency=trial.concurrency,
                                                      repeat=trial.repeat, params=params, api=trial.api))
        except Exception as exc:
            sampler.cancel()
            reason = f"{type(exc).__name__}: {exc}"[:600]
            row = failed_trial_row(keys=self.keys, trial=trial, settings=self.engine.settings,
                                   kind="workload_error", reason=reason, attempts=attempt)
            return TrialResult(trial=row, requests=[])
        duration = time.perf_counter() - t0
        await fault_point(trial=trial, attempt=attempt)  # test hook; inert unless RUNNER_FAULTS is set
        await asyncio.sleep(COUNTER_SETTLE_S)
        sampler.cancel()
        after = counters.snapshot()
        row = trial_row(keys=self.keys, trial=trial, settings=self.engine.settings, results=results,
                        measured_phases=params.measured_phases(), duration_s=duration, started_at=started_at,
                        counter_deltas=counters.delta_metrics(before, after), kv_usage_peak=peak[0],
                        slo=self.slo, attempts=attempt)
        reqs = request_rows(keys=self.keys, trial_id=trial.trial_id, engine_id=trial.engine_id, results=results,
                            t0=t0)
        return TrialResult(trial=row, requests=reqs)

    async def _sample_kv_usage(self, peak: list[float]) -> None:
        while True:
            usage = counters.gauge(counters.KV_USAGE)
            if usage is not None:
                peak[0] = max(peak[0], usage)
            await asyncio.sleep(KV_SAMPLE_EVERY_S)

    async def shutdown(self) -> None:
        if self.host is not None:
            self.host.shutdown()
            self.host = None


def _resolve_model(model_cfg: dict) -> ModelSource:
    from runner.models.source import resolve_model_source

    return resolve_model_source(model_cfg)
