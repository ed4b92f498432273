"""The driver's writer of a run's results: every write one new part (runner.sinks.parquet), compaction at the end."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from runner.schema import TABLES, TrialStatus
from runner.sinks.compaction import compact_table
from runner.sinks.parquet import KEYS, next_part_number, read_rows, write_part


class ParquetSink:
    """Appends every write as a new part; keeps the engines and trials rows (not the requests) in memory."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._next_part = next_part_number(self.run_dir)
        self._rows: dict[str, dict[str, dict]] = {
            t: {r[KEYS[t]]: r for r in read_rows(self.run_dir, t)} for t in ("engines", "trials")}

    @property
    def rows(self) -> dict[str, list[dict]]:
        """The run's engines and trials rows as on disk (last write per key), in write order."""
        return {t: list(rows.values()) for t, rows in self._rows.items()}

    def finished_trial_ids(self, *, include_failed: bool = True) -> set[str]:
        return {r["trial_id"] for r in self._rows["trials"].values() if include_failed or r["status"] == TrialStatus.OK}

    def _append(self, table: str, rows: list[dict], *, supersedes: Optional[list[str]] = None) -> None:
        number = self._next_part
        self._next_part += 1
        write_part(self.run_dir, table, rows, number=number, supersedes=supersedes)

    def _keep(self, table: str, row: dict) -> None:
        rows = self._rows[table]
        rows.pop(row[KEYS[table]], None)  # a rewrite moves to the end, as on disk
        rows[row[KEYS[table]]] = row

    def write_engine(self, record) -> None:
        row = dataclasses.asdict(record)
        self._append("engines", [row])
        self._keep("engines", row)

    def write_phase(self, record) -> None:
        self._append("phases", [dataclasses.asdict(record)])

    def write_trial(self, record, requests: list) -> None:
        """Requests first, then the trial row: a trial id in trials means its requests are on disk."""
        self._append("requests", [dataclasses.asdict(r) for r in requests], supersedes=[record.trial_id])
        row = dataclasses.asdict(record)
        self._append("trials", [row])
        self._keep("trials", row)

    def write_first_run(self, record, requests: list) -> None:
        """The first of the two runs of `record.trial_id` (written before the trial), apart from every figure."""
        self._append("first_run_requests", [dataclasses.asdict(r) for r in requests], supersedes=[record.trial_id])
        self._append("first_runs", [dataclasses.asdict(record)])

    def compact(self) -> dict[str, int]:
        """Each table's parts folded into `<table>.parquet`: {table: parts folded}."""
        return {t: compact_table(self.run_dir, t) for t in TABLES}
