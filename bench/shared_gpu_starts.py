"""Engines sharing a GPU (cluster.engines_per_gpu): what a run's persisted files say about its starts.

    python bench/shared_gpu_starts.py outputs/draft_count/one-at-a-time outputs/draft_count/two-per-gpu

Per run folder: engines started / failed (with failure kinds), starts retried for memory (`start_retried_after`),
the `engines_on_device` on engine and trial rows, the `start` spans' seconds in all and the seconds in which two
lanes' starts overlapped (lanes 2i and 2i+1 share GPU i with engines_per_gpu=2), and the wall from the first span's
start to the last one's end. The last line gives the wall ratio of each folder to the first.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runner.sinks.parquet import has_table, read_frame  # noqa: E402


def overlap_s(spans: list[tuple[float, float]]) -> float:
    """Seconds in which at least two of the spans (start, end) ran at once."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    total, depth, last = 0.0, 0, None
    for t, step in events:
        if depth >= 2 and last is not None:
            total += t - last
        depth += step
        last = t
    return total


def summary(run: Path) -> dict:
    engines = read_frame(run, "engines")
    trials = read_frame(run, "trials") if has_table(run, "trials") else None
    phases = read_frame(run, "phases")
    on_device = engines["engines_on_device"].dropna() if "engines_on_device" in engines else []
    per_gpu = int(max(on_device)) if len(on_device) else 1
    starts = phases[phases["phase"] == "start"]
    overlapped = 0.0
    for _, group in starts[starts["lane"] >= 0].groupby(starts["lane"] // max(1, per_gpu)):
        overlapped += overlap_s([(r.started_at, r.started_at + r.duration_s) for r in group.itertuples()])
    lanes = phases[phases["lane"] >= 0]
    retried = engines["start_retried_after"].dropna() if "start_retried_after" in engines else []
    return {
        "run": str(run), "engines_ok": int((engines["status"] == "ok").sum()),
        "engines_failed": int((engines["status"] == "failed").sum()),
        "failure_kinds": sorted(engines["failure_kind"].dropna().unique().tolist()),
        "starts_retried": len(retried), "engines_on_device": sorted(set(on_device)),
        "trial_engines_on_device": sorted(trials["engines_on_device"].unique().tolist()) if trials is not None else [],
        "start_s": round(float(starts["duration_s"].sum()), 1), "start_overlap_s": round(overlapped, 1),
        "wall_s": round(float((lanes["started_at"] + lanes["duration_s"]).max() - lanes["started_at"].min()), 1),
    }


def main(argv: list[str]) -> int:
    rows = [summary(Path(a)) for a in argv]
    for row in rows:
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    if len(rows) > 1:
        print("wall ratio to the first: " + ", ".join(f"{r['run']}: {r['wall_s'] / rows[0]['wall_s']:.2f}"
                                                  for r in rows[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
