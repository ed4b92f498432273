"""The Parquet record of a run: engines, trials, requests, the timeline's phases; atomic, resumable.

Each write replaces a whole file through a rename, so a reader never sees a
partial file and a crash loses at most the trial in flight.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from runner.schema import TABLES, arrow_schema


def table_path(run_dir: Path, table: str) -> Path:
    return Path(run_dir) / f"{table}.parquet"


def write_atomic(*, rows: list[dict], table: str, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(TABLES[table])
    arrow = pa.Table.from_pylist(rows, schema=schema)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(arrow, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


class ParquetSink:
    """Holds the run's rows in memory and rewrites a table whenever it changes."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, list[dict]] = {t: read_rows(table_path(self.run_dir, t)) for t in TABLES}

    def finished_trial_ids(self, *, include_failed: bool = True) -> set[str]:
        return {r["trial_id"] for r in self.rows["trials"] if include_failed or r["status"] == "ok"}

    def ok_engine_ids(self) -> set[str]:
        return {r["engine_id"] for r in self.rows["engines"] if r["status"] == "ok"}

    def _replace(self, table: str, key: str, new_rows: list[dict]) -> None:
        keys = {r[key] for r in new_rows}
        kept = [r for r in self.rows[table] if r[key] not in keys]
        self.rows[table] = kept + new_rows

    def write_engine(self, record) -> None:
        self._replace("engines", "engine_id", [dataclasses.asdict(record)])
        write_atomic(rows=self.rows["engines"], table="engines", path=table_path(self.run_dir, "engines"))

    def write_phase(self, record) -> None:
        self.rows["phases"].append(dataclasses.asdict(record))
        write_atomic(rows=self.rows["phases"], table="phases", path=table_path(self.run_dir, "phases"))

    def write_trial(self, record, requests: list) -> None:
        """Requests first, then the trial row: a trial id in trials.parquet means its requests are on disk."""
        trial_id = record.trial_id
        self.rows["requests"] = [r for r in self.rows["requests"] if r["trial_id"] != trial_id]
        self.rows["requests"].extend(dataclasses.asdict(r) for r in requests)
        write_atomic(rows=self.rows["requests"], table="requests", path=table_path(self.run_dir, "requests"))
        self._replace("trials", "trial_id", [dataclasses.asdict(record)])
        write_atomic(rows=self.rows["trials"], table="trials", path=table_path(self.run_dir, "trials"))
