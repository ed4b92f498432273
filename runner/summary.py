"""The terminal's closing table, read from the persisted trials."""
from __future__ import annotations

from pathlib import Path

SUMMARY_COLUMNS = {
    "workload": "workload", "engine": "engine", "concurrency": "conc",
    "status": "status", "ttft_p50_ms": "ttft p50 ms", "tpot_p50_ms": "tpot p50 ms",
    "decode_tok_s_per_session": "tok/s/session", "decode_tok_s_aggregate": "tok/s total",
    "spec_acceptance_rate": "accept", "spec_mean_acceptance_length": "accept len",
    "prefix_cache_hit_rate": "pc hit",
}


def summary_frame(trials):
    frame = trials.copy()
    from runner.labels import labels_of_rows

    # The spec arm, then each setting in which this run's engines differ (kv_cache_dtype=fp8, pc=off, ...).
    label_of = labels_of_rows(frame.to_dict("records"))
    frame["engine"] = frame.engine_id.map(label_of)
    frame["ttft_p50_ms"] = frame.ttft_p50_s * 1000
    frame["tpot_p50_ms"] = frame.tpot_p50_s * 1000
    frame = frame.sort_values(["workload", "engine", "concurrency", "repeat"])
    return frame[list(SUMMARY_COLUMNS)].rename(columns=SUMMARY_COLUMNS)


def print_summary(*, run_dir: Path, trial_ids: set[str] | None = None) -> None:
    import pandas as pd

    from runner.schema import TrialStatus
    from runner.sinks.parquet import has_table, read_frame

    if not has_table(Path(run_dir), "trials"):
        print("no trials recorded")
        return
    trials = read_frame(Path(run_dir), "trials")
    if trial_ids is not None:
        trials = trials[trials.trial_id.isin(trial_ids)]
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 500,
                           "display.float_format", "{:.3g}".format):
        print(summary_frame(trials).to_string(index=False))
    not_run = trials[trials.status != TrialStatus.OK]
    for _, row in not_run.drop_duplicates(["status", "failure_kind"]).iterrows():
        print(f"{row.status} ({row.failure_kind}): {row.failure_reason}")
