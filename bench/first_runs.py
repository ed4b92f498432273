"""First runs: an engine's first trial after its load, its first run against its second with the same prompts.

    python bench/first_runs.py [--engines 2] [--rounds 4] [--warmup full]

`--engines` real engines (the embedded model; spec off, then n-gram k=3; prefix caching on; full warm-up) load one
after the other in Ray actors, as a sweep keeps them side by side, and then take turns: each round every engine
runs one shared-prefix trial (2048-token prefix, 4 sessions) twice in a row, the same prompts both times. The
first trial after a load runs twice inside the actor (the second is its figure, the first goes to first_runs);
later rounds call the trial twice from here. Printed: TTFT p50 of both runs and their ratio (< 1: the first run
was slower). Figures, not asserts: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

POINT = {"prefix_len": 2048, "suffix_len": 16, "output_len": 8}
METHODS = ["off", "ngram", "mtp"]


def start_engines(ray, *, engines: int, warmup: str) -> list:
    from runner.config.sections import ModelSection, run_config
    from runner.execution.actor import EngineActor
    from runner.measurement.records import RunKeys
    from runner.plan.grid import build_plan

    plan = build_plan(run_config(sweep_name="first_runs", model="tiny-mtp",
                      grid={"spec_method": METHODS[:engines], "num_speculative_tokens": [3], "max_model_len": [4096],
                            "enable_prefix_caching": [True]},
                      workloads={"shared_prefix": {}}, engine_args={"enforce_eager": True, "max_num_seqs": 32,
                                                                    "seed": 0}))
    model = ModelSection(name="tiny-mtp", builtin="tiny_mtp", weights="trained", load_format="auto")
    started = []
    for engine in plan.engines:
        actor = ray.remote(num_cpus=0, max_restarts=0)(EngineActor).remote(
            env={"VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"},
            keys=RunKeys(sweep="first_runs", run_id=warmup), warmup=warmup)
        result = ray.get(actor.start.remote(engine=engine, model=model), timeout=900)
        if not result.ok:
            raise SystemExit(f"engine did not start: {result.failure_kind}: {result.failure_reason}")
        started.append((engine, actor))
    return started


def trial_of(engine, repeat: int):
    from runner.plan.grid import Trial, parse_point

    return Trial(trial_id=f"t-{engine.engine_id}-{repeat}", engine_id=engine.engine_id, workload="shared_prefix",
                 params=parse_point("shared_prefix", POINT), point=POINT, concurrency=4, repeat=repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=2, choices=[1, 2, 3])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", default="full", choices=["full", "light", "off"])
    args = parser.parse_args()
    import ray

    from runner.scheduling.cluster import connect_ray

    connect_ray(address=None)
    engines = start_engines(ray, engines=args.engines, warmup=args.warmup)
    for rnd in range(args.rounds):
        for engine, actor in engines:
            result = ray.get(actor.run_trial.remote(trial=trial_of(engine, rnd)), timeout=600)
            if result.first_run is not None:  # the load's first trial: both runs inside one call
                first, second = result.first_run.trial, result.trial
            else:
                first, second = result.trial, ray.get(actor.run_trial.remote(trial=trial_of(engine, rnd)),
                                                      timeout=600).trial
            ratio = second.ttft_p50_s / first.ttft_p50_s
            print(f"round {rnd} {engine.settings.spec_method:6s} TTFT p50 first {first.ttft_p50_s * 1e3:.1f} ms, "
                  f"second {second.ttft_p50_s * 1e3:.1f} ms: first/second speed ×{ratio:.2f}"
                  f"{'  (after its load)' if result.first_run is not None else ''}", flush=True)
    for _, actor in engines:
        ray.get(actor.shutdown.remote(), timeout=120)
    ray.shutdown()


if __name__ == "__main__":
    main()
