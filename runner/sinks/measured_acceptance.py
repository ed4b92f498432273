"""What an earlier run measured, read from its persisted trials: the per-position acceptance rates (for a
`measured:<run folder>` acceptance profile) and the draft-count schedule of its best k per batch size (for an arm's
`num_speculative_tokens_per_batch_size: auto:<run folder>`)."""
from __future__ import annotations

from pathlib import Path

from typing import Optional

from runner.numerics.draft_schedule import DraftSchedule
from runner.numerics.measured_best_k import measured_choices
from runner.numerics.spec_predict import pooled_rates

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


def measured_schedule(run_dir: str | Path, *, method: str, profile: Optional[str],
                      max_num_seqs: int) -> Optional[DraftSchedule]:
    """The schedule from the run's best measured k per batch size for `method` (and the acceptance profile's JSON
    text, where the arm names one); None where k = 0 wins everywhere. ValueError says what the run lacks."""
    from runner.measurement.workloads import WORKLOADS
    from runner.sinks.parquet import has_table, read_rows

    run_dir = Path(run_dir)
    if not has_table(run_dir, "trials"):
        raise FileNotFoundError(f"no trials (trials.parquet or its parts) in {run_dir}")
    rows = read_rows(run_dir, "trials")
    metrics = {WORKLOADS[w].deciding for w in {r["workload"] for r in rows} if w in WORKLOADS}
    if len(metrics) != 1 or next(iter(metrics)).requests is not None:
        raise ValueError(f"{run_dir} holds workloads decided on {len(metrics)} figures; a schedule needs one "
                         f"workload decided on a trial figure (decode)")
    metric = metrics.pop()
    families = [f for f in measured_choices(rows, metric_column=metric.column, higher_is_better=metric.higher_is_better)
                if f.method == method and (profile is None or f.profile == profile)]
    if len(families) != 1:
        found = sorted({str(f.profile or "real") for f in families}) or ["none"]
        raise ValueError(f"{run_dir} has {len(families)} {method} families with static k beside spec off "
                         f"(profiles: {', '.join(found)}); the arm must name one with spec_acceptance_profile")
    return families[0].schedule(max_num_seqs=max_num_seqs)
