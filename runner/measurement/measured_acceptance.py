"""The per-position acceptance rates an earlier run measured, read from its persisted trials (for a
`measured:<run folder>` acceptance profile)."""
from __future__ import annotations

from pathlib import Path

from runner.measurement.spec_predict import pooled_rates

COLUMNS = ["status", "spec_method", "spec_num_drafts", "spec_acceptance_per_position", "spec_schedule",
           "spec_acceptance_profile"]


def measured_rates(run_dir: str | Path, *, method: str) -> list[float]:
    """Rates pooled over the run's finished trials of `method` that ran with real acceptance ([] if none)."""
    from runner.sinks.parquet import has_table, read_rows

    run_dir = Path(run_dir)
    if not has_table(run_dir, "trials"):
        raise FileNotFoundError(f"no trials (trials.parquet or its parts) in {run_dir}")
    rows = [r for r in read_rows(run_dir, "trials", COLUMNS) if not r.get("spec_acceptance_profile")]
    return pooled_rates(rows, method=method)
