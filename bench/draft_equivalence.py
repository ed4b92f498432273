"""Draft equivalence: a k set on the largest-k engine against an engine loaded at that k, alternating.

    python bench/draft_equivalence.py [--ks 1 2] [--concurrency 1 4] [--blocks 3] [--engine-k 3]
    python bench/draft_equivalence.py --device cuda --profile 0.86 0.74 0.64 --concurrency 1 64 \
        --input-len 1024 --output-len 256 --max-model-len 4096

Two engines of one configuration (MTP; on CPU the embedded model with its trained weights and real acceptance, on
CUDA the MiMo-7B-shaped dummy model with synthetic acceptance (--profile); greedy decoding): L loaded at --engine-k, and S loaded at k (one per k in --ks, one at a time, beside L). At each point
(k, concurrency) they run the same trials in alternating blocks (S, L, S, L, ...; L's draft count set to k before
each of its trials, runner.vllm.draft_count), and the script prints per point: TPOT mean (median over blocks, and
L / S), acceptance per position, accepted tokens per request, and whether the outputs (hash of every request's
tokens) and the accepted counts are identical between S and L in every block. The fast path is faithful at a
point where TPOT is within ±2 % and, under greedy decoding, outputs and accepted counts are identical. Figures, not
asserts: run it on a quiet machine (one engine lock).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def start(ray, *, k: int, args):
    from runner.config.execution import EngineStart
    from runner.config.sections import ModelSection, run_config
    from runner.execution.actor import EngineActor
    from runner.measurement.records import RunKeys
    from runner.plan.grid import build_plan

    engine_args = {"max_num_seqs": max(args.concurrency), "seed": 0}
    if args.device == "cpu":
        engine_args["enforce_eager"] = True
    model = (ModelSection(name="tiny-mtp", builtin="tiny_mtp", weights="trained", load_format="auto")
             if args.device == "cpu" else ModelSection(name="mimo-7b-dummy", builtin="mimo_7b", load_format="dummy"))
    profile = [args.profile] if args.profile else ["real"]
    config = run_config(
        sweep_name="draft_equivalence", model=model.name, engine_args=engine_args,
        grid={"spec_method": ["mtp"], "num_speculative_tokens": [k], "max_model_len": [args.max_model_len],
              "enable_prefix_caching": [False], "gpu_memory_utilization": [args.gpu_memory_utilization],
              "spec_acceptance_profile": profile},
        workloads={"decode": {}})
    config = dataclasses.replace(config, model=model, engine=dataclasses.replace(config.engine, device=args.device))
    engine = build_plan(config).engines[0]
    env = {"TOKENIZERS_PARALLELISM": "false"}
    if args.device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    resources = {"num_cpus": 1} if args.device == "cpu" else {"num_cpus": 1, "num_gpus": args.gpu_share}
    actor = ray.remote(max_restarts=0, **resources)(EngineActor).remote(
        env=env, keys=RunKeys(sweep="draft_equivalence", run_id=f"k{k}"), warmup="full", first_trial_twice=False,
        engine_start=EngineStart.FORKSERVER)  # the setter is installed in the fork server's engine core
    started = ray.get(actor.start.remote(engine=engine, model=model), timeout=1800)
    if not started.ok:
        raise SystemExit(f"engine k={k} did not start: {started.failure_kind}: {started.failure_reason}")
    return engine, actor


def trial(engine, *, c: int, block: int, args, draft=None):
    from runner.plan.grid import Trial, parse_point

    point = {"input_len": args.input_len, "output_len": args.output_len, "requests_per_session": args.requests}
    return Trial(trial_id=f"t-c{c}-b{block}", engine_id=engine.engine_id, workload="decode",
                 params=parse_point("decode", point), point=point, concurrency=c, repeat=block, draft=draft)


def run(ray, actor, t):
    result = ray.get(actor.run_trial.remote(trial=t), timeout=1800)
    row = result.trial
    if row.status != "ok":
        raise SystemExit(f"{t.trial_id}: {row.failure_kind}: {row.failure_reason}")
    return row, result.requests


def figures(row, requests) -> dict:
    return {"tpot": row.tpot_mean_s, "per_pos": list(row.spec_acceptance_per_position or []),
            "accepted_per_req": (row.spec_num_accepted_tokens or 0) / max(1, row.num_requests),
            "accepted": row.spec_num_accepted_tokens, "hashes": [r.output_hash for r in requests],
            "k": row.num_speculative_tokens, "engine_k": row.engine_num_speculative_tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--engine-k", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--blocks", type=int, default=3, help="blocks per engine, alternated S, L, S, L, ...")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2, help="requests per session")
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--profile", type=float, nargs="+", default=None,
                        help="synthetic acceptance per position (CUDA: the MiMo-7B-shaped dummy model); default: "
                             "the model's own (CPU: the embedded model, trained)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    parser.add_argument("--gpu-share", type=float, default=0.5, help="each engine's share of the GPU (two resident)")
    args = parser.parse_args()

    import ray

    from runner.plan.draft_hosts import TrialDraft
    from runner.scheduling.cluster import connect_ray

    connect_ray(address=None)
    large, large_actor = start(ray, k=args.engine_k, args=args)
    table = []
    for k in args.ks:
        static, static_actor = start(ray, k=k, args=args)
        draft = TrialDraft(k=k, engine_k=args.engine_k, planned_engine_id=static.engine_id)
        for c in args.concurrency:
            s_runs, l_runs = [], []
            for block in range(args.blocks):
                s_runs.append(figures(*run(ray, static_actor, trial(static, c=c, block=block, args=args))))
                l_runs.append(figures(*run(ray, large_actor, trial(large, c=c, block=block, args=args, draft=draft))))
            table.append((k, c, s_runs, l_runs))
        ray.get(static_actor.shutdown.remote(), timeout=300)
        ray.kill(static_actor)
    ray.get(large_actor.shutdown.remote(), timeout=300)
    ray.kill(large_actor)
    print(f"device {args.device}; S: engine loaded at k; L: engine loaded at k={args.engine_k}, set to k; "
          f"{args.blocks} blocks each, alternated; greedy; decode {args.input_len} in / {args.output_len} out")
    print("| k | c | TPOT S ms | TPOT L ms | L/S | accept/pos S | accept/pos L | accepted/req S | accepted/req L "
          "| outputs identical | accepted identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k, c, s_runs, l_runs in table:
        ts = statistics.median(r["tpot"] for r in s_runs)
        tl = statistics.median(r["tpot"] for r in l_runs)
        pos = [json.dumps([round(statistics.median(r["per_pos"][i] for r in runs), 3)
                           for i in range(min(len(r["per_pos"]) for r in runs))]) for runs in (s_runs, l_runs)]
        acc = [statistics.median(r["accepted_per_req"] for r in runs) for runs in (s_runs, l_runs)]
        same_out = all(s["hashes"] == l["hashes"] for s, l in zip(s_runs, l_runs))
        same_acc = all(s["accepted"] == l["accepted"] for s, l in zip(s_runs, l_runs))
        print(f"| {k} | {c} | {ts * 1e3:.2f} | {tl * 1e3:.2f} | {tl / ts:.3f} | {pos[0]} | {pos[1]} | {acc[0]:.1f} | "
              f"{acc[1]:.1f} | {'yes' if same_out else 'NO'} | {'yes' if same_acc else 'NO'} |")
    ray.shutdown()


if __name__ == "__main__":
    main()
