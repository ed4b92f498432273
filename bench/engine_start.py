"""Engine start: vLLM's engine core forked from a warm fork server vs spawned cold, on the efficiency grid.

    python bench/engine_start.py [--repeats 2]

Runs the runner on bench/efficiency.py's grid (spec off / mtp:1 / mtp:2 × concurrency {1, 4}) with
`execution.engine_start=spawn` and `=forkserver`, alternating (spawn first in even repeats). Prints per arm:
the wall time, vLLM's own load time per engine, the time the actor spent preparing (imports), and per trial
point the median decode tok/s per session, TTFT p50 and TPOT p50 — the figures must not move with the start
method (the engines run the same code; only how their processes came to exist differs).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import efficiency  # noqa: E402

ARMS = ("spawn", "forkserver")
FIGURES = ("decode_tok_s_per_session", "ttft_p50_s", "tpot_p50_s")


def run_arm(*, model, out: Path, arm: str, rep: int, only_off: bool = False, trial_repeats: int = 1) -> dict:
    run = f"{arm}-rep{rep}"
    overrides = [*efficiency.runner_overrides(model), f"execution.engine_start={arm}"]
    if only_off:  # one engine: no position in the sweep, no neighbour, only the start method differs
        overrides += ["sweep.grid.spec_method=[off]", "sweep.grid.num_speculative_tokens=[1]"]
    overrides += [f"sweep.repeats={trial_repeats}"]
    ran = common.run_logged(common.runner_cmd(output_root=out / "runner", sweep="engine_start", run=run,
                                              overrides=overrides), log=out / f"{run}.log")
    run_dir = out / "runner" / "engine_start" / run
    data = common.read_run(run_dir)
    from runner.sinks.parquet import has_table, read_frame

    phases = read_frame(run_dir, "phases") if has_table(run_dir, "phases") else None
    trials = data["trials"]
    points: dict[str, dict[str, float]] = {}
    for key, rows in trials.groupby([trials.spec_method, trials.num_speculative_tokens, trials.concurrency]):
        points[f"{key[0]}:{key[1]} c={key[2]}"] = {name: float(rows[name].median()) for name in FIGURES}
    return {"wall_s": ran.wall_s, "load_s": [float(x) for x in data["engines"].load_s],
            "prepare_s": [] if phases is None else [float(x) for x in phases[phases.phase == "prepare"].duration_s],
            "points": points}


def report(results: dict) -> None:
    print("\n== engine start: spawn vs forkserver (medians over repeats)")
    for arm in ARMS:
        runs = results[arm]
        loads = [x for r in runs for x in r["load_s"]]
        print(f"{arm:>10}: wall {statistics.median(r['wall_s'] for r in runs):.1f} s "
              f"({', '.join(format(r['wall_s'], '.1f') for r in runs)}); vLLM load per engine median "
              f"{statistics.median(loads):.1f} s ({min(loads):.1f}–{max(loads):.1f}, n={len(loads)})")
    walls = [statistics.median(r["wall_s"] for r in results[arm]) for arm in ARMS]
    print(f"wall forkserver / spawn: {walls[1] / walls[0]:.3f}")
    print("\nper point: forkserver / spawn of the medians (spawn's values in brackets)")
    for key in sorted(results["spawn"][0]["points"]):
        parts = []
        for name in FIGURES:
            med = {arm: statistics.median(r["points"][key][name] for r in results[arm]) for arm in ARMS}
            spread = {arm: [r["points"][key][name] for r in results[arm]] for arm in ARMS}
            parts.append(f"{name} ×{med['forkserver'] / med['spawn']:.3f} "
                         f"[spawn {min(spread['spawn']):.4g}–{max(spread['spawn']):.4g}, "
                         f"forkserver {min(spread['forkserver']):.4g}–{max(spread['forkserver']):.4g}]")
        print(f"  {key}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs of each arm, alternated")
    parser.add_argument("--only-off", action="store_true", help="one engine (spec off) instead of the three")
    parser.add_argument("--trial-repeats", type=int, default=1, help="sweep.repeats inside each run (medians)")
    args = parser.parse_args()
    out = common.out_dir("engine-start")
    model = common.tiny_model()
    results = {"machine_before": common.print_machine("engine-start"), **{arm: [] for arm in ARMS}}
    for rep in range(args.repeats):
        for arm in (ARMS if rep % 2 == 0 else ARMS[::-1]):
            print(f"-- repeat {rep + 1}/{args.repeats}: {arm}", flush=True)
            results[arm].append(run_arm(model=model, out=out, arm=arm, rep=rep, only_off=args.only_off,
                                       trial_repeats=args.trial_repeats))
            common.save_json(out / "engine_start.json", results)
    common.finish(results, out=out, label="engine-start", report=lambda: report(results))


if __name__ == "__main__":
    main()
