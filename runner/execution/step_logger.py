"""A vLLM stat logger that tallies each engine step's batch size (runner.measurement.engine_steps).

vLLM calls a stat logger's `record` once per `SchedulerStats` the engine core sends, one per engine step, in the
frontend process (the actor), so the tally is read there beside the Prometheus counters. Duck-typed to vLLM's
`StatLoggerBase` (its signature is the same in 0.26 and 0.32), so that defining it imports nothing; an offline
`LLM` gets it through runner.vllm.engine.add_stat_logger.
"""
from __future__ import annotations

from runner.measurement import engine_steps
from runner.vllm.step_stats import step_requests


class StepLogger:
    """Per engine (vLLM builds one per engine index through `stat_loggers=[StepLogger]`)."""

    def __init__(self, vllm_config=None, engine_index: int = 0):
        self.engine_index = engine_index

    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0, **_) -> None:
        if scheduler_stats is None:
            return
        counts = step_requests(scheduler_stats, iteration_stats)  # None: this vLLM renamed them (logged once)
        if counts is not None:
            engine_steps.STEPS.add(engine_steps.step_batch_size(num_running=counts[0], num_finished=counts[1]))

    def log_engine_initialized(self) -> None:
        pass

    def log(self) -> None:
        pass

    def record_sleep_state(self, *_, **__) -> None:
        pass
