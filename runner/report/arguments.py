"""The report command's arguments checked before it acts (`vllm-sweep report`, `python -m runner.report`): each
problem names its fix, and nothing is created or written by a report that then refuses. Called at the
command-line entry (runner/cli.py, runner/report/__main__.py), before the report imports what it runs."""
from __future__ import annotations

import errno
import math
import os
import tempfile
from pathlib import Path
from typing import Optional


def refuse(problems: list[str]) -> int:
    """Prints each problem as the CLI's refusals are printed; the exit code (2 where any, else 0)."""
    import sys

    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 2 if problems else 0


def report_problems(*, folders: list[Path], out: Optional[Path], tie_band=None, bandwidth_tbs=None,
                    gpu_hour_usd=None) -> list[str]:
    """Why `vllm-sweep report FOLDER... [--out DIR]` cannot run as given."""
    problems = [p for folder in folders for p in [run_folder_problem(Path(folder))] if p]
    if problems:
        return problems
    target = Path(out) if out is not None else Path(folders[0])
    problem = out_folder_problem(target, flag="--out" if out is not None else None)
    if problem:
        problems.append(problem)
    problems += _settings_problems(tie_band=tie_band, gpu_hour_usd=gpu_hour_usd)
    if bandwidth_tbs is not None and not (math.isfinite(bandwidth_tbs) and bandwidth_tbs > 0):
        problems.append(f"--bandwidth-tbs {bandwidth_tbs:g} must be TB/s > 0 (fix: --bandwidth-tbs 3.35)")
    return problems


def _settings_problems(*, tie_band, gpu_hour_usd) -> list[str]:
    """The report flags by the rule the config's `report:` block follows (runner/config/report.py)."""
    from runner.config.report import ReportSettingsError, parse_settings

    problems = []
    for key, flag, value in (("tie_band", "--tie-band", tie_band), ("gpu_hour_usd", "--gpu-hour-usd", gpu_hour_usd)):
        if value is None:
            continue
        try:
            parse_settings({key: value})
        except ReportSettingsError as exc:
            problems.append(str(exc).replace(f"report.{key}=", f"{flag} "))
    return problems


def run_folder_problem(folder: Path) -> Optional[str]:
    """Why `folder` is not a run folder a report can read (None where it is)."""
    from runner.sinks.parquet import has_table

    fix = "fix: give a run folder, outputs/<sweep>/<run>"
    if not folder.exists():
        return f"{folder}: no such folder ({fix})"
    if not folder.is_dir():
        return f"{folder} is a file, not a run folder ({fix}; --out names where the report goes)"
    if not os.access(folder, os.R_OK | os.X_OK):
        return f"{folder}: cannot be read (fix: chmod u+rx {folder})"
    if not has_table(folder, "trials") and not has_table(folder, "engines"):
        runs = sorted(str(d) for d in folder.iterdir() if d.is_dir() and (has_table(d, "trials") or
                                                                          has_table(d, "engines")))
        if runs:
            shown = ", ".join(runs[:3]) + (f" (+{len(runs) - 3} more)" if len(runs) > 3 else "")
            return f"{folder} holds runs, not results: no results (trials / engines) in it (fix: name a run: {shown})"
        return f"{folder}: no results (trials / engines, as parts or .parquet files) in it: not a run folder ({fix})"
    return config_problem(folder)


def config_problem(folder: Path) -> Optional[str]:
    """A run folder's config.yaml that cannot be read (not YAML, truncated, not a mapping)."""
    from runner.config.resume import unreadable_config

    return unreadable_config(folder, fix="repair it, or move it aside to report with the default settings",
                             required=())


def out_folder_problem(target: Path, *, flag: Optional[str]) -> Optional[str]:
    """Why the report's files cannot go into `target` (None where they can); tested without creating anything."""
    name = f"{flag} {target}" if flag else f"{target} (where the report goes without --out)"
    fix = "fix: --out DIR, a folder you can write"
    if target.exists() and not target.is_dir():
        return f"{name} is a file, not a folder ({fix})"
    existing = target
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return f"{name}: {existing} is a file, so no folder can be made there ({fix})"
    reason = _write_test(existing)
    if reason:
        return f"{name}: cannot write in {existing} ({reason}; {fix})"
    return None


def _write_test(folder: Path) -> Optional[str]:
    """Writes and removes a file in an existing folder (root passes os.access everywhere; a read-only mount not)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".report-write-test-"):
            pass
    except OSError as exc:
        return exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return None
