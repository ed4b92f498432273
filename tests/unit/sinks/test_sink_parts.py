"""Append-only results: one atomic part per write, last write wins, compaction, older runs (no engine)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runner.report.load import REQUEST_COLUMNS, load_results
from runner.schema import TABLES, EngineRecord, PhaseRecord, RequestRecord, TrialRecord, arrow_schema
from runner.sinks.parquet import has_table, part_files, parts_dir, read_frame, read_table, table_path, write_atomic
from runner.sinks.result_sink import ParquetSink
from runner.summary import print_summary


def _engine(engine_id: str = "e0", *, status: str = "ok", load_s: float = 1.0) -> EngineRecord:
    return EngineRecord(model="m", sweep="s", run_id="r", engine_id=engine_id, status=status, load_s=load_s)


def _trial(trial_id: str, *, status: str = "ok", engine_id: str = "e0", started_at: float = 1.0,
           attempts: int = 1, concurrency: int = 1) -> TrialRecord:
    return TrialRecord(model="m", sweep="s", run_id="r", trial_id=trial_id, engine_id=engine_id, workload="decode",
                       workload_params_json="{}", status=status, started_at=started_at, attempts=attempts,
                       concurrency=concurrency, repeat=0, decode_tok_s_per_session=100.0 + started_at,
                       ttft_p50_s=0.1, tpot_p50_s=0.01)


def _requests(trial_id: str, n: int, *, tag: int = 0) -> list[RequestRecord]:
    return [RequestRecord(sweep="s", run_id="r", trial_id=trial_id, engine_id="e0", request_index=i,
                          output_tokens=8 + tag, itl_s=[0.01] * 7, chunk_sizes=[1] * 7,
                          output_token_ids=list(range(8)), output_hash=f"h{tag}") for i in range(n)]


def _phase(i: int) -> PhaseRecord:
    return PhaseRecord(sweep="s", run_id="r", lane=0, phase="trial", trial_id=f"t{i}", started_at=float(i),
                       duration_s=1.0)


def _sweep(run_dir: Path, n: int = 3) -> ParquetSink:
    sink = ParquetSink(run_dir)
    sink.write_engine(_engine())
    for i in range(n):
        sink.write_trial(_trial(f"t{i}", started_at=float(i)), _requests(f"t{i}", 2))
        sink.write_phase(_phase(i))
    return sink


def _snapshot(run_dir: Path) -> dict[str, pd.DataFrame]:
    return {t: read_frame(run_dir, t) for t in TABLES}


def _assert_same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(a[table].reset_index(drop=True), b[table].reset_index(drop=True),
                                      check_dtype=True, obj=table)


# ---- writing ----------------------------------------------------------------------------------------
def test_every_write_is_one_new_part_and_a_trials_requests_come_first(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write_engine(_engine())
    sink.write_trial(_trial("t0"), _requests("t0", 3))
    sink.write_trial(_trial("t1"), _requests("t1", 2))
    sink.write_phase(_phase(0))
    numbers = {t: [n for n, _ in part_files(tmp_path, t)] for t in TABLES}
    assert numbers == {"engines": [0], "requests": [1, 3], "trials": [2, 4], "phases": [5], "first_runs": [],
                       "first_run_requests": []}
    for table in TABLES:  # every part has the table's one schema
        for _, path in part_files(tmp_path, table):
            assert pq.read_schema(path).remove_metadata().equals(arrow_schema(TABLES[table]).remove_metadata())
    assert pq.read_table(parts_dir(tmp_path, "requests") / "part-000001.parquet").num_rows == 3
    assert not any(table_path(tmp_path, t).exists() for t in TABLES)  # nothing rewritten whole
    assert not [p for p in tmp_path.rglob(".*")]  # no temporary file left behind
    assert sink.rows["trials"][1]["trial_id"] == "t1" and sink.finished_trial_ids() == {"t0", "t1"}


def test_a_first_trials_first_run_sits_apart_from_the_trials_and_survives_compaction(tmp_path):
    sink = _sweep(tmp_path, n=2)
    sink.write_first_run(_trial("t0", started_at=5.0), _requests("t0", 2, tag=1))
    sink.write_first_run(_trial("t0", started_at=6.0), _requests("t0", 3, tag=2))  # a retried trial's first run wins
    before = _snapshot(tmp_path)
    assert list(before["trials"].trial_id) == ["t0", "t1"] and len(before["requests"]) == 4
    assert list(before["first_runs"].started_at) == [6.0] and list(before["first_run_requests"].output_hash) == ["h2"] * 3
    sink.compact()
    _assert_same(before, _snapshot(tmp_path))
    results = load_results([tmp_path])
    assert len(results.first_runs) == 1 and len(results.first_run_requests) == 3 and len(results.trials) == 2


def test_a_temporary_part_and_a_truncated_hidden_file_are_not_read(tmp_path):
    _sweep(tmp_path, n=2)
    folder = parts_dir(tmp_path, "trials")
    whole = (folder / "part-000002.parquet").read_bytes()
    (folder / ".part-000099.parquet.123.tmp").write_bytes(whole[: len(whole) // 2])  # a write cut short
    (folder / ".part-000100.parquet").write_bytes(whole[:10])
    trials = read_frame(tmp_path, "trials")
    assert list(trials.trial_id) == ["t0", "t1"]
    assert len(pd.read_parquet(folder)) == 2  # pandas skips hidden names too
    (folder / "notes.txt").write_text("not a part")
    assert list(read_frame(tmp_path, "trials").trial_id) == ["t0", "t1"]
    sink = ParquetSink(tmp_path)  # a resume
    assert sink.finished_trial_ids() == {"t0", "t1"}
    sink.compact()
    assert not list(folder.glob(".part-*")) and (folder / "notes.txt").exists()  # leftovers of ours removed


def test_a_retried_trial_and_a_restarted_engine_last_write_wins(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write_engine(_engine(status="failed", load_s=None))
    sink.write_trial(_trial("t0", status="failed"), [])
    sink.write_trial(_trial("t1"), _requests("t1", 2))
    sink.write_engine(_engine(load_s=2.5))  # re-started: now up
    sink.write_trial(_trial("t0", attempts=2, started_at=5.0), _requests("t0", 3, tag=1))  # retry_failed
    sink.write_trial(_trial("t1", status="failed", started_at=6.0), [])  # a re-run with no requests
    engines = read_frame(tmp_path, "engines")
    assert len(engines) == 1 and engines.status[0] == "ok" and engines.load_s[0] == 2.5
    trials = read_frame(tmp_path, "trials").set_index("trial_id")
    assert list(trials.index) == ["t0", "t1"]  # the order of the last writes
    assert trials.loc["t0", "attempts"] == 2 and trials.loc["t1", "status"] == "failed"
    requests = read_frame(tmp_path, "requests")
    assert list(requests.trial_id) == ["t0"] * 3 and (requests.output_tokens == 9).all()
    assert len(pd.read_parquet(parts_dir(tmp_path, "trials"))) == 4  # the raw parts keep every write
    assert ParquetSink(tmp_path).finished_trial_ids(include_failed=False) == {"t0"}


def test_resume_after_compaction_adds_parts_with_growing_numbers(tmp_path):
    sink = _sweep(tmp_path, n=3)
    last = max(n for t in TABLES for n, _ in part_files(tmp_path, t))
    assert sink.compact() == {"engines": 1, "trials": 3, "requests": 3, "phases": 3, "first_runs": 0, "first_run_requests": 0}
    assert not any(parts_dir(tmp_path, t).exists() for t in TABLES)
    resumed = ParquetSink(tmp_path)
    assert resumed.finished_trial_ids() == {"t0", "t1", "t2"} and len(resumed.rows["engines"]) == 1
    assert "requests" not in resumed.rows  # requests stay on disk
    resumed.write_trial(_trial("t1", attempts=2, started_at=9.0), _requests("t1", 4, tag=2))
    resumed.write_trial(_trial("t3", started_at=3.0), _requests("t3", 2))
    resumed.write_phase(_phase(3))
    assert min(n for t in TABLES for n, _ in part_files(tmp_path, t)) == last + 1
    trials = read_frame(tmp_path, "trials")
    assert list(trials.trial_id) == ["t0", "t2", "t1", "t3"]
    requests = read_frame(tmp_path, "requests")
    assert requests.groupby("trial_id").size().to_dict() == {"t0": 2, "t1": 4, "t2": 2, "t3": 2}
    assert len(read_frame(tmp_path, "phases")) == 4
    before = _snapshot(tmp_path)
    ParquetSink(tmp_path).compact()
    _assert_same(before, _snapshot(tmp_path))
    assert ParquetSink(tmp_path).compact() == {t: 0 for t in TABLES}  # nothing left to fold
    assert next(iter(part_files(tmp_path, "trials")), None) is None
    again = ParquetSink(tmp_path)
    again.write_phase(_phase(4))
    assert part_files(tmp_path, "phases")[0][0] == last + 6  # 5 parts since the first compaction


def test_compaction_equals_the_dataset_before_it(tmp_path):
    sink = _sweep(tmp_path, n=5)
    sink.write_trial(_trial("t2", attempts=2, started_at=7.0), _requests("t2", 1, tag=3))
    sink.write_engine(_engine(load_s=4.0))
    before = _snapshot(tmp_path)
    light = read_frame(tmp_path, "requests", REQUEST_COLUMNS)
    sink.compact()
    written = ("engines", "trials", "requests", "phases")  # no first run written: no first_runs file
    assert {p.name for p in tmp_path.iterdir()} == {f"{t}.parquet" for t in written}
    _assert_same(before, _snapshot(tmp_path))
    pd.testing.assert_frame_equal(light, read_frame(tmp_path, "requests", REQUEST_COLUMNS))
    assert pd.read_parquet(table_path(tmp_path, "trials")).trial_id.is_unique  # a plain reader sees no duplicate


def test_a_crash_midway_through_compaction_leaves_the_same_rows(tmp_path):
    sink = _sweep(tmp_path, n=4)
    sink.write_trial(_trial("t3", attempts=2, started_at=8.0), _requests("t3", 3, tag=1))
    sink.write_first_run(_trial("t0", started_at=0.5), _requests("t0", 2, tag=2))
    before = _snapshot(tmp_path)
    parts = {t: [(path, path.read_bytes()) for _, path in part_files(tmp_path, t)] for t in TABLES}
    sink.compact()
    # As if it stopped after writing the compacted files, with only the oldest parts of each table removed.
    for table, files in parts.items():
        parts_dir(tmp_path, table).mkdir(exist_ok=True)
        for path, data in files[len(files) // 2:]:
            path.write_bytes(data)
    assert all(part_files(tmp_path, t) and table_path(tmp_path, t).exists() for t in TABLES)
    _assert_same(before, _snapshot(tmp_path))  # phases too: no row counted twice
    resumed = ParquetSink(tmp_path)  # resumed, then compacted at its end: the stale parts go too
    resumed.write_phase(_phase(9))
    resumed.compact()
    assert not any(parts_dir(tmp_path, t).exists() for t in TABLES)
    after = _snapshot(tmp_path)
    assert list(after["phases"].trial_id) == [*before["phases"].trial_id, "t9"]
    _assert_same({**before, "phases": after["phases"]}, after)


def test_an_interrupted_compaction_keeps_every_row_and_the_next_one_finishes(tmp_path, monkeypatch):
    sink = _sweep(tmp_path, n=3)
    sink.write_trial(_trial("t0", attempts=2, started_at=8.0), _requests("t0", 1, tag=1))
    before = _snapshot(tmp_path)
    real_unlink = Path.unlink
    removed = []

    def killed_after_two(self, *args, **kwargs):
        if self.name.startswith("part-"):
            if len(removed) >= 2:
                raise KeyboardInterrupt("killed")
            removed.append(self)
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        sink.compact()
    monkeypatch.undo()
    assert table_path(tmp_path, "trials").exists() and part_files(tmp_path, "trials")  # stopped halfway
    _assert_same(before, _snapshot(tmp_path))
    ParquetSink(tmp_path).compact()
    assert not any(parts_dir(tmp_path, t).exists() for t in TABLES)
    _assert_same(before, _snapshot(tmp_path))


# ---- other readers --------------------------------------------------------------------------------
def test_pandas_reads_the_parts_folder(tmp_path):
    _sweep(tmp_path, n=3)
    trials = pd.read_parquet(tmp_path / "trials")
    assert sorted(trials.trial_id) == ["t0", "t1", "t2"]
    requests = pd.read_parquet(tmp_path / "requests", columns=["trial_id", "itl_s", "output_token_ids"])
    assert len(requests) == 6 and list(requests.output_token_ids[0]) == list(range(8))


def test_duckdb_reads_the_parts_folder(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    _sweep(tmp_path, n=3)
    folder = parts_dir(tmp_path, "trials")
    whole = (folder / "part-000002.parquet").read_bytes()
    (folder / ".part-000099.parquet.1.tmp").write_bytes(whole[:20])  # a write in flight
    con = duckdb.connect()
    rows = con.execute(f"select trial_id, status from read_parquet('{tmp_path}/trials/*.parquet') order by 1").fetchall()
    assert rows == [("t0", "ok"), ("t1", "ok"), ("t2", "ok")]
    count = con.execute(f"select count(*), sum(len(output_token_ids)) from "
                        f"read_parquet('{tmp_path}/requests/*.parquet')").fetchall()
    assert count == [(6, 48)]


def test_legacy_single_file_runs_still_load(tmp_path):
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    engine = dataclasses.asdict(_engine())
    trials = [dataclasses.asdict(_trial(f"t{i}", started_at=float(i))) for i in range(2)]
    requests = [dataclasses.asdict(r) for i in range(2) for r in _requests(f"t{i}", 2)]
    for table, rows in (("engines", [engine]), ("trials", trials), ("requests", requests)):
        write_atomic(rows=rows, table=table, path=table_path(run_dir, table))
    # An older file still lacks a column the schema has since gained.
    old = pq.read_table(table_path(run_dir, "trials")).drop_columns(["position", "gc_pauses"])
    pq.write_table(old, table_path(run_dir, "trials"))
    assert has_table(run_dir, "trials") and not has_table(run_dir, "phases")
    frame = read_frame(run_dir, "trials")
    assert list(frame.columns) == arrow_schema(TrialRecord).names and frame.position.isna().all()
    results = load_results([run_dir])
    assert len(results.trials) == 2 and len(results.requests) == 4 and results.phases.empty
    assert "itl_s" not in results.requests.columns  # the heavy list columns stay on disk
    sink = ParquetSink(run_dir)  # resumed by the new sink: parts on top of the old files
    assert sink.finished_trial_ids() == {"t0", "t1"} and sink._next_part == 0
    sink.write_trial(_trial("t1", attempts=2, started_at=5.0), _requests("t1", 1, tag=1))
    assert read_frame(run_dir, "requests").groupby("trial_id").size().to_dict() == {"t0": 2, "t1": 1}
    before = _snapshot(run_dir)
    sink.compact()
    _assert_same(before, _snapshot(run_dir))


def test_the_reports_and_summary_read_parts(tmp_path, capsys):
    _sweep(tmp_path, n=2)
    results = load_results([tmp_path])
    assert sorted(results.trials.trial_id) == ["t0", "t1"] and len(results.requests) == 4
    assert list(results.requests.columns) == [*REQUEST_COLUMNS, "source"]
    assert len(results.engines) == 1 and len(results.phases) == 2
    print_summary(run_dir=tmp_path)
    assert "decode" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError):
        load_results([tmp_path / "nothing"])


def test_read_table_columns_subset_reads_the_key_only_to_deduplicate(tmp_path):
    sink = _sweep(tmp_path, n=2)
    sink.write_trial(_trial("t0", attempts=2), _requests("t0", 1, tag=1))
    table = read_table(tmp_path, "requests", ["output_tokens"])
    assert table.column_names == ["output_tokens"] and sorted(table.column("output_tokens").to_pylist()) == [8, 8, 9]


def test_a_compaction_failure_warns_and_does_not_fail_the_sweep(tmp_path, capsys):
    from runner.command.session import compact as _compact

    class Broken(ParquetSink):
        def compact(self):
            raise OSError("disk full")

    _compact(Broken(tmp_path))
    assert "warning: compacting the results failed (OSError: disk full)" in capsys.readouterr().err
    sink = _sweep(tmp_path / "ok", n=1)
    _compact(sink)
    assert table_path(tmp_path / "ok", "trials").exists() and not parts_dir(tmp_path / "ok", "trials").exists()
