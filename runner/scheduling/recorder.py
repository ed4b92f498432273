"""Results onto the sink as they happen: trial rows, engine rows, timeline spans; nothing else writes them."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import signal
import threading
import time
from typing import Callable, Optional, Protocol

from runner.measurement.records import RunKeys, failed_trial_row
from runner.plan.grid import EngineConfig, Trial
from runner.schema import EngineRecord, EngineStatus, Phase, PhaseRecord, TrialRecord, TrialStatus
from runner.scheduling.order import next_position
from runner.scheduling.race import Race


class ResultSink(Protocol):
    """What the driver writes through (runner.sinks.result_sink.ParquetSink); `rows` is what is already on disk."""

    rows: dict[str, list[dict]]

    def write_trial(self, record: TrialRecord, requests: list) -> None: ...

    def write_first_run(self, record: TrialRecord, requests: list) -> None: ...

    def write_engine(self, record: EngineRecord) -> None: ...

    def write_phase(self, record: PhaseRecord) -> None: ...


@contextlib.contextmanager
def signals_deferred():
    """Ctrl-C / SIGTERM wait until a result is on disk (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class Recorder:
    def __init__(self, *, keys: RunKeys, sink: ResultSink, race: Race, on_trial: Optional[Callable] = None,
                 on_engine: Optional[Callable] = None, progress=None, launched_at: Optional[float] = None,
                 engines_on_device: int = 1):
        self.keys, self.sink, self.race, self.progress = keys, sink, race, progress
        self.engines_on_device = engines_on_device  # on every trial and engine row (cluster.engines_per_gpu)
        self.on_trial = on_trial or (lambda *a, **k: None)
        self.on_engine = on_engine or (lambda *a, **k: None)
        # The command's process start (epoch): the timeline's first span ends when the first actor call goes out.
        self.launched_at = launched_at
        self.position = next_position(sink.rows.get("trials", []))
        self.attempts: dict[str, int] = {}
        self.loads: dict[str, float] = {}  # engine_id -> measured load_s
        self.durations: dict[tuple, list] = collections.defaultdict(list)  # (engine_id, workload) -> trial s

    # ---- timeline ----
    def call_going_out(self) -> None:
        """The first actor call ends the `launch` span."""
        if self.launched_at is None:
            return
        self.span(lane=-1, phase=Phase.LAUNCH, engine_id=None, started_at=self.launched_at,
                  duration_s=time.time() - self.launched_at)
        self.launched_at = None

    def span(self, *, phase: Phase, **columns) -> None:
        with signals_deferred():
            self.sink.write_phase(PhaseRecord(sweep=self.keys.sweep, run_id=self.keys.run_id, phase=phase.value,
                                              **columns))

    # ---- engines ----
    def engine_started(self, engine: EngineConfig, *, columns: dict, log_file: Optional[str], device: str) -> None:
        """An engine in: its row, and its load time for the deadline's estimates."""
        columns = {k: v for k, v in columns.items() if k != "device_kind"}
        if columns.get("load_s") is not None:
            self.loads[engine.engine_id] = float(columns["load_s"])
        self.write_engine(self.engine_record(engine, status=EngineStatus.OK, log_file=log_file,
                                             started_at=time.time(), device_kind=device, **columns))

    def engine_record(self, engine: EngineConfig, **columns) -> EngineRecord:
        return EngineRecord(**dataclasses.asdict(engine.settings), sweep=self.keys.sweep,
                            run_id=self.keys.run_id, engine_id=engine.engine_id,
                            engines_on_device=self.engines_on_device, **columns)

    def write_engine(self, record: EngineRecord) -> None:
        with signals_deferred():
            self.sink.write_engine(record)
        self.on_engine(record)

    # ---- trials ----
    def next_attempt(self, trial: Trial) -> int:
        self.attempts[trial.trial_id] = self.attempts.get(trial.trial_id, 0) + 1
        return self.attempts[trial.trial_id]

    def trial(self, record: TrialRecord, requests: list, *, trial: Trial, first_run=None) -> None:
        """`first_run` (runner.execution.results.TrialResult): the trial's first of two runs (the first trial after a
        load or a pool wake), written before the trial."""
        record = dataclasses.replace(record, round=trial.repeat, position=self.position,
                                     engines_on_device=self.engines_on_device)
        with signals_deferred():
            if first_run is not None:
                self.sink.write_first_run(dataclasses.replace(first_run.trial, round=trial.repeat,
                                                              engines_on_device=self.engines_on_device),
                                          first_run.requests)
            self.sink.write_trial(record, requests)
        self.position += 1
        if record.status == TrialStatus.OK and record.duration_s is not None:
            self.durations[(record.engine_id, record.workload)].append(float(record.duration_s))
        self.race.add(record, requests)
        self.on_trial(record, requests)
        if self.progress is not None:
            self.progress.update(1)

    def trial_failed(self, engine: EngineConfig, trial: Trial, *, kind: str, reason: str,
                     status: TrialStatus = TrialStatus.FAILED) -> None:
        row = failed_trial_row(keys=self.keys, trial=trial, settings=engine.settings, kind=kind, reason=reason,
                               attempts=self.attempts.get(trial.trial_id, 1))
        self.trial(dataclasses.replace(row, status=status), [], trial=trial)
