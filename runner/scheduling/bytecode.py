"""First-use costs that land on disk, paid beside the command's own start-up instead of inside the first engine's
load: Python's byte-compilation of the engine stack, and vLLM's model-info cache.

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

# What the actors and engine processes import (each process anew).
ENGINE_PACKAGES = ("vllm", "transformers", "ray", "hydra", "omegaconf")


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


def model_info_command(config_json: Path, *, mtp: bool) -> Optional[list[str]]:
    """vLLM's model-info cache for the model's architectures (and their MTP drafters), as a command; None where
    the model folder names none."""
    import json

    try:
        archs = list(json.loads(config_json.read_text()).get("architectures") or [])
    except (OSError, ValueError):
        return None
    if not archs:
        return None
    return [sys.executable, "-m", "runner.execution.inspect_models", *archs, *(["--mtp"] if mtp else [])]


def begin_model_info(config_json: Path, *, mtp: bool) -> Optional[subprocess.Popen]:
    command = model_info_command(config_json, mtp=mtp)
    if command is None:
        return None
    try:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
    except OSError:
        return None

