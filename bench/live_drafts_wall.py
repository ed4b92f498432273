"""A sweep's wall with a load per k against one load per configuration, alternating on one machine.

    python bench/live_drafts_wall.py [--pairs 2] [--sweep quick] [overrides ...]

Runs `python -m runner sweep=quick` (or --sweep) as a user would, each time in a fresh run folder, alternating
execution.live_draft_count=off (a load per k) and =on (the largest-k engine runs every k): off, on, off, on, ...
Per run it prints the process wall, the runner's own "total time", the engines table's loads and load seconds,
and the trials with their k; then the median walls and their ratio. Figures, not asserts: hold the engine lock.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import out_dir, print_machine, read_run, run_logged, runner_cmd  # noqa: E402

MODES = ("off", "on")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--sweep", default="quick")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    out = out_dir("live_drafts_wall")
    print_machine("before")
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    for i in range(args.pairs):
        for mode in MODES:
            run = f"{mode}-{i}"
            ran = run_logged(runner_cmd(output_root=out, sweep=args.sweep, run=run,
                                        overrides=[f"sweep={args.sweep}", f"execution.live_draft_count={mode}",
                                                   *args.overrides]), log=out / f"{run}.log")
            total = re.search(r"total time: ([\d.]+) s", ran.log.read_text())
            frames = read_run(out / args.sweep / run)
            engines, trials = frames["engines"], frames["trials"]
            ks = sorted(int(k) for k in trials.num_speculative_tokens.unique()) if len(trials) else []
            loads = float(engines.load_s.fillna(0).sum()) if len(engines) else 0.0
            print(f"  {mode}: wall {ran.wall_s:.1f} s, runner total {total.group(1) if total else 'n/a'} s; "
                  f"{len(engines)} loads ({loads:.1f} s), {len(trials)} trials at k {ks}", flush=True)
            walls[mode].append(ran.wall_s)
    print_machine("after")
    off, on = (statistics.median(walls[m]) for m in MODES)
    print(f"sweep={args.sweep}: a load per k {off:.1f} s (runs {', '.join(f'{w:.1f}' for w in walls['off'])}), one "
          f"load per configuration {on:.1f} s (runs {', '.join(f'{w:.1f}' for w in walls['on'])}): ×{on / off:.2f}")
    print(f"files: {out}")


if __name__ == "__main__":
    main()
