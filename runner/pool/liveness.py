"""Whether the command holding a pooled engine still runs, through Ray's public API: each command that holds
pooled engines owns one small actor (CommandHolder, not detached, so Ray ends it with the command's driver), and a
pooled engine asks it. An answer: alive; Ray's word that the actor died: gone; anything else (no answer in time,
the actor unreachable for now, an error): unknown, with the reason. Unknown is never taken for alive nor gone:
a claim is refused saying the check is unavailable, and the engine is not put back in the pool.
"""
from __future__ import annotations

import asyncio

from runner.pool.member import HolderCheck, Liveness

HOLDER_CHECK_TIMEOUT_S = 5.0


class CommandHolder:
    """The actor a command holding pooled engines owns (wrapped by `ray.remote` on the driver): its liveness is
    the command's."""

    def alive(self) -> bool:
        return True


async def check_holder(handle, *, timeout_s: float = HOLDER_CHECK_TIMEOUT_S) -> HolderCheck:
    """Asks the holder actor `handle` (a pooled engine's call; async, so the actor's other calls go on)."""
    if handle is None:
        return HolderCheck(liveness=Liveness.UNKNOWN, reason="the holding command left no holder actor to ask")
    from ray.exceptions import ActorDiedError, ActorUnavailableError

    try:
        await asyncio.wait_for(_answer(handle.alive.remote()), timeout=timeout_s)
    except ActorUnavailableError as exc:  # a RayActorError too, but not a death: it may come back
        return HolderCheck(liveness=Liveness.UNKNOWN, reason=f"holder actor unavailable: {_short(exc)}")
    except ActorDiedError as exc:
        return HolderCheck(liveness=Liveness.GONE, reason=f"holder actor died: {_short(exc)}")
    except asyncio.TimeoutError:
        return HolderCheck(liveness=Liveness.UNKNOWN, reason=f"holder actor did not answer within {timeout_s:g} s")
    except Exception as exc:  # the check itself failed: say so, decide nothing
        return HolderCheck(liveness=Liveness.UNKNOWN, reason=f"check failed: {type(exc).__name__}: {_short(exc)}")
    return HolderCheck(liveness=Liveness.ALIVE)


async def _answer(ref):
    return await ref


def _short(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
