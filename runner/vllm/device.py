"""What vLLM's platform layer says about this process's device (vLLM's `current_platform`: NVML on CUDA, so
asking makes no CUDA context)."""
from __future__ import annotations

from typing import Optional

from runner.vllm.versions import Check


def _platform():
    from vllm.platforms import current_platform

    return current_platform


def is_cpu() -> bool:
    return bool(_platform().is_cpu())


def is_cuda() -> bool:
    return bool(_platform().is_cuda())


def is_cuda_alike() -> bool:
    """CUDA or ROCm; False where vLLM's platform cannot be read."""
    try:
        return bool(_platform().is_cuda_alike())
    except Exception:
        return False


def device_total_gib() -> Optional[float]:
    """Device 0's total memory on CUDA (None elsewhere, or where it cannot be read)."""
    try:
        platform = _platform()
        if platform.is_cuda():
            return platform.get_device_total_memory(0) / 1024**3
    except Exception:
        pass
    return None


def check() -> Check:
    platform = _platform()
    for name in ("is_cpu", "is_cuda", "is_cuda_alike", "get_device_total_memory"):
        if not callable(getattr(platform, name, None)):
            return Check(active=False, reason=f"current_platform has no {name}")
    return Check(active=True)
