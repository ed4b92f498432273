"""Planning with a large prompt file: a seeded synthetic ShareGPT file (90K conversations by default, ShareGPT-like
lengths: 1-8 human turns, lognormal words a message, the model's answers between them), then the dry run of a
prompt_set sweep over the whole file, in a fresh process (caches cold, as a first run is).

    python bench/prompt_file_planning.py [--conversations 90000] [--file /tmp/sharegpt_90k.json] [--runs 2]

Prints, per run, the wall seconds, the CPU seconds (user + system) and the peak resident memory of the command,
with the machine's load average before and after. The file is written once (kept where it is for later runs).
Figures, not asserts.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_sharegpt(path: Path, *, conversations: int, seed: int = 55) -> None:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "te", "ra", "su", "no", "vi", "pe", "da", "zo", "ri", "an", "el", "or", "us"]
    vocab = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(6000)]

    def text(median_words: float, sigma: float, cap: int) -> str:
        words = max(1, min(cap, int(rng.lognormvariate(math.log(median_words), sigma))))
        return " ".join(rng.choices(vocab, k=words)) + "."

    rows = []
    for i in range(conversations):
        turns = 1
        while turns < 8 and rng.random() < 0.45:
            turns += 1
        messages = []
        for _ in range(turns):
            messages += [{"from": "human", "value": text(35, 1.1, 2500)},
                         {"from": "gpt", "value": text(180, 0.8, 1500)}]
        rows.append({"id": f"s{i}", "conversations": messages})
    path.write_text(json.dumps(rows))


def plan_once(path: Path, *, output_root: str) -> dict:
    command = [sys.executable, "-m", "runner", "workload=[prompt_set]", f"workload.prompt_set.prompt_file={path}",
               "workload.prompt_set.prompt_format=sharegpt", "~workload.decode", "~workload.multi_turn",
               "sweep.grid.max_model_len=[16384]", "dry_run=true", f"output_root={output_root}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"the dry run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_rss_gib": after.ru_maxrss / 2 ** 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=90_000)
    parser.add_argument("--file", type=Path, default=Path("/tmp/sharegpt_90k.json"))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--output-root", default="/tmp/prompt_file_planning")
    args = parser.parse_args()
    if not args.file.exists():
        write_sharegpt(args.file, conversations=args.conversations)
    print(f"{args.file}: {args.file.stat().st_size / 2 ** 20:.0f} MiB")
    for run in range(args.runs):
        load = os.getloadavg()[0]
        figures = plan_once(args.file, output_root=args.output_root)
        print(f"run {run + 1}: wall {figures['wall_s']:.1f} s, CPU {figures['cpu_s']:.1f} s, peak RSS "
              f"{figures['peak_rss_gib']:.2f} GiB (load {load:.1f} → {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
