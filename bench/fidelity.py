"""Fidelity: does the runner measure what vLLM's own benchmarks measure?

    python bench/fidelity.py [--repeats 3]

One engine configuration (the embedded model, spec off, no prefix caching,
eager, max_num_seqs=8, max_model_len=1024), three arms alternating per repeat
so machine load hits them alike:

  A  the runner: `python -m runner ...` → trials.parquet / requests.parquet, decode 128 in / 512 out,
     concurrency {1, 8} × requests_per_session {1, 8}:
       c=8 × 1   8 requests at once          (like B: decode throughput of one batch)
       c=1 × 8   8 requests one after another (TTFT p50, like C at max_concurrency=1)
       c=8 × 8   8 closed-loop sessions      (like C at max_concurrency=8)
  A2 the runner again, the batch point alone with 2 repeats: the 1st and the 2nd trial on one engine
     (the order effect: each must match B, not only the first)
  B  `vllm bench throughput`: 8 prompts at once, 128 in / 512 out (in-process LLM, no HTTP)
  C  `vllm bench serve` against one `vllm serve` of the same settings (started once, not timed):
     max_concurrency=1 × 8 prompts and max_concurrency=8 × 64 prompts

Prints the decode throughput ratio (runner / vLLM) and the TTFT p50 difference,
medians over repeats, and the runner's client-side overhead per request:
client TTFT − engine-side TTFT (engine_ttft_s = first_token_ts − queued_ts, so
the engine's own queueing is inside it).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

INPUT_LEN, OUTPUT_LEN = 128, 512
MAX_NUM_SEQS, MAX_MODEL_LEN = 8, 1024
REQUESTS_PER_SESSION = 8
THROUGHPUT_CONCURRENCY = 8
PORT = 8765


def engine_cli_args(model: common.Model) -> list[str]:
    """The engine settings as vLLM CLI flags; runner_overrides() says the same to the runner."""
    return ["--load-format", model.load_format, "--enforce-eager", "--max-num-seqs", str(MAX_NUM_SEQS),
            "--max-model-len", str(MAX_MODEL_LEN), "--seed", "0", "--no-enable-prefix-caching",
            "--gpu-memory-utilization", "0.9"]


def runner_overrides(model: common.Model) -> list[str]:
    return [*common.runner_model_overrides(model), "sweep.grid.spec_method=[off]",
            "sweep.grid.enable_prefix_caching=[false]", f"sweep.grid.max_model_len=[{MAX_MODEL_LEN}]",
            "sweep.grid.gpu_memory_utilization=[0.9]", f"sweep.grid.concurrency=[1,{THROUGHPUT_CONCURRENCY}]",
            "sweep.repeats=1", f"workload.decode.input_len={INPUT_LEN}",
            f"workload.decode.output_len={OUTPUT_LEN}",
            f"workload.decode.requests_per_session=[1,{REQUESTS_PER_SESSION}]",
            f"engine.args.max_num_seqs={MAX_NUM_SEQS}", "engine.args.enforce_eager=true", "engine.args.seed=0",
            "engine.cpu_kvcache_space_gib=1"]


def arm_runner(*, model, out: Path, rep: int) -> dict:
    run = f"rep{rep}"
    ran = common.run_logged(common.runner_cmd(output_root=out / "runner", sweep="fidelity", run=run,
                                              overrides=runner_overrides(model)), log=out / f"runner-{run}.log")
    data = common.read_run(out / "runner" / "fidelity" / run)
    trials = data["trials"]
    trials["rps"] = [json.loads(p)["requests_per_session"] for p in trials["workload_params_json"]]
    trials = trials.set_index(["concurrency", "rps"])
    c8, n = THROUGHPUT_CONCURRENCY, REQUESTS_PER_SESSION
    reqs = data["requests"].merge(data["trials"][["trial_id", "concurrency", "rps"]], on="trial_id")
    reqs = reqs[reqs["rps"] == n]
    return {
        "wall_s": ran.wall_s,
        "ttft_p50_c1_s": float(trials.loc[(1, n), "ttft_p50_s"]),
        "tok_s_batch": float(trials.loc[(c8, 1), "decode_tok_s_aggregate"]),
        "tok_s_closed_loop": float(trials.loc[(c8, n), "decode_tok_s_aggregate"]),
        "requests": reqs[["concurrency", "ttft_s", "engine_ttft_s", "engine_queue_s"]].to_dict("records"),
    }


def arm_runner_order(*, model, out: Path, rep: int) -> dict:
    """The batch trial as the 1st and as the 2nd trial on one engine (rounds 0 and 1 of a one-engine sweep)."""
    run = f"order{rep}"
    overrides = [o for o in runner_overrides(model) if not o.startswith(("sweep.grid.concurrency",
                                                                         "workload.decode.requests_per_session",
                                                                         "sweep.repeats"))]
    overrides += [f"sweep.grid.concurrency=[{THROUGHPUT_CONCURRENCY}]", "workload.decode.requests_per_session=1",
                  "sweep.repeats=2"]
    common.run_logged(common.runner_cmd(output_root=out / "runner", sweep="fidelity", run=run, overrides=overrides),
                      log=out / f"runner-{run}.log")
    trials = common.read_run(out / "runner" / "fidelity" / run)["trials"]
    order = "position" if "position" in trials else "started_at"
    rates = list(trials.sort_values(order)["decode_tok_s_aggregate"])
    return {"tok_s_first": float(rates[0]), "tok_s_second": float(rates[1])}


def arm_throughput(*, model, out: Path, rep: int) -> dict:
    result = out / f"throughput-rep{rep}.json"
    num_prompts = THROUGHPUT_CONCURRENCY  # one batch, all at once: the runner's c=8 × 1 trial
    cmd = common.vllm_cmd("bench", "throughput", "--model", model.path, *engine_cli_args(model),
                          "--dataset-name", "random", "--random-input-len", str(INPUT_LEN),
                          "--random-output-len", str(OUTPUT_LEN), "--num-prompts", str(num_prompts),
                          "--output-json", str(result))
    ran = common.run_logged(cmd, log=out / f"throughput-rep{rep}.log")
    data = json.loads(result.read_text())
    # ignore_eos: every request yields exactly OUTPUT_LEN tokens.
    return {"wall_s": ran.wall_s, "tok_s": data["num_requests"] * OUTPUT_LEN / data["elapsed_time"]}


def arm_serve(*, model, out: Path, rep: int) -> dict:
    figures = {}
    for concurrency, prompts in ((1, REQUESTS_PER_SESSION), (THROUGHPUT_CONCURRENCY,
                                                              THROUGHPUT_CONCURRENCY * REQUESTS_PER_SESSION)):
        name = f"serve-rep{rep}-c{concurrency}.json"
        cmd = common.vllm_cmd("bench", "serve", "--backend", "vllm", "--base-url", f"http://127.0.0.1:{PORT}",
                              "--model", model.path, "--tokenizer", model.path, "--dataset-name", "random",
                              "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
                              "--ignore-eos", "--temperature", "0", "--num-prompts", str(prompts),
                              "--max-concurrency", str(concurrency), "--request-rate", "inf", "--save-result",
                              "--result-dir", str(out), "--result-filename", name, "--seed", str(rep))
        common.run_logged(cmd, log=out / name.replace(".json", ".log"))
        data = json.loads((out / name).read_text())
        figures[concurrency] = data
    return {"ttft_p50_c1_s": figures[1]["median_ttft_ms"] / 1000,
            "tok_s_closed_loop": figures[THROUGHPUT_CONCURRENCY]["output_throughput"]}


class Server:
    """One `vllm serve` of the same engine settings, up for the whole run (its load is not compared)."""

    def __init__(self, *, model, out: Path):
        import subprocess

        self.log = open(out / "vllm-serve.log", "w")
        cmd = common.vllm_cmd("serve", model.path, "--port", str(PORT), "--host", "127.0.0.1",
                              *engine_cli_args(model), "--disable-uvicorn-access-log")
        print(f"  $ {' '.join(cmd)} &", flush=True)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=common.bench_env(),
                                     cwd=common.ROOT, start_new_session=True)

    def wait_ready(self, timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1)
        raise TimeoutError("vllm serve did not become ready")

    def stop(self) -> None:
        import os
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except Exception:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def overhead(requests: list[dict]) -> dict:
    """Client TTFT − engine TTFT per request, by concurrency (ms)."""
    by_c: dict[int, dict] = {}
    for c in sorted({r["concurrency"] for r in requests}):
        rows = [r for r in requests if r["concurrency"] == c and r["engine_ttft_s"] is not None
                and r["ttft_s"] is not None]
        gaps = sorted((r["ttft_s"] - r["engine_ttft_s"]) * 1000 for r in rows)
        by_c[c] = {
            "n": len(rows),
            "client_ttft_p50_ms": common.median([r["ttft_s"] * 1000 for r in rows]),
            "engine_ttft_p50_ms": common.median([r["engine_ttft_s"] * 1000 for r in rows]),
            "engine_queue_p50_ms": common.median([(r["engine_queue_s"] or 0) * 1000 for r in rows]),
            "gap_p50_ms": common.median(gaps),
            "gap_p90_ms": gaps[int(0.9 * (len(gaps) - 1))] if gaps else None,
            "gap_max_ms": gaps[-1] if gaps else None,
        }
    return by_c


def report(results: dict) -> None:
    a, b, c = results["runner"], results["throughput"], results["serve"]
    print("\n=== fidelity (medians over repeats; per-repeat values in brackets) ===")
    c8, n = THROUGHPUT_CONCURRENCY, REQUESTS_PER_SESSION
    r_tok = common.median([x["tok_s_batch"] for x in a])
    b_tok = common.median([x["tok_s"] for x in b])
    print(f"decode throughput, one batch of {c8} requests, {INPUT_LEN} in / {OUTPUT_LEN} out, output tok/s:")
    print(f"  runner (c={c8} × 1)                {common.fmt(r_tok, digits=1)}  {[round(x['tok_s_batch'], 1) for x in a]}")
    print(f"  vllm bench throughput ({c8} prompts) {common.fmt(b_tok, digits=1)}  {[round(x['tok_s'], 1) for x in b]}")
    pair_b = common.median([x["tok_s_batch"] / y["tok_s"] for x, y in zip(a, b)])
    print(f"  RATIO runner / vllm bench throughput = {common.fmt(pair_b)} (median of paired repeats; "
          f"ratio of medians {common.fmt(r_tok / b_tok)})  target ≥ 0.99")
    for which in ("first", "second"):
        runs = [x[f"tok_s_{which}"] for x in results["runner_order"]]
        ratio = common.median([x / y["tok_s"] for x, y in zip(runs, b)])
        print(f"  the batch as the {which} trial on its engine: {common.fmt(common.median(runs), digits=1)} "
              f"{[round(x, 1) for x in runs]}  RATIO / vllm bench throughput = {common.fmt(ratio)}  target ≥ 0.95")
    rl_tok = common.median([x["tok_s_closed_loop"] for x in a])
    s_tok = common.median([x["tok_s_closed_loop"] for x in c])
    print(f"decode throughput, {c8} closed-loop sessions × {n} requests, output tok/s:")
    print(f"  runner (c={c8} × {n})                {common.fmt(rl_tok, digits=1)}  {[round(x['tok_s_closed_loop'], 1) for x in a]}")
    print(f"  vllm bench serve (max_concurrency={c8}) {common.fmt(s_tok, digits=1)}  {[round(x['tok_s_closed_loop'], 1) for x in c]}")
    pair_s = common.median([x["tok_s_closed_loop"] / y["tok_s_closed_loop"] for x, y in zip(a, c)])
    print(f"  RATIO runner / vllm bench serve = {common.fmt(pair_s)} (ratio of medians {common.fmt(rl_tok / s_tok)})")
    r_ttft = common.median([x["ttft_p50_c1_s"] for x in a]) * 1000
    s_ttft = common.median([x["ttft_p50_c1_s"] for x in c]) * 1000
    print(f"TTFT p50 at c=1 ({INPUT_LEN}-token prompt), ms:")
    print(f"  runner (client side, in-process)  {r_ttft:.2f}  {[round(x['ttft_p50_c1_s'] * 1000, 2) for x in a]}")
    print(f"  vllm bench serve (HTTP client)    {s_ttft:.2f}  {[round(x['ttft_p50_c1_s'] * 1000, 2) for x in c]}")
    print(f"  DIFF runner − vllm bench serve = {r_ttft - s_ttft:+.2f} ms")
    print("runner client TTFT vs engine-side TTFT (first_token_ts − queued_ts), all repeats pooled, ms:")
    for conc, o in overhead([r for x in a for r in x["requests"]]).items():
        print(f"  c={conc}: n={o['n']} client p50 {common.fmt(o['client_ttft_p50_ms'], digits=2)}, engine p50 "
              f"{common.fmt(o['engine_ttft_p50_ms'], digits=2)} (queue p50 {common.fmt(o['engine_queue_p50_ms'], digits=2)}); "
              f"GAP client − engine p50 {common.fmt(o['gap_p50_ms'], digits=2)}, p90 {common.fmt(o['gap_p90_ms'], digits=2)}, "
              f"max {common.fmt(o['gap_max_ms'], digits=2)}  target p50 ≤ 1 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    out = common.out_dir("fidelity")
    model = common.tiny_model()
    results = {"machine_before": common.print_machine("fidelity"), "model": vars(model),
               "runner": [], "runner_order": [], "throughput": [], "serve": []}
    server = Server(model=model, out=out)
    try:
        server.wait_ready()
        for rep in range(args.repeats):
            print(f"-- repeat {rep + 1}/{args.repeats}", flush=True)
            results["runner"].append(arm_runner(model=model, out=out, rep=rep))
            results["runner_order"].append(arm_runner_order(model=model, out=out, rep=rep))
            results["throughput"].append(arm_throughput(model=model, out=out, rep=rep))
            results["serve"].append(arm_serve(model=model, out=out, rep=rep))
            common.save_json(out / "fidelity.json", results)
    finally:
        server.stop()
    common.finish(results, out=out, label="fidelity", report=lambda: report(results))


if __name__ == "__main__":
    main()
