"""Python's byte-compilation of the engine stack, paid beside the command's own start-up instead of inside the
first engine's load.

An install without `.pyc` files (pip's `--no-compile`, an unpacked site folder, a fresh container layer) makes the
first process that imports vLLM compile every module it touches, serially; every later process reads the cache.
On a fresh machine that put tens of seconds into the first engine's load alone (docs/benchmarks.md). Compiling the
packages in parallel at the command's start takes that off the first engine; where the cache exists it only
checks timestamps (under a second for vLLM here).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

# What an engine process imports beyond the driver's own imports.
ENGINE_PACKAGES = ("vllm", "transformers")


def package_dirs(names=ENGINE_PACKAGES) -> list[Path]:
    """The source folders of the installed packages among `names`, found without importing them."""
    folders = []
    for name in names:
        spec = importlib.util.find_spec(name)
        locations = list(spec.submodule_search_locations or []) if spec else []
        folders += [Path(p) for p in locations if Path(p).is_dir()]
    return folders


def compile_command(folders: list[Path]) -> list[str]:
    """`compileall` over the folders on every core; quiet, and a folder it cannot write to is no error."""
    return [sys.executable, "-m", "compileall", "-q", "-j", "0", *map(str, folders)]


def begin(names=ENGINE_PACKAGES) -> Optional[subprocess.Popen]:
    """Starts the compilation in the background (niced: it must never compete with a measured window)."""
    folders = package_dirs(names)
    if not folders:
        return None
    try:
        return subprocess.Popen(compile_command(folders), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, preexec_fn=lambda: os.nice(10))
    except OSError:
        return None
