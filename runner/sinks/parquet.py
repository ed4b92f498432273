"""The Parquet record of a run: engines, trials, requests, the timeline's phases; append-only, atomic, resumable.

Layout of a run folder, per table (`engines`, `trials`, `requests`, `phases`):

    <run_dir>/<table>/part-000042.parquet   one part per write: a trial's requests, its trial row, an engine
                                            row, a phase row; numbers grow across tables and across resumes
    <run_dir>/<table>.parquet               the compacted table (runner.sinks.compaction, at the end of a
                                            sweep), or the single file of a run from before parts existed

A part is written under a hidden temporary name in its folder, fsynced and renamed into place, so a reader
(which ignores names starting with '.') never sees half a part, and a crash loses at most the write in
flight. A trial's requests are on disk before its trial row. Every part has the table's one schema
(`runner.schema`), so `pd.read_parquet(run_dir / "trials")` and DuckDB's
`read_parquet('<run_dir>/trials/*.parquet')` read a parts folder as it is (raw: every write, retries included).

`read_table` is the one reader: the compacted file, then the parts after it in number order, with the
last write winning per key (engines: engine_id; trials: trial_id; requests: a trial's rows come from the
latest write of that trial; phases: append-only).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Iterator, Optional

from runner.schema import TABLES, arrow_schema

PART_PREFIX = "part-"
PART_NAME = re.compile(r"^part-(\d+)\.parquet$")
# File metadata: the highest part number a compacted file holds (parts up to it are in it), and the trial
# ids a requests part replaces (an empty part still replaces a trial's earlier requests).
LAST_PART_KEY = b"runner.last_part"
SUPERSEDES_KEY = b"runner.supersedes"
# The key whose last write wins, per table (requests: a trial's rows, see `_owned_trials`; phases: none).
KEYS: dict[str, Optional[str]] = {"engines": "engine_id", "trials": "trial_id", "requests": "trial_id",
                                  "phases": None, "first_runs": "trial_id", "first_run_requests": "trial_id"}
# Tables whose rows a trial owns as a set (a rewrite of the trial replaces them all).
PER_TRIAL = ("requests", "first_run_requests")


def table_path(run_dir: Path, table: str) -> Path:
    """The table's single file: the compacted table, or an older run's whole table."""
    return Path(run_dir) / f"{table}.parquet"


def parts_dir(run_dir: Path, table: str) -> Path:
    return Path(run_dir) / table


def part_files(run_dir: Path, table: str) -> list[tuple[int, Path]]:
    """The table's finished parts, in number order (hidden and temporary names are not parts)."""
    folder = parts_dir(run_dir, table)
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    parts = []
    for name in names:
        match = PART_NAME.match(name)
        if match:
            parts.append((int(match.group(1)), folder / name))
    return sorted(parts)


def has_table(run_dir: Path, table: str) -> bool:
    """Whether anything of the table is on disk (a compacted or legacy file, or a part)."""
    return table_path(run_dir, table).is_file() or bool(part_files(run_dir, table))


# ---- writing ------------------------------------------------------------------------------------
def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _publish(tmp: Path, path: Path) -> None:
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _arrow(rows: list[dict], table: str, metadata: Optional[dict] = None):
    import pyarrow as pa

    schema = arrow_schema(TABLES[table])
    if metadata:
        schema = schema.with_metadata({**(schema.metadata or {}), **metadata})
    return pa.Table.from_pylist(rows, schema=schema)


def write_atomic(*, rows: list[dict], table: str, path: Path, metadata: Optional[dict] = None) -> None:
    """Writes one whole file of `table` atomically: a hidden temporary name in the same folder, fsync, rename."""
    import pyarrow.parquet as pq

    path = Path(path)
    tmp = _temp_name(path)
    try:
        pq.write_table(_arrow(rows, table, metadata), tmp)
        _publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_part(run_dir: Path, table: str, rows: list[dict], *, number: int,
               supersedes: Optional[list[str]] = None) -> Path:
    """One part of `table` holding `rows`; `supersedes` (requests): the trial ids whose earlier rows it replaces."""
    folder = parts_dir(run_dir, table)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        _fsync_dir(folder.parent)
    path = folder / f"{PART_PREFIX}{number:06d}.parquet"
    metadata = {SUPERSEDES_KEY: json.dumps(list(supersedes))} if supersedes is not None else None
    write_atomic(rows=rows, table=table, path=path, metadata=metadata)
    return path


def _compacted_last_part(path: Path) -> int:
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_schema(path).metadata or {}
    except FileNotFoundError:
        return -1
    try:
        return int(metadata.get(LAST_PART_KEY, b"-1"))
    except ValueError:
        return -1


def next_part_number(run_dir: Path) -> int:
    """One past the largest part number the run has used, over every table, compacted files included."""
    last = -1
    for table in TABLES:
        parts = part_files(run_dir, table)
        if parts:
            last = max(last, parts[-1][0])
        if table_path(run_dir, table).is_file():
            last = max(last, _compacted_last_part(table_path(run_dir, table)))
    return last + 1


# ---- reading ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Source:
    path: Path
    part: Optional[int]  # None: the compacted (or legacy) file


class _Changed(Exception):
    """The compacted file was replaced while it was read (a compaction ran meanwhile): read again."""


def _identity(path: Path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _sources(run_dir: Path, table: str) -> tuple[list[_Source], object]:
    """The compacted file (if any), then the parts it does not hold, oldest first; and the compacted file's
    identity, to check that no compaction replaced it during the read."""
    compacted = table_path(run_dir, table)
    identity = _identity(compacted)
    sources, last = [], -1
    if identity is not None:
        sources.append(_Source(compacted, None))
        last = _compacted_last_part(compacted)
    sources += [_Source(path, n) for n, path in part_files(run_dir, table) if n > last]
    return sources, identity


def _conform(table, target):
    """The table with the `target` schema's columns, in its order; columns missing in older files read as null."""
    import pyarrow as pa

    if table.schema.equals(target, check_metadata=False):
        return table
    arrays = []
    for field in target:
        index = table.schema.get_field_index(field.name)
        if index >= 0:
            column = table.column(index)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=target)


def _iter_source(source: _Source, target) -> Iterator:
    """The source's rows in batches (bounded memory for a large compacted file), conformed to `target`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(source.path) as f:
        if f.metadata.num_rows == 0:
            return
        names = set(f.schema_arrow.names)
        present = [name for name in target.names if name in names]
        if f.metadata.num_row_groups <= 1:  # a part: one read
            yield _conform(f.read(columns=present, use_threads=False), target)
            return
        for batch in f.iter_batches(columns=present, batch_size=65_536, use_threads=False):
            yield _conform(pa.Table.from_batches([batch]), target)


def _mentioned_trials(source: _Source) -> set:
    """The trials whose requests this source writes: a part's `supersedes`, else its rows' trial ids."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if source.part is not None:
        metadata = pq.read_schema(source.path).metadata or {}
        if SUPERSEDES_KEY in metadata:
            return set(json.loads(metadata[SUPERSEDES_KEY]))
    with pq.ParquetFile(source.path) as f:
        if f.schema_arrow.get_field_index("trial_id") < 0:
            return set()
        return set(pc.unique(f.read(columns=["trial_id"], use_threads=False).column("trial_id")).to_pylist())


def _owned_trials(sources: list[_Source]) -> list[Optional[set]]:
    """Requests: per source, the trials whose rows it still holds (None: all of its rows), i.e. those no later
    source writes again."""
    mentioned = [_mentioned_trials(s) for s in sources]
    owner = {}
    for i, ids in enumerate(mentioned):
        for trial_id in ids:
            owner[trial_id] = i
    owned = [{t for t in ids if owner[t] == i} for i, ids in enumerate(mentioned)]
    return [None if mine == ids else mine for mine, ids in zip(owned, mentioned)]


def _last_per_key(table, key: str):
    """The last row of each key, in the order of those last rows."""
    import pyarrow as pa

    keys = table.column(key).to_pylist()
    last = {k: i for i, k in enumerate(keys)}
    if len(last) == len(keys):
        return table
    return table.take(pa.array(sorted(last.values()), pa.int64()))


def _iter_rows(table: str, sources: list[_Source], target) -> Iterator:
    """The table's rows that survive (last write wins), in write order, with the `target` schema (which holds
    the table's key); engines and trials at once, requests and phases source by source."""
    import pyarrow as pa
    import pyarrow.compute as pc

    key = KEYS[table]
    if key is not None and table not in PER_TRIAL:  # small tables: one pass, then the last row per key
        chunks = [chunk for source in sources for chunk in _iter_source(source, target)]
        if chunks:
            yield _last_per_key(pa.concat_tables(chunks), key)
        return
    owned = _owned_trials(sources) if table in PER_TRIAL else [None] * len(sources)
    for source, trials in zip(sources, owned):
        if trials is not None and not trials:
            continue  # wholly superseded: not even opened
        for chunk in _iter_source(source, target):
            if trials is not None:
                chunk = chunk.filter(pc.is_in(chunk[key], value_set=pa.array(sorted(trials), pa.string())))
            if chunk.num_rows:
                yield chunk


def _columns(table: str, columns: Optional[list[str]]) -> tuple[list[str], object]:
    """The columns asked for (default: all) and the schema to read them with (the key added, to deduplicate)."""
    import pyarrow as pa

    schema = arrow_schema(TABLES[table])
    wanted = list(columns) if columns else schema.names
    unknown = [c for c in wanted if schema.get_field_index(c) < 0]
    if unknown:
        raise KeyError(f"{table} has no column(s) {unknown}")
    key = KEYS[table]
    read = wanted + [key] if key is not None and key not in wanted else wanted
    return wanted, pa.schema([schema.field(c) for c in read])


def _stable_read(run_dir: Path, table: str, consume):
    """Runs `consume(sources)` over a consistent view of the table; again if a compaction ran meanwhile."""
    for attempt in range(5):
        try:
            sources, identity = _sources(run_dir, table)
            result = consume(sources)
            if _identity(table_path(run_dir, table)) != identity:
                raise _Changed()
            return result
        except (FileNotFoundError, _Changed):
            if attempt == 4:
                raise


def read_table(run_dir: Path, table: str, columns: Optional[list[str]] = None):
    """The table as one Arrow table: compacted/legacy file plus parts, last write wins per key.

    `columns` (default: all of the schema) are read only where asked (the requests' list columns stay on
    disk unless named); columns an older file lacks read as null.
    """
    import pyarrow as pa

    wanted, target = _columns(table, columns)

    def consume(sources):
        chunks = list(_iter_rows(table, sources, target))
        return (pa.concat_tables(chunks) if chunks else target.empty_table()).select(wanted)

    return _stable_read(Path(run_dir), table, consume)


def read_frame(run_dir: Path, table: str, columns: Optional[list[str]] = None):
    """`read_table` as a pandas DataFrame."""
    return read_table(run_dir, table, columns).to_pandas()


def read_rows(run_dir: Path, table: str, columns: Optional[list[str]] = None) -> list[dict]:
    return read_table(run_dir, table, columns).to_pylist()
