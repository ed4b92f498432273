"""A vLLM worker extension: memory figures that live only in the worker process.

vLLM mixes this class into its worker (`worker_extension_cls`), so `self` is the
worker; read through `collective_rpc("runner_memory_report")`.
"""
from __future__ import annotations

from runner.vllm.versions import Check

GIB = 1024**3


def _param_bytes(module) -> int:
    if module is None:
        return 0
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _kv_bytes(kv_caches) -> int:
    total = 0
    for cache in kv_caches or []:
        if hasattr(cache, "numel"):
            total += cache.numel() * cache.element_size()
        elif isinstance(cache, (list, tuple)):
            total += _kv_bytes(cache)
    return total


class MemoryProbe:
    def runner_memory_report(self) -> dict:
        import torch

        runner = getattr(self, "model_runner", None)
        model = getattr(runner, "model", None)
        drafter = getattr(getattr(runner, "drafter", None), "model", None)
        on_gpu = torch.cuda.is_available() and getattr(getattr(self, "device", None), "type", "") == "cuda"
        recorded = getattr(runner, "model_memory_usage", None)
        if on_gpu and recorded:
            weights, source = recorded, "worker: model_memory_usage (as logged 'Model loading took')"
        else:
            weights = _param_bytes(model) + (0 if drafter is model else _param_bytes(drafter))
            source = "sum of parameter bytes (the CPU runner records no loading memory)"
        kv_budget = getattr(self, "available_kv_cache_memory_bytes", None)
        if not kv_budget:
            kv_budget = _kv_bytes(getattr(runner, "kv_caches", None))
            source += "; KV = allocated cache tensors"
        else:
            source += "; KV = worker available_kv_cache_memory_bytes"
        device_name = torch.cuda.get_device_name() if on_gpu else _cpu_name()
        return {
            "weights_gib": weights / GIB if weights else None,
            "kv_budget_gib": kv_budget / GIB if kv_budget else None,
            "source": source,
            "device_name": device_name,
            "device_kind": "cuda" if on_gpu else "cpu",
            "device_uuid": _device_uuid(torch, self.device) if on_gpu else None,  # NVML's name for it
        }


def _device_uuid(torch, device) -> str | None:
    try:
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    except Exception:  # a torch without the property: the meter falls back to CUDA_VISIBLE_DEVICES
        return None


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "cpu"


def check() -> Check:
    """The engine argument that mixes the probe in; the worker's attributes are read with defaults (a worker
    without them reports the sum of parameter bytes and the allocated cache tensors)."""
    from runner.vllm.engine import engine_arg_names

    if "worker_extension_cls" not in engine_arg_names():
        return Check(active=False, reason="no worker_extension_cls engine argument")
    return Check(active=True)
