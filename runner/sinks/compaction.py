"""Compaction: a table's parts folded into `<run_dir>/<table>.parquet` at the end of a sweep (last write wins),
atomically and resumably; the layout and the reader are runner.sinks.parquet."""
from __future__ import annotations

import os
from pathlib import Path

from runner.schema import TABLES, arrow_schema
from runner.sinks.parquet import (LAST_PART_KEY, PART_PREFIX, _compacted_last_part, _fsync_dir, _iter_rows,
                                  _publish, _sources, _temp_name, part_files, parts_dir, table_path)

# Compaction writes row groups of about this many rows or bytes.
ROW_GROUP_ROWS = 100_000
ROW_GROUP_BYTES = 64 << 20


def compact_table(run_dir: Path, table: str) -> int:
    """Folds the table's parts into `<table>.parquet` (last write wins); returns how many parts it folded.

    The compacted file is written (atomically) before any part is removed, and parts go oldest first: a
    crash at any point leaves a readable table with the same rows.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    path = table_path(run_dir, table)
    schema = arrow_schema(TABLES[table])
    sources, _ = _sources(run_dir, table)
    parts = [s for s in sources if s.part is not None]
    # Parts an interrupted compaction had folded in already but not yet removed.
    held = _compacted_last_part(path) if path.is_file() else -1
    folded = [part for n, part in part_files(run_dir, table) if n <= held]
    if not parts:
        _remove_parts(run_dir, table, folded)
        return 0
    last = max(s.part for s in parts)
    schema = schema.with_metadata({**(schema.metadata or {}), LAST_PART_KEY: str(last).encode()})
    tmp = _temp_name(path)
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            pending, rows, size = [], 0, 0
            for chunk in _iter_rows(table, sources, schema.remove_metadata()):
                pending.append(chunk)
                rows, size = rows + chunk.num_rows, size + chunk.nbytes
                if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
                    writer.write_table(pa.concat_tables(pending).replace_schema_metadata(schema.metadata))
                    pending, rows, size = [], 0, 0
            if pending:
                writer.write_table(pa.concat_tables(pending).replace_schema_metadata(schema.metadata))
        _publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _remove_parts(run_dir, table, folded + [s.path for s in parts])
    return len(parts)


def _remove_parts(run_dir: Path, table: str, paths: list[Path]) -> None:
    """Removes folded parts oldest first (what a crash leaves is the newest parts, all in the compacted file),
    then temporary files of writes that never finished, and the parts folder once it is empty."""
    for path in paths:
        path.unlink(missing_ok=True)
    for name in os.listdir(run_dir):  # a compaction that never finished
        if name.startswith(f".{table}.parquet.") and name.endswith(".tmp"):
            (Path(run_dir) / name).unlink(missing_ok=True)
    folder = parts_dir(run_dir, table)
    if not folder.is_dir():
        return
    for name in os.listdir(folder):
        if name.startswith(f".{PART_PREFIX}"):
            (folder / name).unlink(missing_ok=True)
    _fsync_dir(folder)
    try:
        folder.rmdir()
    except OSError:  # not empty: someone else's files
        pass
