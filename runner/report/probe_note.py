"""The "Against offered rate" section's line on capped probes (sweep.rate_search.probe_s): how long a probe below
saturation sent, and how many requests its p99 stands on."""
from __future__ import annotations

import json

import pandas as pd

from runner.measurement.workloads.open_loop import CAPPED_MIN_ARRIVALS


def probe_notes(trials: pd.DataFrame) -> list[str]:
    """One line where some trials' schedules were cut at max_duration_s; [] where none were."""
    if trials is None or not len(trials) or "workload_params_json" not in trials:
        return []
    caps = [json.loads(p or "{}").get("max_duration_s") for p in trials.workload_params_json]
    capped = trials[[c is not None for c in caps]]
    if not len(capped):
        return []
    seconds = sorted({float(c) for c in caps if c is not None})
    counts = pd.to_numeric(capped.get("num_requests"), errors="coerce").dropna()
    sent = f"; measured requests per probe here {int(counts.min())}–{int(counts.max())}" if len(counts) else ""
    return [f"Probes below saturation sent for at most {'/'.join(f'{s:g}' for s in seconds)} s "
            f"(sweep.rate_search.probe_s): min(num_requests, max({CAPPED_MIN_ARRIVALS}, rate × that)) requests each, "
            f"so that a low rate answers in seconds{sent}. A repeat's p99 stands on at least {CAPPED_MIN_ARRIVALS} "
            f"requests (it lies between its two slowest); a probe that short may miss queueing that builds up over "
            f"minutes just below saturation."]
