"""Where the engine stack's import goes: what an engine actor imports before its load, module by module.

    python bench/import_time.py [--top 25] [--module vllm.v1.engine.async_llm]

Runs `python -X importtime -c "import MODULE"` in a fresh process (twice: the first fills the page cache and, where
the folders are writable, the bytecode) and prints the wall of each, then the top-level packages and the single
modules that took longest in the second (self time, and cumulative time for packages).
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import time

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default="vllm.v1.engine.async_llm")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

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
