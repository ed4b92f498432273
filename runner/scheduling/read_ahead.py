"""The engine stack's files paged in ahead of the first actor's import: the driver starts this at the command's
start, niced, in a process of its own, so the reads overlap validation and Ray's start.

On a fresh machine the first process that imports torch and vLLM reads GiBs of shared libraries and thousands of
bytecode files from disk one after another, each read waiting on the last; asking the kernel for all of them at
once leaves the actor's import its Python work. Where the files are already cached the advice costs a walk of the
folders (bench/import_time.py --cold measures the import with and without it).

    python -m runner.scheduling.read_ahead willneed|dontneed FOLDER...
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Iterable, Iterator

# What an engine actor imports, first to last: torch's libraries and the CUDA wheels', vLLM's, then the
# largest of what they import.
STACK_PACKAGES = ("torch", "nvidia", "triton", "vllm", "transformers", "cv2", "numpy", "ray", "sympy", "tokenizers")
# What an import reads: extension modules and shared libraries (libcublas.so.12 too), and bytecode.
IMPORTED = re.compile(r"(\.pyc|\.so(\.\d+)*)$")
ADVICE = {"willneed": "POSIX_FADV_WILLNEED", "dontneed": "POSIX_FADV_DONTNEED"}


def imported_files(folders: Iterable[Path]) -> Iterator[Path]:
    """The files an import of these folders reads, folder by folder in the order given."""
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                if IMPORTED.search(name):
                    yield Path(root) / name


def advise(paths: Iterable[Path], advice: str) -> tuple[int, int]:
    """posix_fadvise over each whole file (willneed: read it in, in the background; dontneed: drop it from the
    page cache); returns (files, bytes) advised. Where the platform has no fadvise nothing happens."""
    flag = getattr(os, ADVICE[advice], None)
    if flag is None:
        return 0, 0
    files = size = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, flag)
            files, size = files + 1, size + os.fstat(fd).st_size
        except OSError:
            pass
        finally:
            os.close(fd)
    return files, size


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in ADVICE:
        print(__doc__, file=sys.stderr)
        return 2
    files, size = advise(imported_files(Path(a) for a in argv[1:]), argv[0])
    print(f"{argv[0]}: {files} files, {size / 2**30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
