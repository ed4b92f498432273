"""`python -m runner.execution.inspect_models ARCH... [--mtp]`: fills vLLM's model-info cache for these
architectures (and their MTP drafters with --mtp), in a process of its own (runner.vllm.model_info does it).

The driver starts this beside its own start-up so that the first load finds the cache.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from runner.vllm.model_info import fill

    fill([a for a in argv if not a.startswith("--")], mtp="--mtp" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
