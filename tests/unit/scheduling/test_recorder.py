"""The recorder: rows through the sink protocol, positions across resumes, estimates from what finished."""
from __future__ import annotations

import dataclasses

from runner.measurement.records import RunKeys, failed_trial_row
from runner.schema import EngineStatus, Phase, TrialStatus
from runner.scheduling.race import Race
from runner.scheduling.recorder import Recorder
from tests.unit.scheduling.plans import rounds_plan


class Sink:
    def __init__(self, trials_on_disk: list[dict]):
        self.rows = {"trials": trials_on_disk}
        self.trials, self.engines, self.phases, self.first_runs = [], [], [], []

    def write_trial(self, record, requests) -> None:
        self.trials.append(record)

    def write_first_run(self, record, requests) -> None:
        self.first_runs.append(record)

    def write_engine(self, record) -> None:
        self.engines.append(record)

    def write_phase(self, record) -> None:
        self.phases.append(record)


def _recorder(on_disk: list[dict], *, launched_at=None):
    plan = rounds_plan(engines=2, trials=2, repeats=2)
    sink = Sink(on_disk)
    seen = []
    recorder = Recorder(keys=RunKeys(sweep="s", run_id="r"), sink=sink, launched_at=launched_at,
                        race=Race(plan=plan, enabled=False, tie_band=0.02, seed=0),
                        on_trial=lambda record, requests: seen.append(record.trial_id))
    return plan, sink, recorder, seen


def test_trials_take_the_next_positions_and_their_round():
    plan, sink, recorder, seen = _recorder([{"position": 6}])
    trial = plan.trials_of("e0")[-1]
    row = failed_trial_row(keys=recorder.keys, trial=trial, settings=plan.engines[0].settings, kind="k", reason="r")
    recorder.trial(dataclasses.replace(row, status=TrialStatus.OK, duration_s=2.5), [], trial=trial)
    recorder.trial_failed(plan.engines[0], trial, kind="timeout", reason="slow")
    assert [(t.position, t.round, t.status) for t in sink.trials] == [(7, trial.repeat, TrialStatus.OK),
                                                                       (8, trial.repeat, TrialStatus.FAILED)]
    assert recorder.durations == {("e0", "decode"): [2.5]} and seen == [trial.trial_id] * 2


def test_a_first_trials_first_run_is_written_before_its_trial_with_the_trials_round():
    from runner.execution.results import TrialResult

    plan, sink, recorder, _ = _recorder([])
    trial = plan.trials_of("e0")[-1]
    row = failed_trial_row(keys=recorder.keys, trial=trial, settings=plan.engines[0].settings, kind="k", reason="r")
    first = TrialResult(trial=dataclasses.replace(row, status=TrialStatus.OK), requests=[])
    recorder.trial(dataclasses.replace(row, status=TrialStatus.OK), [], trial=trial, first_run=first)
    (written,) = sink.first_runs
    assert written.trial_id == trial.trial_id and written.round == trial.repeat and len(sink.trials) == 1


def test_attempts_count_per_trial():
    plan, _, recorder, _ = _recorder([])
    first, second = plan.trials[:2]
    assert [recorder.next_attempt(first), recorder.next_attempt(first), recorder.next_attempt(second)] == [1, 2, 1]


def test_an_engine_in_is_a_row_and_a_load_estimate():
    plan, sink, recorder, _ = _recorder([])
    recorder.engine_started(plan.engines[1], columns={"load_s": 12.0, "device_kind": "x"}, log_file="l", device="cpu")
    (row,) = sink.engines
    assert row.status == EngineStatus.OK and row.device_kind == "cpu" and row.load_s == 12.0
    assert recorder.loads == {"e1": 12.0}


def test_the_launch_span_ends_at_the_first_call_only():
    _, sink, recorder, _ = _recorder([], launched_at=100.0)
    recorder.call_going_out()
    recorder.call_going_out()
    assert [(p.lane, p.phase) for p in sink.phases] == [(-1, Phase.LAUNCH.value)]
