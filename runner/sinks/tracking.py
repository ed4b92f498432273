"""Experiment tracking sinks. Parquet is the record; a tracker failure never loses or blocks results."""
from __future__ import annotations

import sys
from pathlib import Path


class NullTracker:
    def log_engine(self, record) -> None:
        pass

    def log_trial(self, record, requests) -> None:
        pass

    def finish(self) -> None:
        pass


def open_tracker(*, tracking: dict, keys, run_dir: Path, plan):
    if not tracking.get("enabled"):
        return NullTracker()
    try:
        from runner.sinks.wandb_sink import WandbTracker

        return WandbTracker(tracking=tracking, keys=keys, run_dir=run_dir, plan=plan)
    except Exception as exc:  # W&B is optional: Parquet stays the record
        print(f"warning: W&B tracking off ({type(exc).__name__}: {exc})", file=sys.stderr)
        return NullTracker()
