"""One log line per patch, whether it applied or not, and one where a read of vLLM's internals finds its names
gone: a vLLM upgrade that drops a patch or a figure says so in the log."""
from __future__ import annotations

import sys


def applied(piece: str, detail: str) -> None:
    print(f"runner: vllm patch {piece}: applied ({detail})", file=sys.stderr, flush=True)


def not_applied(piece: str, reason: str) -> None:
    print(f"runner: vllm patch {piece}: not applied: {reason}", file=sys.stderr, flush=True)


def unread(piece: str, reason: str) -> None:
    print(f"runner: vllm read {piece}: unavailable: {reason}", file=sys.stderr, flush=True)
