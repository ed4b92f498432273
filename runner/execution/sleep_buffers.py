"""A vLLM worker extension: the host memory an engine's first sleep needs, reserved before that sleep.

Sleep mode offloads each weight allocation to a pinned host tensor of its size; torch's pinned-memory cache keeps
those blocks after the wake, so only an engine's first sleep pays for pinning host memory (seconds for a 7B
model; later sleeps reuse the blocks). Allocating and freeing the same sizes in a thread of the worker, while the
engine warms up for its first trial, fills that cache before the first sleep needs it.
"""
from __future__ import annotations

import threading

# The allocation tags vLLM's level-1 sleep offloads to host memory (the rest is dropped).
OFFLOADED_TAGS = ("weights",)


def offloaded_sizes(allocations, tags=OFFLOADED_TAGS) -> list[int]:
    """Bytes of each awake allocation a level-1 sleep copies to host memory, from vLLM's cumem allocator's
    `pointer_to_data` values (objects with `tag`, `handle` = (device, size, …) and `is_asleep`)."""
    return [int(data.handle[1]) for data in allocations
            if data.tag in tags and not getattr(data, "is_asleep", False)]


class SleepBuffers:
    _runner_reserving: threading.Thread | None = None

    def runner_reserve_sleep_buffers(self) -> int:
        """Starts pinning (then freeing) host blocks the sizes of this worker's weights; returns the bytes, 0 where
        there is nothing to reserve (no sleep mode, no CUDA)."""
        import torch

        try:
            from vllm.device_allocator.cumem import CuMemAllocator

            allocator = CuMemAllocator.get_instance()
        except Exception:
            return 0
        sizes = offloaded_sizes(list(allocator.pointer_to_data.values()))
        if not sizes or not torch.cuda.is_available():
            return 0

        def reserve() -> None:
            blocks = [torch.empty(n, dtype=torch.uint8, device="cpu", pin_memory=True) for n in sizes]
            del blocks  # back to torch's pinned-memory cache, where the first sleep finds them

        self._runner_reserving = threading.Thread(target=reserve, name="runner-sleep-buffers", daemon=True)
        self._runner_reserving.start()
        return sum(sizes)

    def runner_sleep_buffers_ready(self) -> bool:
        """Waits for the reservation (the engine is idle when this is called)."""
        if self._runner_reserving is not None:
            self._runner_reserving.join()
            self._runner_reserving = None
        return True
