"""The engine's real batch size per trial: steps tallied by the stat logger, columns from two snapshots."""
from __future__ import annotations

from types import SimpleNamespace

from runner.execution.step_logger import StepLogger
from runner.measurement import engine_steps
from runner.measurement.counters import CounterSnapshot, delta_metrics
from runner.measurement.engine_steps import StepTally, batch_columns, weighted_median
from runner.vllm.engine import add_stat_logger


def test_columns_cover_the_window_only():
    before = {1: 5, 4: 2}
    after = {1: 6, 3: 1, 4: 10}  # the window: one step of 1, one of 3, eight of 4
    cols = batch_columns(before, after)
    assert cols["engine_steps"] == 10
    assert cols["batch_size_mean"] == (1 + 3 + 8 * 4) / 10
    assert cols["batch_size_p50"] == 4
    assert cols["batch_size_max"] == 4


def test_no_steps_in_the_window_and_no_tally_at_all():
    assert batch_columns({2: 3}, {2: 3}) == {"engine_steps": 0, "batch_size_mean": None, "batch_size_p50": None,
                                             "batch_size_max": None}
    assert batch_columns({}, {})["engine_steps"] is None  # no stat logger (e.g. an engine without one)


def test_weighted_median_even_and_odd():
    assert weighted_median({1: 1, 2: 1}) == 1.5
    assert weighted_median({1: 1, 2: 1, 5: 1}) == 2
    assert weighted_median({}) is None


def test_delta_metrics_carries_the_batch_columns():
    cols = delta_metrics(CounterSnapshot(steps={2: 1}), CounterSnapshot(steps={2: 5}))
    assert cols["engine_steps"] == 4 and cols["batch_size_max"] == 2


def test_the_logger_counts_the_requests_a_step_finished(monkeypatch):
    tally = StepTally()
    monkeypatch.setattr(engine_steps, "STEPS", tally)
    logger = StepLogger(None, 0)
    logger.record(SimpleNamespace(num_running_reqs=3), SimpleNamespace(finished_requests=[]))
    # The last step of a batch: vLLM reports 0 running once it removed the 4 requests the step finished.
    logger.record(SimpleNamespace(num_running_reqs=0), SimpleNamespace(finished_requests=[1, 2, 3, 4]))
    logger.record(SimpleNamespace(num_running_reqs=0), None)  # an idle engine's stats: no step
    logger.record(None, None)
    assert tally.snapshot() == {3: 1, 4: 1}


def test_attach_to_an_offline_engine_that_has_a_logger_manager():
    llm = SimpleNamespace(llm_engine=SimpleNamespace(logger_manager=SimpleNamespace(stat_loggers=[])))
    assert add_stat_logger(llm, StepLogger()) and isinstance(llm.llm_engine.logger_manager.stat_loggers[0], StepLogger)
    assert not add_stat_logger(SimpleNamespace(llm_engine=SimpleNamespace(logger_manager=None)), StepLogger())
