"""Where the engine stack's import goes: what an engine actor imports before its load, module by module.

    python bench/import_time.py [--top 25] [--module vllm.v1.engine.async_llm]
    python bench/import_time.py --cold 2 [--overlap 9]

Runs `python -X importtime -c "import MODULE"` in a fresh process (twice: the first fills the page cache and, where
the folders are writable, the bytecode) and prints the wall of each, then the top-level packages and the single
modules that took longest in the second (self time, and cumulative time for packages).

--cold N: the import from disk, as a fresh machine's first actor meets it. Each of N rounds drops the engine
stack's files from the page cache (posix_fadvise DONTNEED: what no process has mapped) and imports; then drops
them again, starts the runner's read-ahead (runner.scheduling.read_ahead, as a command starts it), waits
--overlap seconds (the launch it overlaps: config, validation, Ray) and imports. Prints each wall and the medians.
"""
from __future__ import annotations

import argparse
import collections
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def timed_import(module: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                          text=True)
    return time.perf_counter() - started, done.stderr


def parse(stderr: str) -> list[tuple[int, int, int, str]]:
    """(self µs, cumulative µs, depth, module) per imported module."""
    rows = []
    for line in stderr.splitlines():
        m = LINE.match(line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return rows


def cold_rounds(module: str, *, rounds: int, overlap_s: float) -> None:
    from runner.scheduling.read_ahead import STACK_PACKAGES, advise, imported_files
    from runner.scheduling.startup import begin_read_ahead, package_dirs

    folders = package_dirs(STACK_PACKAGES)
    walls: dict[str, list[float]] = {"from disk": [], "after the read-ahead": []}
    for r in range(rounds):
        files, size = advise(imported_files(folders), "dontneed")
        walls["from disk"].append(timed_import(module)[0])
        advise(imported_files(folders), "dontneed")
        started = time.perf_counter()
        reader = begin_read_ahead()
        if reader is not None:
            reader.wait()
        advised_s = time.perf_counter() - started
        time.sleep(max(0.0, overlap_s - advised_s))
        walls["after the read-ahead"].append(timed_import(module)[0])
        print(f"round {r}: {files} files, {size / 2**30:.2f} GiB dropped; import from disk "
              f"{walls['from disk'][-1]:.2f} s, after the read-ahead {walls['after the read-ahead'][-1]:.2f} s "
              f"(advice took {advised_s:.2f} s, then {max(0.0, overlap_s - advised_s):.1f} s of waiting)", flush=True)
    first, second = (statistics.median(w) for w in walls.values())
    print(f"import {module}, median of {rounds}: from disk {first:.2f} s, after the read-ahead {second:.2f} s "
          f"(ratio {second / first:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default="vllm.v1.engine.async_llm")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cold", type=int, default=0, help="rounds of the import from disk against after the read-ahead")
    ap.add_argument("--overlap", type=float, default=9.0, help="seconds the read-ahead runs before the import")
    args = ap.parse_args()
    if args.cold:
        cold_rounds(args.module, rounds=args.cold, overlap_s=args.overlap)
        return

    walls = []
    for _ in range(2):
        wall, stderr = timed_import(args.module)
        walls.append(wall)
    rows = parse(stderr)
    print(f"import {args.module}: {walls[0]:.2f} s first, {walls[1]:.2f} s second ({len(rows)} modules)")
    by_package: dict[str, int] = collections.Counter()
    for self_us, _, _, name in rows:
        by_package[name.split(".")[0]] += self_us
    print("\nby top-level package (self time summed, second run):")
    for name, us in by_package.most_common(args.top):
        print(f"  {us / 1e6:7.2f} s  {name}")
    print("\nslowest single modules (self time, second run):")
    for self_us, cum_us, _, name in sorted(rows, reverse=True)[:args.top]:
        print(f"  {self_us / 1e6:7.2f} s  (cumulative {cum_us / 1e6:6.2f} s)  {name}")


if __name__ == "__main__":
    main()
