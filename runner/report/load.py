"""Read one or more results folders into DataFrames (engines, trials, requests, phases), tagged with their source folder."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from runner.config.workload_keys import with_current_names
from runner.schema import TABLES, column_names

# Request columns the report needs; the heavy list columns (ITLs, token ids) are left on disk.
REQUEST_COLUMNS = ["sweep", "run_id", "trial_id", "engine_id", "request_index", "session", "turn", "phase",
                   "prompt_tokens", "output_tokens", "cached_tokens", "ttft_s", "e2e_s", "tpot_s",
                   "output_hash", "error"]


@dataclass(kw_only=True)
class Results:
    engines: pd.DataFrame
    trials: pd.DataFrame
    requests: pd.DataFrame
    sources: list[str]  # one label per folder, in the order given
    # Each folder's persisted config.yaml ({} where there is none), in the same order.
    configs: list[dict] = field(default_factory=list)
    run_dirs: list[Path] = field(default_factory=list)
    # The driver's timeline (phases.parquet; empty for runs from before it existed).
    phases: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The first of two runs of each load's first trial (empty where none ran): trial rows and their requests.
    first_runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    first_run_requests: pd.DataFrame = field(default_factory=pd.DataFrame)


def source_labels(run_dirs: list[Path]) -> list[str]:
    """Folder names, lengthened by parent folders until they are distinct."""
    paths = [Path(p).resolve() for p in run_dirs]
    depth = 1
    while True:
        labels = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(labels)) == len(labels) or depth >= max(len(p.parts) for p in paths):
            return labels
        depth += 1


class DamagedTable(ValueError):
    """A table file that is cut short or not Parquet; the message names the file and the fix."""


def _damaged_file(run_dir: Path, table: str) -> Path | None:
    """The first of the table's files whose footer pyarrow cannot read."""
    import pyarrow.parquet as pq

    from runner.sinks.parquet import part_files, table_path

    for path in [table_path(run_dir, table), *(p for _, p in part_files(run_dir, table))]:
        if not path.exists():
            continue
        try:
            pq.read_metadata(path)
        except Exception:  # noqa: BLE001 — any unreadable footer is the damage being looked for
            return path
    return None


def _read(run_dir: Path, table: str, columns: list[str] | None = None) -> pd.DataFrame:
    """One table of one run (compacted file, parts, or an older run's single file); only `columns` are read."""
    import pyarrow as pa

    from runner.sinks.parquet import has_table, read_frame

    if not has_table(run_dir, table):
        return pd.DataFrame(columns=columns or column_names(TABLES[table]))
    try:
        return read_frame(run_dir, table, columns)  # columns older files lack read as null
    except (pa.ArrowInvalid, OSError) as exc:
        path = _damaged_file(run_dir, table) or run_dir / f"{table}.parquet"
        lost = ("the report then draws without per-request figures" if table != "trials" and table != "engines"
                else "a resume of the same run (same run=<name>) measures its trials again")
        raise DamagedTable(f"{path} is cut short or not Parquet ({type(exc).__name__}: {exc}). Fix: copy it again "
                           f"from the machine that ran the sweep, or move it aside (mv {path} {path}.damaged): "
                           f"{lost}") from None


def read_config(run_dir: Path) -> dict:
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        return {}
    import yaml

    config = yaml.safe_load(path.read_text())
    return config if isinstance(config, dict) else {}


def load_results(run_dirs: list[Path]) -> Results:
    # The same folder twice (a symlink, a repeated argument) would compare a run with itself.
    run_dirs = list({Path(d).resolve(): Path(d) for d in run_dirs}.values())
    from runner.sinks.parquet import has_table

    missing = [str(d) for d in run_dirs if not has_table(d, "trials") and not has_table(d, "engines")]
    if missing:
        raise FileNotFoundError(f"no results (trials / engines, as parts or .parquet files) in: {', '.join(missing)}")
    labels = source_labels(run_dirs)
    frames: dict[str, list[pd.DataFrame]] = {t: [] for t in ("engines", "trials", "requests", "phases", "first_runs",
                                                             "first_run_requests")}
    for run_dir, label in zip(run_dirs, labels):
        for table in frames:
            columns = REQUEST_COLUMNS if table in ("requests", "first_run_requests") else None
            frame = _read(Path(run_dir), table, columns)
            frame["source"] = label
            frames[table].append(frame)
    out = {t: pd.concat(fs, ignore_index=True) if fs else pd.DataFrame() for t, fs in frames.items()}
    for rows in (out["trials"], out["first_runs"]):
        if len(rows):  # canonical params text, so the same point in two folders compares equal
            rows["workload_params_json"] = [json.dumps(with_current_names(w, json.loads(p or "{}")), sort_keys=True)
                                            for w, p in zip(rows.workload, rows.workload_params_json)]
    trials = out["trials"]
    return Results(engines=out["engines"], trials=trials, requests=out["requests"], sources=labels,
                   configs=[read_config(d) for d in run_dirs], run_dirs=run_dirs, phases=out["phases"],
                   first_runs=out["first_runs"], first_run_requests=out["first_run_requests"])
