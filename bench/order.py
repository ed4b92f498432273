"""Order: the same trials in two orders on one warm engine agree within their spread; the first-use cost.

    python bench/order.py [--blocks 4] [--warmup light]

One real engine (the embedded model, spec off, warm-up on) in a Ray actor runs three decode shapes in blocks
that alternate between order A (shape by shape, repeats stacked) and order B (round by round, shapes reversed):
A, B, A, B, ... Per shape it prints the median decode tok/s per session of each order, the gap between them and
the spread between repeats; "agree" when the gap is within the spread. Then a second engine with warm-up off
runs one shape repeatedly: its first trial against the median of the later ones is the first-use cost that
warm-up keeps out of every figure. Figures, not asserts: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = [{"concurrency": 1, "input_len": 96, "output_len": 48},
          {"concurrency": 4, "input_len": 96, "output_len": 48},
          {"concurrency": 2, "input_len": 384, "output_len": 16}]
REPEATS = 3


def start_engine(ray, *, warmup: str, actor_class=None, workloads: dict | None = None):
    from runner.execution.actor import EngineActor
    from runner.measurement.records import RunKeys
    from runner.config.sections import ModelSection, run_config
    from runner.plan.grid import build_plan

    plan = build_plan(run_config(sweep_name="order", model="tiny-mtp",
                      grid={"spec_method": ["off"], "max_model_len": [1024], "enable_prefix_caching": [True]},
                      workloads=workloads or {"decode": {}},
                      engine_args={"enforce_eager": True, "max_num_seqs": 8, "seed": 0}))
    engine = plan.engines[0]
    actor = ray.remote(num_cpus=1, max_restarts=0)(actor_class or EngineActor).remote(
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"},
        keys=RunKeys(sweep="order", run_id=warmup), warmup=warmup)
    started = ray.get(actor.start.remote(engine=engine, model=ModelSection(
        name="tiny-mtp", builtin="tiny_mtp", weights="trained", load_format="auto")), timeout=900)
    if not started.ok:
        raise SystemExit(f"engine did not start: {started.failure_kind}: {started.failure_reason}")
    return engine, actor


def trial_of(engine, shape: dict, repeat: int):
    from runner.plan.grid import Trial, parse_point

    point = {"input_len": shape["input_len"], "output_len": shape["output_len"]}
    return Trial(trial_id=f"t-{shape['concurrency']}-{shape['input_len']}-{repeat}", engine_id=engine.engine_id,
                 workload="decode", params=parse_point("decode", point), point=point,
                 concurrency=shape["concurrency"], repeat=repeat)


def run(ray, actor, trials, *, first_runs: list | None = None) -> list:
    """The trials' rows; `first_runs` collects the cold first run of a load's first trial (run twice, second kept)."""
    rows = []
    for trial in trials:
        result = ray.get(actor.run_trial.remote(trial=trial), timeout=600)
        row = result.trial
        if row.status != "ok":
            raise SystemExit(f"{trial.trial_id}: {row.failure_kind}: {row.failure_reason}")
        rows.append(row)
        if first_runs is not None and result.first_run is not None:
            first_runs.append(result.first_run.trial)
    return rows


def shape_of(row) -> tuple[int, int]:
    return row.concurrency, json.loads(row.workload_params_json)["input_len"]


def orders(engine) -> dict[str, list]:
    return {"A": [trial_of(engine, s, r) for s in SHAPES for r in range(REPEATS)],
            "B": [trial_of(engine, s, r) for r in range(REPEATS) for s in reversed(SHAPES)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4, help="blocks of each order, alternated (A, B, A, B, ...)")
    parser.add_argument("--cold-repeats", type=int, default=4, help="trials on the warm-up-off engine")
    parser.add_argument("--warmup", default="auto", choices=["auto", "full", "light"],
                        help="the warm engine's execution.warmup (auto: the device's own)")
    args = parser.parse_args()

    import ray

    from runner.scheduling.cluster import connect_ray

    connect_ray(address=None)
    engine, actor = start_engine(ray, warmup=args.warmup)
    figures: dict[str, dict] = {"A": {}, "B": {}}
    for block in range(2 * args.blocks):
        name = "AB"[block % 2]
        for row in run(ray, actor, orders(engine)[name]):
            if row.warmup_s:  # the shape's first trial ran right after its warm-up: the first-trial check below
                print(f"first trial of c={row.concurrency} in={shape_of(row)[1]}: "
                      f"{row.decode_tok_s_per_session:.1f} tok/s per session (warm-up {row.warmup_s:.2f} s)")
            figures[name].setdefault(shape_of(row), []).append(row.decode_tok_s_per_session)
    ray.get(actor.shutdown.remote(), timeout=120)
    ray.kill(actor)
    agree = 0
    for key in figures["A"]:
        a, b = figures["A"][key], figures["B"][key]
        spread = max(max(a) - min(a), max(b) - min(b))
        gap = abs(statistics.median(a) - statistics.median(b))
        agree += gap <= spread
        print(f"c={key[0]} in={key[1]}: order A median {statistics.median(a):.1f} (n={len(a)}, "
              f"{min(a):.1f}–{max(a):.1f}), order B median {statistics.median(b):.1f} (n={len(b)}, "
              f"{min(b):.1f}–{max(b):.1f}); gap {gap:.1f}, spread {spread:.1f}: "
              f"{'agree' if gap <= spread else 'DIFFER'}")
    print(f"orders agree within their spread on {agree} of {len(figures['A'])} shapes")

    engine, actor = start_engine(ray, warmup="off")
    first_runs: list = []
    rows = run(ray, actor, [trial_of(engine, SHAPES[2], r) for r in range(args.cold_repeats + 1)],
               first_runs=first_runs)
    ray.get(actor.shutdown.remote(), timeout=120)
    ray.kill(actor)
    # The cold run is the first of the load's first trial's two runs (its kept second run is warm).
    first, later = (first_runs[0], rows) if first_runs else (rows[0], rows[1:])
    ttft = first.ttft_p50_s / statistics.median(r.ttft_p50_s for r in later)
    rate = first.decode_tok_s_per_session / statistics.median(r.decode_tok_s_per_session for r in later)
    print(f"warm-up off, first trial vs the median of the {len(later)} after it: TTFT p50 ×{ttft:.2f}, "
          f"decode tok/s per session ×{rate:.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
