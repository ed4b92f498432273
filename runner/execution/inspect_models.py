"""`python -m runner.execution.inspect_models ARCH... [--mtp]`: fills vLLM's model-info cache for these
architectures (and their MTP drafters with --mtp), side by side, in a process of its own.

vLLM inspects a model class in a subprocess the first time a machine loads it (kept in its cache folder,
`modelinfos`); on a fresh H200 host that took ~24 s per architecture (target, then MTP drafter), serially, inside
the first engine's load. The driver starts this beside its own start-up so that the first load finds the cache.
"""
from __future__ import annotations

import sys


def mtp_drafters(target: str, registered: list[str]) -> list[str]:
    """The registry's MTP drafter classes of a target architecture (MiMoForCausalLM → MiMoMTPModel, …): a
    best effort by name; one it misses is inspected in the load as before."""
    family = target.split("For", 1)[0].lower()
    return [name for name in registered if "MTP" in name and name.split("MTP", 1)[0].lower() == family]


def main(argv: list[str]) -> int:
    from vllm.model_executor.models.registry import ModelRegistry

    archs = [a for a in argv if not a.startswith("--")]
    registered = list(ModelRegistry.get_supported_archs())
    if "--mtp" in argv:
        archs += [d for a in list(archs) for d in mtp_drafters(a, registered)]
    inspect = getattr(ModelRegistry, "_try_inspect_model_cls", None)
    if inspect is None:
        return 0
    from concurrent.futures import ThreadPoolExecutor

    # Side by side: each inspection is a subprocess of vLLM's, and the first load needs all of them.
    with ThreadPoolExecutor(max_workers=max(1, len(archs))) as pool:
        list(pool.map(inspect, dict.fromkeys(archs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
