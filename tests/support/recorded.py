"""An engine actor's calls, recorded (no Ray): for the driver's pure tests."""
from __future__ import annotations

CALLS = ("adopt", "park", "sleep", "wake_up", "read_log", "shutdown", "start", "prepare", "run_trial")


class RecordedActor:
    """Each call `<method>.remote(...)` appends "<method> <name>" to `log` (" first" where the call says first=True)
    and returns that text as its ref."""

    def __init__(self, log: list, name: str):
        self.log, self.name = log, name
        for method in CALLS:
            setattr(self, method, _Call(log, f"{method} {name}"))


class _Call:
    def __init__(self, log: list, what: str):
        self.log, self.what = log, what

    def remote(self, **kwargs):
        self.log.append(self.what + (" first" if kwargs.get("first") else ""))
        return self.what
