"""Scaling: trials per hour against the number of engines side by side on this CPU machine.

    python bench/scaling.py [--repeats 1] [--arms 1 2 2:nobind]

Two engine configs (spec off, mtp:1) × concurrency {1, 4},
decode 128 in / 64 out, 4 requests per session) run by the runner with
cluster.cpu_engine_slots=1 and =2, arms alternating. An arm "2:nobind" runs two
slots with VLLM_CPU_OMP_THREADS_BIND=nobind: by default ("auto") every CPU
engine binds its OpenMP thread to core 0 and reserves core 1, so two engines
side by side share one core.

Prints, per arm: wall, trials, trials per hour over the whole command and over
the engine phase (first load start → last trial end), and the speed-up against 1 slot.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import efficiency  # noqa: E402


def run_arm(*, model, out: Path, arm: str, rep: int) -> dict:
    slots, _, bind = arm.partition(":")
    overrides = efficiency.runner_overrides(model, spec_ks=(1,), slots=int(slots))
    previous = os.environ.get("VLLM_CPU_OMP_THREADS_BIND")
    if bind:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind  # the runner passes it through to its actors
    try:
        name = f"slots{slots}{'-' + bind if bind else ''}"
        result = efficiency.arm_runner(model=model, out=out, rep=rep, sweep=name, overrides=overrides)
    finally:
        if previous is None:
            os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
        else:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = previous
    engine_phase = result["wall_s"] - result["before_first_load_s"] - result["after_last_trial_s"]
    logs = sorted((out / "runner" / name / f"rep{rep}" / "logs").glob("*.log"))
    cores = sorted({m for f in logs for m in re.findall(r"core ids=(\[[\d, ]*\])", f.read_text(errors="replace"))})
    return {**result, "arm": arm, "engine_phase_s": engine_phase, "omp_core_ids": cores,
            "trials_per_hour": result["trials_ok"] / result["wall_s"] * 3600,
            "trials_per_hour_engine_phase": result["trials_ok"] / engine_phase * 3600}


def report(results: list[dict], arms: list[str]) -> None:
    print("\n=== scaling: 2 engine configs × 2 trials, runner, engines side by side on 2 cores ===")
    base = None
    for arm in arms:
        rows = [r for r in results if r["arm"] == arm]
        wall = common.median([r["wall_s"] for r in rows])
        tph = common.median([r["trials_per_hour"] for r in rows])
        tph_engine = common.median([r["trials_per_hour_engine_phase"] for r in rows])
        base = base or tph
        print(f"slots={arm:9s} wall {wall:6.1f} s  trials {[r['trials_ok'] for r in rows]}  "
              f"TRIALS/HOUR {tph:6.1f} (engine phase {tph_engine:6.1f})  speed-up vs 1 slot {tph / base:.2f}x  "
              f"loads {[r['load_s_each'] for r in rows]}  OpenMP cores {rows[-1]['omp_core_ids']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--arms", nargs="+", default=["1", "2", "2:nobind"])
    args = parser.parse_args()
    out = common.out_dir("scaling")
    model = common.tiny_model()
    results: dict = {"machine_before": common.print_machine("scaling"), "runs": []}
    for rep in range(args.repeats):
        order = args.arms if rep % 2 == 0 else args.arms[::-1]
        for arm in order:
            print(f"-- repeat {rep + 1}/{args.repeats}, slots={arm}", flush=True)
            results["runs"].append(run_arm(model=model, out=out, arm=arm, rep=rep))
            common.save_json(out / "scaling.json", results)
    common.finish(results, out=out, label="scaling", report=lambda: report(results["runs"], args.arms))


if __name__ == "__main__":
    main()
