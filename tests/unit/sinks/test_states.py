"""The persisted states (runner.schema's StrEnums) and the composed failure kinds: what is on disk never changes."""
from __future__ import annotations

import pandas as pd

from runner.schema import (RACE_ELIMINATED, EngineRecord, EngineStatus, Phase, PhaseRecord, TrialRecord, TrialStatus,
                           engine_start_cause, engine_start_failure)
from runner.sinks.parquet import read_frame
from runner.sinks.result_sink import ParquetSink


def test_the_persisted_values_are_pinned():
    """Renaming a member must not change a value: Parquet files written before still read and compare equal."""
    assert {s.name: s.value for s in TrialStatus} == {"OK": "ok", "FAILED": "failed", "SKIPPED": "skipped"}
    assert {s.name: s.value for s in EngineStatus} == {"OK": "ok", "FAILED": "failed"}
    assert {p.name: p.value for p in Phase} == {"LAUNCH": "launch", "PREPARE": "prepare", "START": "start",
                                                "WAKE": "wake", "TRIAL": "trial", "SLEEP": "sleep",
                                                "PRELOAD": "preload", "IDLE": "idle"}
    assert RACE_ELIMINATED == "race_eliminated"
    assert TrialRecord(model="m", sweep="s", run_id="r", trial_id="t", engine_id="e", workload="decode",
                       workload_params_json="{}").status == "ok"


def test_the_engine_start_failure_kind_round_trips():
    kind = engine_start_failure("kv_cache_too_small_for_max_len")
    assert kind == "engine_start:kv_cache_too_small_for_max_len"  # as written by every run so far
    assert engine_start_cause(kind) == "kv_cache_too_small_for_max_len"
    assert engine_start_cause(engine_start_failure("engine_start_failed")) == "engine_start_failed"
    for other in ("timeout", "actor_died", RACE_ELIMINATED, "engine_start_failed", None, float("nan")):
        assert engine_start_cause(other) is None


def test_states_set_from_the_enums_are_plain_strings_on_disk(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write_engine(EngineRecord(model="m", sweep="s", run_id="r", engine_id="e0", status=EngineStatus.FAILED,
                                   failure_kind="no_kv_cache_memory"))
    for i, (status, kind) in enumerate([(TrialStatus.OK, None),
                                        (TrialStatus.FAILED, engine_start_failure("no_kv_cache_memory")),
                                        (TrialStatus.SKIPPED, RACE_ELIMINATED)]):
        sink.write_trial(TrialRecord(model="m", sweep="s", run_id="r", trial_id=f"t{i}", engine_id="e0",
                                     workload="decode", workload_params_json="{}", status=status, failure_kind=kind),
                         [])
    sink.write_phase(PhaseRecord(sweep="s", run_id="r", lane=0, phase=Phase.TRIAL.value, trial_id="t0"))
    sink.compact()

    trials = read_frame(tmp_path, "trials").sort_values("trial_id")
    assert list(trials.status) == ["ok", "failed", "skipped"]
    assert all(type(s) is str for s in trials.status)
    assert list(trials.status == TrialStatus.OK) == [True, False, False]
    assert list(trials.status.isin([TrialStatus.OK, TrialStatus.SKIPPED])) == [True, False, True]
    assert [engine_start_cause(k) for k in trials.failure_kind] == [None, "no_kv_cache_memory", None]
    assert list(read_frame(tmp_path, "engines").status == EngineStatus.FAILED) == [True]
    assert list(read_frame(tmp_path, "phases").phase == Phase.TRIAL) == [True]
    assert pd.Series(["ok", "failed"]).ne(EngineStatus.OK).tolist() == [False, True]
