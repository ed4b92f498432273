"""vLLM's model-info cache (`modelinfos` in its cache folder) filled for some architectures, in this process.

vLLM inspects a model class in a subprocess the first time a machine loads it; on a fresh H200 host that cost the
first engine's load seconds (docs/benchmarks.md). Here the inspection runs in the calling process (a throwaway
one: runner/execution/inspect_models.py) rather than in one more subprocess per architecture as vLLM does it:
each of those imports vLLM again, which made the fill finish after the first load had already missed the cache.
The patch (the registry's `_run_in_subprocess`) lives only in that throwaway process.
"""
from __future__ import annotations

from runner.vllm import notice
from runner.vllm.versions import Check

PIECE = "model_info"


def mtp_drafters(target: str, registered: list[str]) -> list[str]:
    """The registry's MTP drafter classes of a target architecture (MiMoForCausalLM → MiMoMTPModel, …): a
    best effort by name; one it misses is inspected in the load as before."""
    family = target.split("For", 1)[0].lower()
    return [name for name in registered if "MTP" in name and name.split("MTP", 1)[0].lower() == family]


def _in_this_process(fn):
    return fn()


def _registry():
    """vLLM's registry module and its inspection; raises where this vLLM lacks a name used here."""
    from vllm.model_executor.models import registry

    inspect = getattr(registry.ModelRegistry, "_try_inspect_model_cls", None)
    if inspect is None or not hasattr(registry, "_run_in_subprocess"):
        raise AttributeError("vllm's model registry has no _try_inspect_model_cls or _run_in_subprocess")
    return registry, inspect


def fill(archs: list[str], *, mtp: bool = False) -> int:
    """Inspects each architecture (and its MTP drafters with `mtp`) into vLLM's cache; returns how many."""
    try:
        registry, inspect = _registry()
    except (ImportError, AttributeError) as exc:
        notice.not_applied(PIECE, f"{type(exc).__name__}: {exc}; the first load inspects as vLLM has it")
        return 0
    if mtp:
        registered = list(registry.ModelRegistry.get_supported_archs())
        archs = archs + [d for a in archs for d in mtp_drafters(a, registered)]
    # vLLM keeps CUDA out of the process that inspects; this one exits right after, so it may import here.
    registry._run_in_subprocess = _in_this_process
    notice.applied(PIECE, "registry._run_in_subprocess: inspected in this process")
    archs = list(dict.fromkeys(archs))
    for arch in archs:
        inspect(arch)
    return len(archs)


def check() -> Check:
    registry, _ = _registry()
    if not callable(getattr(registry.ModelRegistry, "get_supported_archs", None)):
        return Check(active=False, reason="ModelRegistry has no get_supported_archs")
    return Check(active=True)
