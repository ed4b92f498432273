"""The `vllm serve` command line of a set of engine arguments: the one builder. Pure (imports no vLLM).

vLLM 0.26 and 0.32 take the same flags for these: `--<name-with-dashes>`, `--no-<name>` for a false boolean,
JSON for a dict or list (compact, keys sorted), each value quoted for a POSIX shell.
"""
from __future__ import annotations

import json
import shlex
from typing import Any, Mapping


def serve_flags(args: Mapping[str, Any]) -> list[str]:
    """The words after the model: one flag (and its value) per argument other than `model`, in order."""
    words: list[str] = []
    for key, value in args.items():
        if key == "model":
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            words += [flag, shlex.quote(json.dumps(value, sort_keys=True, separators=(",", ":")))]
        else:
            words += [flag, shlex.quote(str(value))]
    return words


def serve_command(args: Mapping[str, Any]) -> str:
    """`vllm serve MODEL --flag value ...` for engine arguments that name their `model`."""
    return " ".join(["vllm", "serve", shlex.quote(str(args["model"])), *serve_flags(args)])
