"""Experiment tracking sinks. Parquet is the record; a tracker failure never loses or blocks results."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


class NullTracker:
    def log_engine(self, record) -> None:
        pass

    def log_trial(self, record, requests) -> None:
        pass

    def finish(self) -> None:
        pass


def open_tracker(*, tracking, run_dir: Path):
    """The run's tracker; the export reads everything from the run's files."""
    if not tracking.enabled or tracking.mode == "disabled":
        return NullTracker()
    if importlib.util.find_spec("wandb") is None:  # W&B is optional: Parquet stays the record
        print("warning: W&B tracking off (wandb is not installed; tracking=none silences this)", file=sys.stderr)
        return NullTracker()
    from runner.sinks.wandb_sink import WandbTracker

    return WandbTracker(tracking=tracking, run_dir=run_dir)
