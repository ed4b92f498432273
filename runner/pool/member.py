"""A pooled engine's lease and idle clock (pure): who holds it, since when it is idle, when it ends itself."""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Optional



class Liveness(enum.StrEnum):
    """Whether the command holding a pooled engine still runs (runner.pool.liveness checks it)."""

    ALIVE = "alive"
    GONE = "gone"
    UNKNOWN = "unknown"  # the check is unavailable (the reason says why)


@dataclass(frozen=True, kw_only=True)
class HolderCheck:
    liveness: Liveness
    reason: str = ""


class PoolState(enum.StrEnum):
    """What `pool list` shows of one pooled engine."""

    LOADING = "loading"  # no engine (yet): its load is in progress or failed
    BUSY = "busy"  # held by a running command
    AWAKE = "awake"  # loaded and idle, not asleep (CPU engines: vLLM's CPU build has no sleep mode)
    ASLEEP = "asleep"  # vLLM sleep mode level 1: weights in host RAM, KV dropped


@dataclass(frozen=True, kw_only=True)
class PoolEntry:
    """What the driver tells a pooled actor at its creation."""

    pool: str
    name: str  # the actor's Ray name, derived from `identity`
    identity: dict  # runner.pool.identity.PoolIdentity, as a dict
    summary: str  # the engine in words, for `pool list`
    ttl_s: float  # idle seconds before it ends itself
    holder: Optional[str] = None  # the command that creates it holds it from the start (its load may be long)
    holder_handle: object = None  # that command's holder actor (runner.pool.liveness.CommandHolder)
    bundle: Optional[str] = None  # its lane's placement-group bundle (CUDA: group id:index), where it has one


@dataclass(kw_only=True)
class Membership:
    """The pooled actor's lease and idle clock (pure: the actor checks its holder's liveness)."""

    entry: PoolEntry
    holder: Optional[str] = None  # the Ray job id (hex) of the command that holds it
    holder_handle: object = None  # that command's holder actor: its liveness is the command's
    idle_since: float = field(default_factory=time.monotonic)
    busy_calls: int = 0  # calls of its holder in progress (a trial): never idle meanwhile

    def hold(self, holder: str, handle: object) -> None:
        self.holder, self.holder_handle = holder, handle
        self.touch()

    def free(self) -> None:
        self.holder, self.holder_handle = None, None
        self.touch()

    def touch(self) -> None:
        self.idle_since = time.monotonic()

    def idle_s(self, now: Optional[float] = None) -> float:
        return 0.0 if self.busy_calls else max(0.0, (now or time.monotonic()) - self.idle_since)

    def ttl_left_s(self, now: Optional[float] = None) -> float:
        return max(0.0, self.entry.ttl_s - self.idle_s(now)) if self.holder is None else self.entry.ttl_s

    def expired(self, now: Optional[float] = None) -> bool:
        """A held engine never expires (its holder may come back to it); a free one after ttl_s idle."""
        return self.holder is None and not self.busy_calls and self.idle_s(now) >= self.entry.ttl_s

    def needs_check(self, holder: str) -> bool:
        """Whether a claim by `holder` depends on the current holder's liveness (held by another command)."""
        return self.holder is not None and self.holder != holder

    def refusal(self, holder: str, check: Optional[HolderCheck] = None) -> Optional[str]:
        """Why `holder` may not claim the engine (None: it may): free, already its own, or held by a command that
        is gone. Held by another whose liveness cannot be checked: refused, saying so (never taken as alive or
        gone by default)."""
        if not self.needs_check(holder):
            return None
        if check is None or check.liveness is Liveness.UNKNOWN:
            why = check.reason if check is not None else "not checked"
            return (f"held by Ray job {self.holder}, and whether that command still runs cannot be checked ({why}); "
                    f"fix: vllm-sweep pool release {self.entry.pool}")
        if check.liveness is Liveness.ALIVE:
            return f"held by the running command of Ray job {self.holder}"
        return None
