"""Data the driver ships to the actors once per node: a workload's file, read and prepared on the driver, put in
Ray's object store once (runner.scheduling.shipping); a trial carries only its reference. Each node fetches it
once, each process deserializes it once. Ray is imported only where a reference is read."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Each process reads a reference once (the sessions of a trial and of its warm-ups are the same object).
_READ: dict[str, Any] = {}
_KEEP = 4  # the last few payloads: a sweep's stages ship the same ones


@dataclass(frozen=True)
class ObjectStoreRef:
    """A payload in Ray's object store (`ref`: the ray.ObjectRef that ray.put gave the driver)."""

    ref: Any

    def value(self) -> Any:
        key = self.ref.hex()
        if key not in _READ:
            import ray

            self._keep(ray.get(self.ref))
        return _READ[key]

    async def fetch(self) -> None:
        """Fetches it without blocking the actor's event loop (a blocking get there would stall other calls)."""
        if self.ref.hex() not in _READ:
            self._keep(await self.ref)

    def _keep(self, value: Any) -> None:
        while len(_READ) >= _KEEP:
            _READ.pop(next(iter(_READ)))
        _READ[self.ref.hex()] = value


def resolved(payload: Any) -> Any:
    """The payload itself, fetched where it was shipped through the object store."""
    return payload.value() if isinstance(payload, ObjectStoreRef) else payload


async def fetch_payload(params) -> None:
    """A trial's shipped payload fetched once into this process, before anything of the trial is timed."""
    payload = params.payload()
    if isinstance(payload, ObjectStoreRef):
        await payload.fetch()
