"""The runner's cache folder: the embedded models (`models/`), the installed vLLM's engine-argument rules
(`engine-args/`) and the set-up's installer (`tools/`, scripts/setup.sh). `$RUNNER_CACHE_DIR` when set, else
`${XDG_CACHE_HOME:-~/.cache}/vllm-sweep`: a user folder, never the source tree or the installed package (which may
be read-only)."""
from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "RUNNER_CACHE_DIR"
CACHE_NAME = "vllm-sweep"


def cache_root(environ=None) -> Path:
    environ = os.environ if environ is None else environ
    override = environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    # The XDG spec: an unset, empty or relative XDG_CACHE_HOME means ~/.cache.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".cache"
    return base / CACHE_NAME
