"""The caveat of a run whose engines shared a GPU (trials' `engines_on_device` above 1, cluster.engines_per_gpu).
Pure, over the trials table."""
from __future__ import annotations

import pandas as pd

from runner.report.render import section


def shared_device_section(trials: pd.DataFrame) -> str:
    """report.md's caveat, near its top: shared-device figures are not speed figures."""
    if not len(trials) or "engines_on_device" not in trials:
        return ""
    shared = pd.to_numeric(trials.engines_on_device, errors="coerce").fillna(1)
    if not (shared > 1).any():
        return ""
    n = int(shared.max())
    return section("Caveat: engines shared a GPU",
                   f"{int((shared > 1).sum())} of {len(trials)} trial rows ran with up to {n} engines side by side "
                   f"on one GPU (cluster.engines_per_gpu={n}; each engine its own lane and 1/{n} of the GPU's "
                   "memory). Their speed figures (throughput, TTFT, TPOT, latency, goodput) were measured while "
                   "another engine used the same GPU's compute and memory bandwidth: they are not speed figures "
                   "of the engine alone, and arms compare fairly only if they shared alike. Acceptance and outputs "
                   "are unaffected; KV capacity is that of each engine's own share (its gpu_memory_utilization). "
                   "For speed, run with "
                   "cluster.engines_per_gpu=1.")
