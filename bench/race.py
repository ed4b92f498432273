"""Race: early elimination (`sweep.race=true`) against the full sweep — trials and time saved, same answer.

    python bench/race.py [--pairs 2] [--repeats 5] [-- extra overrides]

Runs the CPU draft-count study (`sweep=draft_count sweep.preset=cpu`, the embedded model) with the race off and
on as fresh processes, the order alternating from pair to pair (off, on; on, off; ...). Per run it prints the
process wall, the sweep's span on its timeline (first engine call → last span's end), the trials run and
skipped and the device time in trials; then the medians of on / off, and whether each run's final choices
(per workload the verdict's winner or "tie within noise", per method the single k) are the same as the first
run's. An arm is stopped only after
3 rounds (a verdict needs 3 repeats), so the race saves trials only with more than 3 repeats (default 5).
Figures, not asserts: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import finish, out_dir, print_machine, read_run, run_logged  # noqa: E402

STUDY = ["sweep=draft_count", "sweep.preset=cpu"]


def analysis(run_dir: Path):
    from runner.report.build import analyse
    from runner.report.load import load_results

    return analyse(load_results([run_dir]))


def choices(a) -> dict:
    """Per workload the verdict's winner (every row: points may differ), per method the single k."""
    verdicts: dict[str, str] = {}
    for r in a.verdict.itertuples():  # a workload whose points differ has a row per outcome
        key = f"{r.workload} winner"
        verdicts[key] = "; ".join(filter(None, [verdicts.get(key), f"{r.winner} at {r.over}"]))
    ks = {f"{r['workload']} {r['method']} single k": r["single k"] for r in a.draft_summary.to_dict("records")}
    return {**verdicts, **ks}


def stopped_workloads(a) -> list[str]:
    """Workloads in which the race stopped at least one arm."""
    return sorted(set(a.race.workload)) if len(a.race) else []


def figures(run_dir: Path) -> dict:
    tables = read_run(run_dir)
    trials, phases = tables["trials"], tables["phases"]
    lanes = phases[phases.phase != "launch"]  # launch: the command's own start (a first run trains the model)
    spans = phases[phases.phase == "trial"]
    return {"sweep_s": float((lanes.started_at + lanes.duration_s).max() - lanes.started_at.min()),
            "trials_run": int((trials.status == "ok").sum()), "trials_skipped": int((trials.status == "skipped").sum()),
            "trial_device_s": float(spans.duration_s.sum()), "loads": int((phases.phase == "start").sum())}


def one_run(*, out: Path, race: bool, index: int, repeats: int, extra: list[str]) -> dict:
    run = f"race-{'on' if race else 'off'}-{index}"
    cmd = [sys.executable, "-m", "runner", f"output_root={out}", *STUDY, f"sweep.repeats={repeats}",
           f"sweep.race={str(race).lower()}", f"run={run}", "tracking=none", *extra]
    ran = run_logged(cmd, log=out / f"{run}.log")
    run_dir = out / "draft_count" / run
    a = analysis(run_dir)
    return {"race": race, "wall_s": ran.wall_s, **figures(run_dir), "choices": choices(a),
            "stopped_in": stopped_workloads(a)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("extra", nargs="*", help="more Hydra overrides for both arms")
    args = parser.parse_args()
    out = out_dir("race")
    results: dict = {"machine_before": print_machine("race"), "runs": []}
    for pair in range(args.pairs):
        for race in ((False, True) if pair % 2 == 0 else (True, False)):
            results["runs"].append(one_run(out=out, race=race, index=pair, repeats=args.repeats, extra=args.extra))

    def report() -> None:
        runs = results["runs"]
        print("\n| run | race | wall s | sweep s | trials run | skipped | trial device s | loads |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for i, r in enumerate(runs):
            arm = "on" if r["race"] else "off"
            print(f"| {i} | {arm} | {r['wall_s']:.1f} | {r['sweep_s']:.1f} | {r['trials_run']} | {r['trials_skipped']} "
                  f"| {r['trial_device_s']:.1f} | {r['loads']} |")
        for key in ("wall_s", "sweep_s", "trial_device_s", "trials_run"):
            on = statistics.median(r[key] for r in runs if r["race"])
            off = statistics.median(r[key] for r in runs if not r["race"])
            print(f"{key}: on / off = {on:.1f} / {off:.1f} = {on / off:.3f}")
        first = runs[0]["choices"]
        for i, r in enumerate(runs[1:], start=1):
            differ = {k: (first.get(k), v) for k, v in r["choices"].items() if first.get(k) != v}
            print(f"run {i} choices {'same as run 0' if not differ else f'differ from run 0: {differ}'}")
            for key in differ:  # a difference where neither run stopped an arm is the runs' noise, not the race
                stopped = [run["stopped_in"] for run in (runs[0], r)]
                workload = key.split()[0]
                print(f"  {key}: the race stopped arms of {workload} in "
                      f"{'neither run' if not any(workload in s for s in stopped) else 'one or both runs'}")
        print("run 0 choices: " + "; ".join(f"{k}: {v}" for k, v in first.items()))

    finish(results, out=out, label="race", report=report)


if __name__ == "__main__":
    main()
