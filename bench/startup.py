"""Engine start-up: what one engine load costs, phase by phase, and a second load of the same shapes.

    python bench/startup.py

Three runner commands on one engine configuration (the embedded model, spec off,
one c=1 trial), in order:
  eager        engine.args.enforce_eager=true (the CPU default: nothing is compiled)
  compile-1st  enforce_eager=false with empty vLLM and inductor caches (VLLM_CACHE_ROOT,
               TORCHINDUCTOR_CACHE_DIR point at a fresh folder)
  compile-2nd  the same configuration again with the caches the first one filled

For each: the command's wall, the time before the load starts (Python, Hydra, Ray,
actor spawn and imports), load_s (AsyncLLM.from_engine_args), and that load split
from the engine's log: engine-core process start, worker process start, weights,
compile (Dynamo + inductor, or the cache hit), profile + KV allocation + warm-up.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import efficiency  # noqa: E402

TS = re.compile(r"^\((\w+)[^)]*\) \w+ (\d\d-\d\d \d\d:\d\d:\d\d)")


def _overrides(model, *, eager: bool) -> list[str]:
    return [*common.runner_model_overrides(model), "sweep.grid.spec_method=[off]",
            "sweep.grid.enable_prefix_caching=[true]", "sweep.grid.max_model_len=[1024]",
            "sweep.grid.gpu_memory_utilization=[0.9]", "sweep.grid.concurrency=[1]", "sweep.repeats=1",
            "workload.decode.input_len=128", "workload.decode.output_len=64",
            "workload.decode.requests_per_session=1", f"engine.args.enforce_eager={str(eager).lower()}",
            "engine.cpu_kvcache_space_gib=1"]


def _floats(pattern: str, text: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, text)]


def log_phases(text: str) -> dict:
    """Phases of one load from vLLM's log lines (timestamps have 1 s resolution; 'took' figures are exact)."""
    first: dict[str, dt.datetime] = {}
    for line in text.splitlines():
        m = TS.match(line)
        if m and m.group(1) not in first:
            first[m.group(1)] = dt.datetime.strptime(m.group(2), "%m-%d %H:%M:%S")
    compile_window = _window(text, start="Warming up model for the compilation", end="Warming up done.")
    core = first.get("EngineCore")
    worker = first.get("Worker") or first.get("VllmWorker")
    front = first.get("MainProcess")
    return {
        "engine_core_spawn_s": (core - front).total_seconds() if core and front else None,
        "worker_spawn_s": (worker - core).total_seconds() if worker and core else None,
        "weights_s": sum(_floats(r"Initializing model took ([\d.]+) seconds", text)
                         + _floats(r"Loading weights took ([\d.]+) seconds", text)),
        "dynamo_s": sum(_floats(r"Dynamo bytecode transform time: ([\d.]+) s", text)),
        "inductor_compile_s": sum(_floats(r"Compiling a graph for compile range .*? takes ([\d.]+) s", text)),
        "compile_cache_hit_s": sum(_floats(r"from the cache, took ([\d.]+) s", text)),
        "compile_total_s": sum(_floats(r"torch.compile takes ([\d.]+) s in total", text)),
        "init_engine_s": sum(_floats(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s", text)),
        # The CPU platform compiles (Dynamo + inductor, saved as an AOT function) inside its warm-up.
        "cpu_compile_warmup_s": compile_window,
        "aot_saved": text.count("saved AOT compiled function"),
        "aot_load_failures": text.count("Compiling model again due to a load failure"),
        "cache_hits": text.count("from the cache") + text.count("loaded AOT compiled function")
        + text.count("Directly load AOT"),
    }


def _window(text: str, *, start: str, end: str):
    """Seconds between the first log line containing `start` and the next containing `end` (1 s resolution)."""
    begin = None
    for line in text.splitlines():
        m = TS.match(line)
        if not m:
            continue
        at = dt.datetime.strptime(m.group(2), "%m-%d %H:%M:%S")
        if begin is None and start in line:
            begin = at
        elif begin is not None and end in line:
            return (at - begin).total_seconds()
    return None


def run_arm(*, model, out: Path, name: str, eager: bool, cache_dir: Path | None) -> dict:
    saved = {k: os.environ.get(k) for k in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR")}
    if cache_dir is not None:
        # Ray's local workers inherit the driver's environment, so the engines see these folders.
        os.environ["VLLM_CACHE_ROOT"] = str(cache_dir / "vllm")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / "inductor")
    try:
        timeline = efficiency.arm_runner(model=model, out=out, rep=0, sweep=name,
                                         overrides=_overrides(model, eager=eager))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    logs = sorted((out / "runner" / name / "rep0" / "logs").glob("*.log"))
    phases = log_phases(logs[0].read_text(errors="replace")) if logs else {}
    return {"arm": name, **timeline, **phases}


def report(rows: list[dict]) -> None:
    print("\n=== engine start-up (runner, embedded model, spec off), seconds ===")
    keys = ["wall_s", "before_first_load_s", "load_s", "engine_core_spawn_s", "worker_spawn_s", "weights_s",
            "init_engine_s", "cpu_compile_warmup_s", "aot_saved", "aot_load_failures", "cache_hits",
            "dynamo_s", "inductor_compile_s", "compile_cache_hit_s", "compile_total_s"]
    print(f"{'':22s}" + "".join(f"{r['arm']:>14s}" for r in rows))
    for k in keys:
        print(f"{k:22s}" + "".join(f"{common.fmt(r.get(k), digits=2):>14s}" for r in rows))
    byname = {r["arm"]: r for r in rows}
    if "compile-1st" in byname and "compile-2nd" in byname:
        a, b = byname["compile-1st"], byname["compile-2nd"]
        print(f"second load of the same shapes / first: load_s {b['load_s'] / a['load_s']:.2f}x "
              f"({a['load_s']:.1f} → {b['load_s']:.1f} s), init engine (incl. compile) "
              f"{a['init_engine_s']:.1f} → {b['init_engine_s']:.1f} s, vLLM AOT cache hits {b['cache_hits']}, "
              f"AOT cache load failures {b['aot_load_failures']}")
    if "eager" in byname and "compile-2nd" in byname:
        print(f"eager load / warm compiled load: {byname['eager']['load_s'] / byname['compile-2nd']['load_s']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=["eager", "compile-1st", "compile-2nd"])
    parser.add_argument("--report-from", type=Path, default=None,
                        help="re-read the logs of an earlier run's folder and print its report (runs nothing)")
    args = parser.parse_args()
    if args.report_from:
        return reparse(args.report_from)
    out = common.out_dir("startup")
    model = common.tiny_model()
    results: dict = {"machine_before": common.print_machine("startup"), "rows": []}
    cache = Path(tempfile.mkdtemp(prefix="bench-compile-cache-"))
    for arm in args.arms:
        print(f"-- {arm}", flush=True)
        eager = arm == "eager"
        results["rows"].append(run_arm(model=model, out=out, name=arm, eager=eager,
                                       cache_dir=None if eager else cache))
        common.save_json(out / "startup.json", results)
    results["machine_after"] = common.print_machine("startup")
    common.save_json(out / "startup.json", results)
    report(results["rows"])
    print(f"\nfiles: {out}  (compile caches: {cache})")


def reparse(out: Path) -> None:
    import json

    saved = json.loads((out / "startup.json").read_text())
    rows = []
    for row in saved["rows"]:
        logs = sorted((out / "runner" / row["arm"] / "rep0" / "logs").glob("*.log"))
        rows.append({**row, **(log_phases(logs[0].read_text(errors="replace")) if logs else {})})
    report(rows)


if __name__ == "__main__":
    main()
