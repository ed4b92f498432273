"""What stands between a command and its first engine, on the driver: the embedded model's folder, Ray (or the
engine pool's head), and first-use costs that land on disk, started beside the command's own start-up instead of
inside the first engine's load: Python's byte-compilation of the engine stack, and vLLM's model-info cache. The
model's folder is built on a thread while Ray starts (each takes seconds on a fresh GPU host: docs/benchmarks.md).

An install without `.pyc` files (pip's `--no-compile`, an unpacked site folder, a machine that sets
PYTHONDONTWRITEBYTECODE) makes every process that imports vLLM compile every module it touches; compiling the
packages in parallel at the start takes that off the engines (where the cache exists it only checks timestamps:
under a second here). vLLM inspects each model class in a subprocess the first time a machine loads it
(runner/execution/inspect_models.py fills that cache ahead; docs/benchmarks.md has the H200's figures).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from runner.config.sections import ClusterSection, ModelSection

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


def begin_compile(names=ENGINE_PACKAGES) -> Optional[subprocess.Popen]:
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


class ModelInfoFill:
    """The fill of vLLM's model-info cache, running beside the command's start-up. The first engine's start
    waits for what is left of it (bounded): a load that misses the cache inspects the classes again itself,
    which costs more than the rest of a fill begun that long before. A trial before any load (engines woken from
    the pool) does not wait: the fill is stopped, as it would take cores from the trial and no load needs it yet."""

    WAIT_S = 30.0

    def __init__(self, process: Optional[subprocess.Popen] = None, *, stamp: Optional[Path] = None):
        self.process = process
        self.stamp = stamp  # written once the fill succeeded: later commands skip it
        self.waited_s = 0.0  # what the first engine call waited for it
        self.outcome = "none started"  # for the first trial's line: how the fill ended

    def wait(self) -> None:
        """Once; later calls return at once."""
        process, self.process = self.process, None
        if process is None:
            return
        started = time.perf_counter()
        try:
            process.wait(timeout=self.WAIT_S)
            self.finished(process)
        except subprocess.TimeoutExpired:  # left running: the load inspects for itself, as without a fill
            self.outcome = f"left running after {self.WAIT_S:g} s"
        self.waited_s = time.perf_counter() - started

    def stop(self) -> None:
        """No load needs it before a trial: ended now if still running (a later load inspects for itself)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            self.outcome = "stopped before the first trial (no load needed it)"
        else:
            self.finished(process)

    def finished(self, process: subprocess.Popen) -> None:
        code = getattr(process, "returncode", None)
        self.outcome = "done" if code == 0 else f"failed (exit {code})"
        if code == 0 and self.stamp is not None:
            try:
                self.stamp.parent.mkdir(parents=True, exist_ok=True)
                self.stamp.touch()
            except OSError:  # a read-only cache: the next command fills again
                pass


def begin_model_info(model: ModelSection, *, mtp: bool) -> ModelInfoFill:
    """vLLM's model-info cache filled beside Ray's start and the first actor's imports; a failure only leaves
    that cost where it was, in the first load."""
    from runner.models.source import resolve_model_source

    try:
        folder = Path(resolve_model_source(model).path)
    except Exception:
        return ModelInfoFill()
    command = model_info_command(folder / "config.json", mtp=mtp)
    if command is None:
        return ModelInfoFill()
    if model_info_filled(command):  # an earlier command filled it for this vLLM: no process importing vLLM again
        fill = ModelInfoFill()
        fill.outcome = "filled by an earlier command"
        return fill
    try:
        return ModelInfoFill(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              stdin=subprocess.DEVNULL), stamp=model_info_stamp(command))
    except OSError:
        return ModelInfoFill()


def model_info_stamp(command: list[str]) -> Path:
    """The file a fill that succeeded leaves for its architectures and the installed vLLM: later commands on this
    machine skip the fill, a subprocess that imports vLLM (seconds to tens of seconds on a GPU host)."""
    import hashlib

    from runner.cache import cache_root
    from runner.plan.engine_args import installed_vllm_version

    key = " ".join([installed_vllm_version(), *command[3:]])
    return cache_root() / "model-info" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.done"


def model_info_filled(command: list[str]) -> bool:
    return model_info_stamp(command).exists()


class ModelFolder:
    """The model's folder (and the model-info fill begun from it), prepared on a thread while the main thread starts
    Ray (whose signal handlers want the main thread): neither needs the other. `ready` joins it and raises what it
    raised, so a bad model still stops the command before any engine starts."""

    def __init__(self, prepare: Callable[[], ModelInfoFill]):
        self._fill = ModelInfoFill()
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(prepare,), name="runner-model-folder", daemon=True)
        self._thread.start()

    def _run(self, prepare: Callable[[], ModelInfoFill]) -> None:
        try:
            self._fill = prepare()
        except BaseException as exc:  # re-raised in the main thread by ready()
            self._error = exc

    def ready(self) -> ModelInfoFill:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._fill


def prepare_builtin_model(model: ModelSection) -> None:
    """On a local cluster, build (and train) the embedded model here, in view, before any engine waits on it.

    Actors on other nodes still build their own copy; this moves the first-use cost out of an engine's
    start-up timeout and onto the terminal, where the user sees it.
    """
    if model.builtin != "tiny_mtp":
        return
    from runner.models.source import tiny_weights
    from runner.models.tiny import tiny_model_dir, tiny_model_ready

    if tiny_model_ready(weights=tiny_weights(model)):
        return
    folder = tiny_model_dir()
    print("preparing the embedded model (first use only: the shipped copy, or minutes of training where the "
          "code changed it) ...", flush=True)
    started = time.perf_counter()
    from runner.models.source import resolve_model_source

    resolve_model_source(model)
    print(f"model ready in {time.perf_counter() - started:.0f} s: {folder}", flush=True)


def start_ray(cluster: ClusterSection, *, device: str, address: Optional[str], namespace: Optional[str] = None):
    """Starts (or joins, at `address`) Ray, its named actors in `namespace`; returns what the cluster offers (device
    units, engines side by side)."""
    from runner.scheduling.cluster import cluster_capacity, connect_ray

    connect_ray(address=address, namespace=namespace)
    return cluster_capacity(cluster=cluster, device=device)


def dry_run_capacity(cluster: ClusterSection, *, device: str):
    """The plan's capacity without starting Ray: local GPUs on cuda (None when joining a cluster)."""
    from runner.scheduling.cluster import cluster_capacity

    if device != "cuda":
        return cluster_capacity(cluster=cluster, device=device, resources={})
    if cluster.address:
        return None
    try:
        import torch

        return cluster_capacity(cluster=cluster, device=device, resources={"GPU": torch.cuda.device_count()})
    except Exception:
        return None
