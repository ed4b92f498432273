"""The one `over_length` setting of the workloads that replay data (prompt sets, traces): what a request whose
prompt is over its limit gets. Each workload clips the side that keeps its data's meaning. Pure."""
from __future__ import annotations

import enum


class OverLength(enum.StrEnum):
    """What a request over its limit gets; skipped and clipped requests are counted per trial
    (over_length_skipped, over_length_clipped)."""

    REFUSE = "refuse"  # the run is refused before any engine starts, naming the request and the fix
    SKIP = "skip"  # not sent: a trace's request; a prompt set's turn, and its conversation's later turns (their
    # history is longer still)
    CLIP = "clip"  # cut to fit. A prompt set keeps a prompt's last tokens (the newest turn and the header the
    # model answers after); a trace keeps a prompt's first tokens (its shared prefix blocks, as recorded)


def check_over_length(value) -> list[str]:
    if value not in tuple(OverLength):
        return [f"over_length={value!r} is unknown; valid: {', '.join(OverLength)}"]
    return []
