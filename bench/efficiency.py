"""Efficiency: the same small grid run by the runner and by `vllm bench sweep serve`.

    python bench/efficiency.py [--repeats 1]

Grid: spec off / mtp:1 / mtp:2 (three engine configurations) × concurrency {1, 4},
decode 128 in / 64 out, 4 requests per session (c=1: 4 requests, c=4: 16), the
embedded model, eager, max_model_len=1024, max_num_seqs=32, prefix caching on
(reset between trials on both sides). The arms alternate per repeat.

  runner: `python -m runner sweep=quick ...` (one engine load per configuration, trials on it; the overrides
          apply over the quick sweep, not the demo, whose explicit arms and second workload would replace the grid)
  vLLM:   `vllm bench sweep serve --serve-cmd "vllm serve ..." --bench-cmd "vllm bench serve ..."
           --serve-params <3 configs> --bench-params <2 concurrencies> --num-runs 1`

Prints both wall times and their ratio, the engine loads each made, and where
the runner's wall time went: engine loads, trials, and the rest (the device idle
outside engine loads), from engines.parquet (load_s, started_at) and
trials.parquet (started_at, duration_s).
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from runner.report.timeline import union_length as _union_length  # noqa: E402

INPUT_LEN, OUTPUT_LEN, REQUESTS_PER_SESSION = 128, 64, 4
CONCURRENCY = (1, 4)
SPEC_ARMS = (("off", 0), ("mtp", 1), ("mtp", 2))
MAX_NUM_SEQS, MAX_MODEL_LEN = 32, 1024
PORT = 8766


def runner_overrides(model: common.Model, *, spec_ks=(1, 2), concurrency=CONCURRENCY, slots: int = 1) -> list[str]:
    return [*common.runner_model_overrides(model), "sweep.grid.spec_method=[off,mtp]",
            f"sweep.grid.num_speculative_tokens=[{','.join(map(str, spec_ks))}]",
            "sweep.grid.enable_prefix_caching=[true]", f"sweep.grid.max_model_len=[{MAX_MODEL_LEN}]",
            "sweep.grid.gpu_memory_utilization=[0.9]", f"sweep.grid.concurrency=[{','.join(map(str, concurrency))}]",
            "sweep.repeats=1", f"workload.decode.input_len={INPUT_LEN}", f"workload.decode.output_len={OUTPUT_LEN}",
            f"workload.decode.requests_per_session={REQUESTS_PER_SESSION}",
            f"engine.args.max_num_seqs={MAX_NUM_SEQS}", "engine.args.enforce_eager=true", "engine.args.seed=0",
            "engine.cpu_kvcache_space_gib=1", f"cluster.cpu_engine_slots={slots}"]


def runner_timeline(*, data: dict, started_at: float, wall_s: float) -> dict:
    """Where the runner's wall time went (union of intervals, so parallel engines count once)."""
    engines, trials = data["engines"], data["trials"]
    loads = [(r.started_at - r.load_s, r.started_at) for r in engines.itertuples() if r.load_s == r.load_s]
    phases = data.get("phases")
    if phases is not None and len(phases):  # the timeline's trial spans: the engine's warm-ups included
        runs = [(r.started_at, r.started_at + r.duration_s) for r in phases[phases.phase == "trial"].itertuples()]
    else:  # a run from before the timeline: the measured windows only
        runs = [(r.started_at, r.started_at + r.duration_s) for r in trials.itertuples()
                if r.duration_s == r.duration_s]
    # The engine's own preparation: its actor's imports and, with engine_start=forkserver, its fork server's
    # (vLLM's import, which a spawned engine core paid inside the load).
    prepares = [] if phases is None or not len(phases) else [
        (r.started_at, r.started_at + r.duration_s) for r in phases[phases.phase == "prepare"].itertuples()]
    busy = _union_length(loads + runs + prepares)
    load_s = _union_length(loads)
    first_load = min(a for a, _ in loads + prepares) if loads or prepares else started_at
    last_trial = max(b for _, b in runs) if runs else started_at + wall_s
    return {
        "wall_s": wall_s,
        "engine_loads": len(engines),
        "distinct_engine_configs": int(engines["engine_id"].nunique()) if len(engines) else 0,
        "trials": len(trials),
        "trials_ok": int((trials["status"] == "ok").sum()) if len(trials) else 0,
        "load_s": load_s,
        "trial_s": _union_length(runs),
        "prepare_s": _union_length(prepares),
        "idle_outside_loads_s": wall_s - busy,
        "idle_share": (wall_s - busy) / wall_s,
        "before_first_load_s": first_load - started_at,
        "after_last_trial_s": started_at + wall_s - last_trial,
        "load_s_each": [round(b - a, 2) for a, b in loads],
    }


def arm_runner(*, model, out: Path, rep: int, sweep: str = "efficiency", overrides: list[str] | None = None) -> dict:
    run = f"rep{rep}"
    ran = common.run_logged(common.runner_cmd(output_root=out / "runner", sweep=sweep, run=run,
                                              overrides=overrides or runner_overrides(model)),
                            log=out / f"runner-{sweep}-{run}.log")
    data = common.read_run(out / "runner" / sweep / run)
    timeline = runner_timeline(data=data, started_at=ran.started_at, wall_s=ran.wall_s)
    return {**timeline, "worker_start_s_each": worker_starts(out / "runner" / sweep / run / "logs")}


_LOG_TIME = re.compile(r"^\((\w[\w-]*) pid=\d+\) \w+ [\d-]+ (\d\d):(\d\d):(\d\d) ")


def worker_starts(log_dir: Path) -> list[int]:
    """Seconds (whole: vLLM's log stamps) from each engine core's first line to its worker's first line: the
    worker's spawn and its cold import of torch and vLLM, which vLLM's CPU platform does for every load."""
    out = []
    for log in sorted(log_dir.glob("*.log")):
        first: dict[str, int] = {}
        for line in log.read_text(errors="replace").splitlines():
            m = _LOG_TIME.match(line)
            if m:
                first.setdefault(m.group(1), int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4)))
        if "EngineCore" in first and "VllmWorker-0" in first:
            out.append((first["VllmWorker-0"] - first["EngineCore"]) % 86400)
    return out


def sweep_files(*, model, out: Path) -> tuple[Path, Path]:
    serve = []
    for method, k in SPEC_ARMS:
        item = {"_benchmark_name": "off" if method == "off" else f"{method}{k}"}
        if method != "off":
            item["speculative_config"] = {"method": method, "num_speculative_tokens": k}
        serve.append(item)
    bench = [{"_benchmark_name": f"c{c}", "max_concurrency": c, "num_prompts": c * REQUESTS_PER_SESSION}
             for c in CONCURRENCY]
    serve_path, bench_path = out / "serve_params.json", out / "bench_params.json"
    serve_path.write_text(json.dumps(serve, indent=2))
    bench_path.write_text(json.dumps(bench, indent=2))
    return serve_path, bench_path


def arm_vllm_sweep(*, model, out: Path, rep: int) -> dict:
    serve_params, bench_params = sweep_files(model=model, out=out)
    vllm = str(common.VLLM_WRAPPER)  # ends with "vllm": the sweep then resets caches through the server
    serve_cmd = [vllm, "serve", model.path, "--host", "127.0.0.1", "--port", str(PORT), "--load-format",
                 model.load_format, "--enforce-eager", "--max-num-seqs", str(MAX_NUM_SEQS), "--max-model-len",
                 str(MAX_MODEL_LEN), "--seed", "0", "--enable-prefix-caching", "--gpu-memory-utilization", "0.9",
                 "--disable-uvicorn-access-log"]
    bench_cmd = [vllm, "bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{PORT}", "--model",
                 model.path, "--tokenizer", model.path, "--dataset-name", "random", "--random-input-len",
                 str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--ignore-eos", "--temperature", "0",
                 "--request-rate", "inf"]
    cmd = common.vllm_cmd("bench", "sweep", "serve", "--serve-cmd", shlex.join(serve_cmd), "--bench-cmd",
                          shlex.join(bench_cmd), "--serve-params", str(serve_params), "--bench-params",
                          str(bench_params), "--num-runs", "1", "--server-ready-timeout", "1500", "--show-stdout",
                          "-o", str(out / "vllm-sweep"), "-e", f"rep{rep}")
    ran = common.run_logged(cmd, log=out / f"vllm-sweep-rep{rep}.log")
    text = ran.log.read_text(errors="replace")
    runs = sorted((out / "vllm-sweep" / f"rep{rep}").rglob("run=0.json"))
    return {"wall_s": ran.wall_s, "engine_loads": text.count("[BEGIN SERVER]"), "trials": len(runs),
            "init_engine_s": [float(x) for x in re.findall(r"init engine .*? took ([\d.]+) s", text)]}


def report(results: dict) -> None:
    r, v = results["runner"], results["vllm_sweep"]
    print("\n=== efficiency: 3 engine configs (spec off, mtp:1, mtp:2) × concurrency {1,4}, 128 in / 64 out ===")
    r_wall = common.median([x["wall_s"] for x in r])
    v_wall = common.median([x["wall_s"] for x in v])
    print(f"runner wall                  {r_wall:.1f} s  {[round(x['wall_s'], 1) for x in r]}")
    print(f"vllm bench sweep serve wall  {v_wall:.1f} s  {[round(x['wall_s'], 1) for x in v]}")
    pair = common.median([x["wall_s"] / y["wall_s"] for x, y in zip(r, v)])
    print(f"RATIO runner / vllm bench sweep serve wall = {pair:.3f} (median of paired repeats)  target ≤ 0.5")
    print(f"engine loads: runner {[x['engine_loads'] for x in r]} (distinct configs "
          f"{[x['distinct_engine_configs'] for x in r]}), vllm bench sweep serve {[x['engine_loads'] for x in v]}; "
          f"trials: runner {[x['trials_ok'] for x in r]}, vllm {[x['trials'] for x in v]}")
    for x in r:
        print(f"runner time: loads {x['load_s']:.1f} s {x['load_s_each']}, engine preparation (imports) on the "
              f"critical path {x.get('prepare_s', 0):.1f} s, trials (warm-ups included) {x['trial_s']:.1f} s, "
              f"idle outside loads and preparation {x['idle_outside_loads_s']:.1f} s = SHARE {x['idle_share']:.1%} "
              f"of wall; outside loads alone {x['idle_outside_loads_s'] + x.get('prepare_s', 0):.1f} s = "
              f"{(x['idle_outside_loads_s'] + x.get('prepare_s', 0)) / x['wall_s']:.1%} "
              f"(before the first engine call {x['before_first_load_s']:.1f} s, after last trial "
              f"{x['after_last_trial_s']:.1f} s, between {x['idle_outside_loads_s'] - x['before_first_load_s'] - x['after_last_trial_s']:.1f} s)")
        if x.get("worker_start_s_each"):
            print(f"runner loads: of each, the worker's spawn and cold import (engine core's first log line -> "
                  f"worker's) {x['worker_start_s_each']} s")
    for x in v:
        print(f"vllm sweep: engine init (profile, KV, warm-up) per server {x['init_engine_s']}")


# ---- does an idle resident engine slow the active one? (picks the CPU default of execution.resident) ----
IDLE_ENGINE = r"""
import sys, time
from vllm import LLM
# 0.3: vLLM's CPU build refuses a start when this share of the NUMA node's RAM is not free (the other engine holds some)
llm = LLM(model=sys.argv[1], load_format=sys.argv[2], max_model_len=1024, enforce_eager=True, max_num_seqs=32,
          seed=0, enable_prefix_caching=True, gpu_memory_utilization=0.3)
llm.generate([{"prompt_token_ids": [5] * 16}], use_tqdm=False)  # warm, then idle like a resident engine
print("READY", flush=True)
sys.stdin.read()
"""


def idle_interference(*, rounds: int, out: Path) -> dict:
    """Decode tok/s of engine A alone vs with a loaded, idle engine B in another process, alternated.

    Both use vLLM's default core binding (what two resident engines on one CPU slot get)."""
    import subprocess

    from vllm import LLM, SamplingParams

    model = common.tiny_model()
    llm = LLM(model=model.path, load_format=model.load_format, max_model_len=MAX_MODEL_LEN, enforce_eager=True,
              max_num_seqs=MAX_NUM_SEQS, seed=0, enable_prefix_caching=True, gpu_memory_utilization=0.3)
    params = SamplingParams(max_tokens=OUTPUT_LEN, temperature=0.0, ignore_eos=True)

    def tok_s(batch: int) -> float:
        llm.reset_prefix_cache()
        prompts = [{"prompt_token_ids": [(7 * i + j) % 1000 + 10 for j in range(INPUT_LEN)]} for i in range(batch)]
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        return sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - t0)

    for batch in (1, 4):
        tok_s(batch)  # warm-up
    figures = {"alone": {1: [], 4: []}, "with_idle_engine": {1: [], 4: []}}
    for r in range(rounds):
        for state in (("alone", "with_idle_engine") if r % 2 == 0 else ("with_idle_engine", "alone")):
            idle = None
            if state == "with_idle_engine":
                idle = subprocess.Popen([sys.executable, "-c", IDLE_ENGINE, model.path, model.load_format],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, env=common.bench_env())
                while idle.stdout.readline().strip() != "READY":
                    if idle.poll() is not None:
                        raise RuntimeError("idle engine failed to start")
                time.sleep(2)
            for batch in (1, 4):
                for _ in range(2):
                    figures[state][batch].append(tok_s(batch))
            if idle is not None:
                idle.stdin.close()
                idle.wait(timeout=60)
            print(f"  round {r}: {state} bs1 {figures[state][1][-2:]} bs4 {figures[state][4][-2:]}", flush=True)
    summary = {}
    for batch in (1, 4):
        alone, shared = common.median(figures["alone"][batch]), common.median(figures["with_idle_engine"][batch])
        summary[f"bs{batch}"] = {"alone_tok_s": alone, "with_idle_tok_s": shared, "ratio": shared / alone,
                                 "alone_all": figures["alone"][batch], "with_idle_all": figures["with_idle_engine"][batch]}
        print(f"IDLE ENGINE bs{batch}: alone {alone:.1f} tok/s, with an idle resident engine {shared:.1f} tok/s, "
              f"ratio {shared / alone:.3f} (medians of {len(figures['alone'][batch])})")
    common.save_json(out / "idle_interference.json", summary)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--idle-engine", type=int, default=0, metavar="ROUNDS",
                        help="instead: measure decode tok/s alone vs beside an idle resident engine, ROUNDS rounds")
    args = parser.parse_args()
    if args.idle_engine:
        out = common.out_dir("idle-engine")
        common.print_machine("idle-engine")
        idle_interference(rounds=args.idle_engine, out=out)
        return
    out = common.out_dir("efficiency")
    model = common.tiny_model()
    results = {"machine_before": common.print_machine("efficiency"), "runner": [], "vllm_sweep": []}
    for rep in range(args.repeats):
        print(f"-- repeat {rep + 1}/{args.repeats}", flush=True)
        # Alternate which arm goes first so a trend in machine load does not favour one.
        arms = [("runner", arm_runner), ("vllm_sweep", arm_vllm_sweep)]
        for name, arm in (arms if rep % 2 == 0 else arms[::-1]):
            results[name].append(arm(model=model, out=out, rep=rep))
            common.save_json(out / "efficiency.json", results)
    common.finish(results, out=out, label="efficiency", report=lambda: report(results))


if __name__ == "__main__":
    main()
