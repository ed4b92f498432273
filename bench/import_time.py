"""Where the engine stack's import goes: what an engine actor imports before its load, module by module.

    python bench/import_time.py [--top 25] [--module vllm.v1.engine.async_llm]
    python bench/import_time.py --cold 2

Runs `python -X importtime -c "import MODULE"` in a fresh process (twice: the first fills the page cache and, where
the folders are writable, the bytecode) and prints the wall of each, then the top-level packages and the single
modules that took longest in the second (self time, and cumulative time for packages).

--cold N: is the import waiting on the disk? Each of N rounds drops the engine stack's files from the page cache
(posix_fadvise DONTNEED: what no process has mapped), imports (from disk, as a fresh machine's first actor does),
then imports again (from the page cache). Prints each wall and the medians.
"""
from __future__ import annotations

import argparse
import collections
import os
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


# What an engine actor imports: torch's libraries and the CUDA wheels', vLLM's, the largest of what they import.
STACK_PACKAGES = ("torch", "nvidia", "triton", "vllm", "transformers", "cv2", "numpy", "ray", "sympy", "tokenizers")
IMPORTED = re.compile(r"(\.pyc|\.so(\.\d+)*)$")  # extension modules, shared libraries (libcublas.so.12), bytecode


def drop_from_page_cache(folders) -> tuple[int, int]:
    """posix_fadvise(DONTNEED) over every file an import reads (what no process has mapped leaves the page
    cache); returns (files, bytes)."""
    files = size = 0
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in filter(IMPORTED.search, names):
                try:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    files, size = files + 1, size + os.fstat(fd).st_size
                finally:
                    os.close(fd)
    return files, size


def cold_rounds(module: str, *, rounds: int) -> None:
    from runner.scheduling.startup import package_dirs

    folders = package_dirs(STACK_PACKAGES)
    walls: dict[str, list[float]] = {"from disk": [], "from the page cache": []}
    for r in range(rounds):
        files, size = drop_from_page_cache(folders)
        walls["from disk"].append(timed_import(module)[0])
        walls["from the page cache"].append(timed_import(module)[0])
        print(f"round {r}: {files} files, {size / 2**30:.2f} GiB dropped; import from disk "
              f"{walls['from disk'][-1]:.2f} s, then from the page cache {walls['from the page cache'][-1]:.2f} s",
              flush=True)
    cold, warm = (statistics.median(w) for w in walls.values())
    print(f"import {module}, median of {rounds}: from disk {cold:.2f} s, from the page cache {warm:.2f} s "
          f"(reading the files: {cold - warm:.2f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default="vllm.v1.engine.async_llm")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cold", type=int, default=0, help="rounds of the import from disk against the page cache")
    args = ap.parse_args()
    if args.cold:
        cold_rounds(args.module, rounds=args.cold)
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
