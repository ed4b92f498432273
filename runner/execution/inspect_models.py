"""`python -m runner.execution.inspect_models ARCH... [--mtp]`: fills vLLM's model-info cache for these
architectures (and their MTP drafters with --mtp), in a process of its own.

vLLM inspects a model class in a subprocess the first time a machine loads it (kept in its cache folder,
`modelinfos`); on a fresh H200 host that cost the first engine's load seconds (docs/benchmarks.md). The driver
starts this beside its own start-up so that the first load finds the cache. The inspection runs here, in this
throwaway process, rather than in one more subprocess per architecture as vLLM does it: each of those imports
vLLM again, which made this fill finish after the first load had already missed the cache.
"""
from __future__ import annotations

import sys


def mtp_drafters(target: str, registered: list[str]) -> list[str]:
    """The registry's MTP drafter classes of a target architecture (MiMoForCausalLM → MiMoMTPModel, …): a
    best effort by name; one it misses is inspected in the load as before."""
    family = target.split("For", 1)[0].lower()
    return [name for name in registered if "MTP" in name and name.split("MTP", 1)[0].lower() == family]


def _in_this_process(fn):
    return fn()


def main(argv: list[str]) -> int:
    from vllm.model_executor.models import registry

    ModelRegistry = registry.ModelRegistry
    archs = [a for a in argv if not a.startswith("--")]
    registered = list(ModelRegistry.get_supported_archs())
    if "--mtp" in argv:
        archs += [d for a in list(archs) for d in mtp_drafters(a, registered)]
    inspect = getattr(ModelRegistry, "_try_inspect_model_cls", None)
    if inspect is None or not hasattr(registry, "_run_in_subprocess"):
        return 0
    # vLLM keeps CUDA out of the process that inspects; this one exits right after, so it may import here.
    registry._run_in_subprocess = _in_this_process
    for arch in dict.fromkeys(archs):
        inspect(arch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
