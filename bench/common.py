"""Shared pieces of the bench scripts: the model folder, subprocess runs with wall times, result files.

Every arm runs as a fresh subprocess, the way a user would run it, so the wall
times include process start, imports and engine loads on both sides.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
SHIM = ROOT / "bench" / "vllm_cli.py"
VLLM_WRAPPER = ROOT / "bench" / "bin" / "vllm"
BENCH_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True, kw_only=True)
class Model:
    path: str
    load_format: str  # "dummy" unless a trained checkpoint sits in the folder


def tiny_model() -> Model:
    """The embedded model's folder; trained weights if a current checkpoint is there, else dummy.

    The bench never trains (minutes of both cores, which would skew every figure taken meanwhile).
    """
    import inspect

    sys.path.insert(0, str(ROOT))
    from runner.models import tiny

    if "weights" in inspect.signature(tiny.ensure_tiny_model).parameters:
        path = Path(tiny.ensure_tiny_model(weights="dummy"))
    else:
        path = Path(tiny.ensure_tiny_model())
    return Model(path=str(path), load_format="auto" if _trained(path) else "dummy")


def _trained(path: Path) -> bool:
    try:
        from runner.models.train import weights_are_current
    except ImportError:
        return any(path.glob("*.safetensors"))
    return bool(weights_are_current(model_dir=path))


def runner_model_overrides(model: Model) -> list[str]:
    # The runner resolves model.builtin itself; its weights must be the ones the vLLM tools get
    # (and it must not start training the embedded model in the middle of a measurement).
    overrides = [f"model.load_format={model.load_format}"]
    if "weights:" in (ROOT / "conf" / "model" / "tiny_mtp.yaml").read_text():
        overrides.append(f"model.weights={'dummy' if model.load_format == 'dummy' else 'trained'}")
    return overrides


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(BENCH_ENV)
    env["VLLM_SHIM_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@dataclass(kw_only=True)
class Ran:
    cmd: list[str]
    wall_s: float
    returncode: int
    log: Path
    started_at: float  # time.time() when the process was started

    def tail(self, n: int = 30) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


def run_logged(cmd: list[str], *, log: Path, check: bool = True, timeout: float = 1800) -> Ran:
    """Runs one arm to completion with its output in `log`; returns its wall time."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  $ {shlex.join(cmd)}", flush=True)
    started_at = time.time()
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=bench_env(), cwd=ROOT, timeout=timeout)
    ran = Ran(cmd=cmd, wall_s=time.perf_counter() - t0, returncode=proc.returncode, log=log, started_at=started_at)
    print(f"    {ran.wall_s:.1f} s (exit {proc.returncode}), log {log}", flush=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed with {proc.returncode}; last lines of {log}:\n{ran.tail()}")
    return ran


def vllm_cmd(*args: str) -> list[str]:
    return [sys.executable, str(SHIM), *args]


def runner_cmd(*, output_root: Path, sweep: str, run: str, overrides: list[str]) -> list[str]:
    # The default sweep (demo) sets explicit arms and a multi-turn workload, which a bench's grid overrides do not
    # replace; quick is decode on grid axes alone, so the bench's overrides decide every engine and trial.
    base = [] if any(o.startswith("sweep=") for o in overrides) else ["sweep=quick"]
    return [sys.executable, "-m", "runner", *base, f"output_root={output_root}", f"sweep.name={sweep}", f"run={run}",
            "tracking=none", "report=false", *overrides]


def read_run(run_dir: Path) -> dict:
    """A run's engines, trials and requests (compacted files, parts or an older run's files; last write wins)."""
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from runner.sinks.parquet import has_table, read_frame

    out = {}
    for name in ("engines", "trials", "requests", "phases"):
        out[name] = read_frame(Path(run_dir), name) if has_table(Path(run_dir), name) else pd.DataFrame()
    return out


def median(values) -> Optional[float]:
    data = [v for v in values if v is not None]
    return statistics.median(data) if data else None


def fmt(value: Optional[float], unit: str = "", digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def machine() -> dict:
    model = "unknown"
    try:
        match = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = match.group(1).strip() if match else model
    except OSError:
        pass
    try:
        uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        uptime = "n/a"
    return {"cpu_model": model, "cores": os.cpu_count(), "uptime": uptime, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def print_machine(label: str) -> dict:
    m = machine()
    print(f"[{label}] {m['date']}  {m['cores']} cores, {m['cpu_model']}  load: {m['uptime']}", flush=True)
    return m


def save_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))


def finish(results: dict, *, out: Path, label: str, report) -> None:
    """The machine's load after the run, the results file, the printed report and where the files are."""
    results["machine_after"] = print_machine(label)
    save_json(out / f"{label.replace('-', '_')}.json", results)
    report()
    print(f"\nfiles: {out}")


def out_dir(name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = ROOT / "outputs" / "bench" / f"{name}-{stamp}"
    path.mkdir(parents=True, exist_ok=True)
    return path
