"""Warm-up per shape, and the same trials in two orders on one engine.

One real engine (the embedded model, spec off) in a real Ray actor, started as the runner starts one on CPU (from
the fork server, its start called while `prepare` still imports), runs three decode shapes × 3 repeats in
order A (shape by shape, repeats stacked) and then in order B (interleaved, reversed). With warm-up on, each
shape is warmed exactly once, before its first measured trial. The figures of both orders are printed; whether
they agree within their spread is a benchmark's question (`python bench/order.py`), not a timed assert: on a
shared 2-core machine a neighbour's load moves them by more than 20 % between two runs. A second engine with
`warmup=off` runs the same first trial twice; its first-use cost is printed, not asserted.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine

SHAPES = [{"concurrency": 1, "input_len": 96, "output_len": 48},
          {"concurrency": 4, "input_len": 96, "output_len": 48},
          {"concurrency": 2, "input_len": 384, "output_len": 16}]
REPEATS = 3


def trial_of(engine, shape: dict, repeat: int):
    from runner.plan.grid import Trial, parse_point

    point = {"input_len": shape["input_len"], "output_len": shape["output_len"]}
    return Trial(trial_id=f"t-{shape['concurrency']}-{shape['input_len']}-{repeat}", engine_id=engine.engine_id,
                 workload="decode", params=parse_point("decode", point), point=point,
                 concurrency=shape["concurrency"], repeat=repeat)


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from runner.scheduling.cluster import connect_ray

    connect_ray(address=None)
    yield ray
    ray.shutdown()


def engine_actor(ray, *, warmup: str, engine_start: str = "spawn", env: dict | None = None,
                 prepare: bool = False):
    """An actor with the embedded model's engine loaded: (engine, actor, the start's result). With `prepare`, the
    start is called at once after `prepare` (imports, fork server), so that the two interleave in the actor as the
    scheduler's spare actor's do."""
    from runner.execution.actor import EngineActor
    from runner.measurement.records import RunKeys
    from runner.config.sections import ModelSection, run_config
    from runner.plan.grid import build_plan

    plan = build_plan(run_config(sweep_name="order", model="tiny-mtp", grid={"spec_method": ["off"], "max_model_len": [1024],
                                                                  "enable_prefix_caching": [True]},
                      workloads={"decode": {}}, engine_args={"enforce_eager": True, "max_num_seqs": 8, "seed": 0}))
    engine = plan.engines[0]
    actor = ray.remote(num_cpus=1, max_restarts=0)(EngineActor).remote(
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})},
        keys=RunKeys(sweep="order", run_id=warmup), warmup=warmup, engine_start=engine_start)
    prepared = actor.prepare.remote() if prepare else None
    started = ray.get(actor.start.remote(engine=engine, model=ModelSection(
        name="tiny-mtp", builtin="tiny_mtp", weights="trained", load_format="auto")), timeout=900)
    if prepared is not None:
        ray.get(prepared, timeout=60)
    assert started.ok, started.failure_reason
    return engine, actor, started


def run(ray, actor, trials, *, first_runs: list | None = None) -> list:
    rows = []
    for trial in trials:
        result = ray.get(actor.run_trial.remote(trial=trial), timeout=600)
        assert result.trial.status == "ok", result.trial.failure_reason
        rows.append(result.trial)
        if first_runs is not None:
            first_runs.append(result.first_run)
    return rows


def value(row) -> float:
    return row.decode_tok_s_per_session


@pytest.fixture(scope="module")
def two_orders(ray_cluster):
    """The auto warm-up engine, started as the runner starts one on CPU: from the fork server, while `prepare`
    still imports, with the sleep's pinning installed (on CPU vLLM's worker is a process of its own, so its wrappers
    are not reached: tests/unit/vllm/test_sleep_pinning.py; the load must stay as it was)."""
    from runner.config.execution import EngineStart
    from runner.vllm.sleep_pinning import PIN_AHEAD_ENV

    ray = ray_cluster
    engine, actor, started = engine_actor(ray, warmup="auto", engine_start=EngineStart.FORKSERVER.value,
                                          env={PIN_AHEAD_ENV: "1"}, prepare=True)
    order_a = [trial_of(engine, s, r) for s in SHAPES for r in range(REPEATS)]
    order_b = [trial_of(engine, s, r) for r in range(REPEATS) for s in reversed(SHAPES)]
    first_runs: list = []
    rows_a, rows_b = run(ray, actor, order_a, first_runs=first_runs), run(ray, actor, order_b)
    ray.get(actor.shutdown.remote(), timeout=120)
    ray.kill(actor)
    return rows_a, rows_b, first_runs, (engine, started)


def test_a_start_called_while_prepare_still_imports_forks_the_engine_core(two_orders):
    """The scheduler starts the spare actor's engine as soon as its turn comes, whether or not the spare's
    `prepare` (imports, fork server) has finished; the two calls interleave in the actor and must still give
    a forked engine core (on the H200 a start during prepare fell back to a cold spawn)."""
    from runner.config.execution import EngineStart

    engine, started = two_orders[3]
    assert started.columns["engine_start"] == EngineStart.FORKSERVER.value
    # The row records what the engine ran: the plan's arguments as built, with the node's model folder put in.
    ran = json.loads(started.columns["vllm_args_json"])
    planned = engine.vllm_args.as_dict()
    assert Path(ran["model"], "config.json").exists() and ran["tokenizer"] == ran["model"]
    assert {k: v for k, v in ran.items() if k not in ("model", "tokenizer")} == {
        k: v for k, v in planned.items() if k not in ("model", "tokenizer")}


def by_shape(rows) -> dict:
    out: dict = {}
    for row in rows:
        key = (row.concurrency, json.loads(row.workload_params_json)["input_len"])
        out.setdefault(key, []).append(value(row))
    return out


def test_each_shape_is_warmed_once_before_its_first_measured_trial(two_orders):
    rows_a, rows_b, _, _ = two_orders
    seen = set()
    for row in rows_a + rows_b:
        key = (row.concurrency, json.loads(row.workload_params_json)["input_len"])
        assert (row.warmup_s > 0) == (key not in seen), (key, row.warmup_s)
        assert row.warmup == "full"  # an actor given `auto` unresolved runs the full copy, and says so
        seen.add(key)


def test_two_orders_print_their_figures(two_orders):
    """The figures are printed, not asserted: on a shared machine a neighbour's load moves them more than order
    does. `python bench/order.py` runs the comparison with the arms alternated and reports the verdict."""
    rows_a, rows_b, _, _ = two_orders
    a, b = by_shape(rows_a), by_shape(rows_b)
    assert set(a) == set(b) and all(len(v) == REPEATS for v in a.values())
    for key in a:
        spread = max(max(a[key]) - min(a[key]), max(b[key]) - min(b[key]))
        gap = abs(statistics.median(a[key]) - statistics.median(b[key]))
        print(f"shape c={key[0]} in={key[1]}: order A {[round(v, 1) for v in a[key]]}, "
              f"order B {[round(v, 1) for v in b[key]]}, median gap {gap:.1f} tok/s, spread {spread:.1f}")


def test_the_first_trial_after_a_load_runs_twice_and_keeps_the_second(two_orders):
    rows_a, _, first_runs, _ = two_orders
    kept, first = rows_a[0], first_runs[0]
    assert first is not None and all(r is None for r in first_runs[1:])  # the load's first trial only
    assert kept.first_run_s > 0 and all(r.first_run_s is None for r in rows_a[1:])
    assert first.trial.trial_id == kept.trial_id and first.trial.status == "ok" and first.trial.started_at < kept.started_at
    assert first.trial.warmup_s == kept.warmup_s > 0  # one warm-up, before the first run
    assert first.trial.prompt_tokens_total == kept.prompt_tokens_total
    assert first.trial.output_hash == kept.output_hash  # same prompts, same seeds: the same tokens out
    print(f"first trial: first run {value(first.trial):.1f} tok/s per session, second (kept) {value(kept):.1f}")


def test_first_trial_effect_without_warm_up_is_measured(ray_cluster):
    ray = ray_cluster
    engine, actor, _ = engine_actor(ray, warmup="off")
    shape = SHAPES[2]
    first_runs: list = []
    rows = run(ray, actor, [trial_of(engine, shape, r) for r in range(REPEATS + 1)], first_runs=first_runs)
    ray.get(actor.shutdown.remote(), timeout=120)
    ray.kill(actor)
    first, later = first_runs[0].trial, rows  # the cold run; the kept second run of that trial is warm
    assert first.warmup_s is None
    ttft_ratio = first.ttft_p50_s / statistics.median(r.ttft_p50_s for r in later)
    rate_ratio = value(first) / statistics.median(value(r) for r in later)
    print(f"warmup=off, first run vs the median of the {len(later)} kept runs after it: TTFT p50 ×{ttft_ratio:.2f}, "
          f"decode tok/s per session ×{rate_ratio:.2f}")
