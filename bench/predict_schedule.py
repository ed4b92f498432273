"""Predict, then validate, against the full grid: trials, command time and the k each gives per load.

    python bench/predict_schedule.py [--preset cpu] [--out DIR]          # runs both, alternating which goes first
    python bench/predict_schedule.py --compare GRID_RUN STUDY_RUN        # two run folders measured before
    python bench/predict_schedule.py --in-one RUN --max-num-seqs 256    # the study, then the grid's other trials

The full grid is the draft-schedule study with sweep.adaptive=null (every static k and spec off at every load;
the auto arm dropped); the study is sweep.adaptive=predict_schedule on the same engines (the same trial ids).
Per run folder: ok trials, and the commands' time from each `launch` to its last recorded phase (the time the
command held the machine, report excluded). Per load: each side's chosen k (the decision module over the static
arms it measured) and whether they agree where the grid can tell. Figures, not asserts.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The lab studies (h200_*) live outside the shipped sweep group: a search path reaches them.
STUDIES = Path(__file__).resolve().parent / "studies"

GRID_ARMS = ("[{spec_method:'off'},{spec_method:mtp,num_speculative_tokens:1},"
             "{spec_method:mtp,num_speculative_tokens:2},{spec_method:mtp,num_speculative_tokens:3}]")


def command_seconds(run_dir: Path) -> list[float]:
    """Per command (a `launch` span starts one): from its launch to the end of its last recorded phase."""
    from runner.sinks.parquet import read_frame

    phases = read_frame(run_dir, "phases").sort_values("started_at")
    spans, start, end = [], None, None
    for row in phases.itertuples():
        if row.phase == "launch" and row.started_at != start:  # stages of one command share its launch
            if start is not None:
                spans.append(end - start)
            start = row.started_at
        end = max(end or 0.0, row.started_at + row.duration_s)
    if start is not None:
        spans.append(end - start)
    return spans


def choices(rows: list[dict]) -> dict[tuple, object]:
    """(method, profile, concurrency) → (LoadChoice, family) over the static arms in these trial rows."""
    from runner.numerics.measured_best_k import measured_choices
    from runner.measurement.workloads import WORKLOADS

    metric = WORKLOADS[rows[0]["workload"]].deciding
    out = {}
    for family in measured_choices(rows, metric_column=metric.column, higher_is_better=metric.higher_is_better):
        for load in family.loads:
            out[(family.method, family.profile or "real", load.concurrency)] = (load, family)
    return out


def schedules(rows: list[dict], *, max_num_seqs: int) -> dict[tuple, str]:
    out = {}
    for (method, profile, _), (_, family) in choices(rows).items():
        schedule = family.schedule(max_num_seqs=max_num_seqs)
        out[(method, profile)] = schedule.json() if schedule else "none (spec off everywhere)"
    return out


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok"]


def compare(grid: list[dict], study: list[dict], *, grid_s: float, study_s: float, max_num_seqs: int) -> None:
    g_static = [r for r in grid if not r.get("spec_schedule")]
    print(f"full grid:          {len(g_static):4d} static trials, {grid_s:7.0f} s")
    print(f"predict, validate:  {len(study):4d} trials ({sum(not r.get('spec_schedule') for r in study)} static, "
          f"{sum(bool(r.get('spec_schedule')) for r in study)} on the schedule arm), {study_s:7.0f} s")
    print(f"ratio:              {len(study) / len(g_static):.2f}x trials, {study_s / grid_s:.2f}x time")
    g, s = choices(g_static), choices([r for r in study if not r.get("spec_schedule")])
    same = told = 0
    print("\nmethod  profile              c   grid k (tied)      study k (tied)     agree")
    for key in sorted(g, key=lambda k: (k[0], str(k[1]), k[2])):
        mine, theirs = g[key][0], (s.get(key) or (None, None))[0]
        tell = mine.choice is not None
        agree = "–" if not tell else ("yes" if theirs is not None and theirs.choice == mine.choice else "NO")
        told += tell
        same += agree == "yes"
        study_text = f"{theirs.choice} {list(theirs.tied)}" if theirs is not None else "not measured"
        print(f"{key[0]:6s}  {str(key[1])[:18]:18s}  {key[2]:4d}   {str(mine.choice):3s} {str(list(mine.tied)):14s} "
              f"{study_text:18s} {agree}")
    print(f"\nsame k at {same} of {told} loads where the grid can tell")
    for label, rows in (("grid", g_static), ("study", study)):
        for key, text in schedules([r for r in rows if not r.get("spec_schedule")], max_num_seqs=max_num_seqs).items():
            print(f"schedule from the {label} {key}: {text}")


def compare_folders(grid: Path, study: Path, *, max_num_seqs: int) -> None:
    from runner.sinks.parquet import read_rows

    compare(_ok(read_rows(grid, "trials")), _ok(read_rows(study, "trials")), grid_s=sum(command_seconds(grid)),
            study_s=sum(command_seconds(study)), max_num_seqs=max_num_seqs)


def compare_in_one(run_dir: Path, *, max_num_seqs: int) -> None:
    """A folder where the study ran first and a later command (sweep.adaptive=null) added the grid's other static
    trials: the study is the first command's trials; the grid is every static trial, its time the first command's
    static stages (until the schedule arm's engine started) plus the later commands'."""
    from runner.sinks.parquet import read_frame, read_rows

    rows = _ok(read_rows(run_dir, "trials"))
    spans = command_seconds(run_dir)
    phases = read_frame(run_dir, "phases").sort_values("started_at")
    second = sorted(set(phases[phases.phase == "launch"].started_at))[1]
    study = [r for r in rows if r["started_at"] < second]
    schedule_engines = {r["engine_id"] for r in rows if r.get("spec_schedule")}
    first_schedule = phases[phases.engine_id.isin(schedule_engines)].started_at.min()
    first_launch = phases[phases.phase == "launch"].started_at.min()
    grid_s = (first_schedule - first_launch) + sum(spans[1:])
    print(f"(the grid's time: the study's static stages {first_schedule - first_launch:.0f} s + the later "
          f"command(s) {sum(spans[1:]):.0f} s; the study's schedule stage {spans[0] - (first_schedule - first_launch):.0f} s)")
    compare(rows, study, grid_s=grid_s, study_s=spans[0], max_num_seqs=max_num_seqs)


def run(args, *, adaptive: bool, out: Path, name: str) -> float:
    words = [sys.executable, "-m", "runner", f"sweep={args.sweep}", "tracking=none", f"run={name}",
             f"output_root={out}"] + ([f"sweep.preset={args.preset}"] if args.preset else [])
    words += [f"hydra.searchpath=[file://{STUDIES}]"] if (STUDIES / "sweep" / f"{args.sweep}.yaml").is_file() else []
    words += [] if adaptive else ["sweep.adaptive=null", f"sweep.arms={GRID_ARMS}"]
    started = time.perf_counter()
    subprocess.run(words, check=True, cwd=Path(__file__).resolve().parents[1])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default="draft_schedule")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--out", type=Path, default=Path("/tmp/predict_schedule_bench"))
    parser.add_argument("--max-num-seqs", type=int, default=32)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("GRID_RUN", "STUDY_RUN"))
    parser.add_argument("--in-one", type=Path, metavar="RUN",
                        help="a folder where the study ran first and a grid command (sweep.adaptive=null) after it")
    parser.add_argument("--study-first", action="store_true", help="run the study before the grid")
    args = parser.parse_args()
    if args.compare:
        compare_folders(*args.compare, max_num_seqs=args.max_num_seqs)
        return
    if args.in_one:
        compare_in_one(args.in_one, max_num_seqs=args.max_num_seqs)
        return
    stamp = time.strftime("%H%M%S")
    order = [True, False] if args.study_first else [False, True]
    walls = {}
    for adaptive in order:
        name = f"{'study' if adaptive else 'grid'}-{stamp}"
        walls[adaptive] = run(args, adaptive=adaptive, out=args.out, name=name)
    folder = args.out / args.sweep
    print(f"\ncommand wall: grid {walls[False]:.0f} s, study {walls[True]:.0f} s "
          f"({walls[True] / walls[False]:.2f}x)\n")
    compare_folders(folder / f"grid-{stamp}", folder / f"study-{stamp}", max_num_seqs=args.max_num_seqs)


if __name__ == "__main__":
    main()
