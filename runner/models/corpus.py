"""The embedded model's text: the standard library's sources, a deterministic held-out slice, the tokenizer.

Shared by building the model (`runner.models.tiny`) and training it (`runner.models.training`).
"""
from __future__ import annotations

import sysconfig
import zlib
from pathlib import Path

HELDOUT_MODULUS = 10  # one stdlib file in ten (by a hash of its name) is never trained on


def stdlib_files() -> list[Path]:
    return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))


def is_heldout(path: Path) -> bool:
    return zlib.crc32(Path(path).name.encode()) % HELDOUT_MODULUS == 0


def heldout_files() -> list[Path]:
    return [p for p in stdlib_files() if is_heldout(p)]


def corpus_files(*, max_bytes: int) -> list[Path]:
    """Deterministic slice of the standard library's sources, held-out files excluded: the local text."""
    files, total = [], 0
    for path in (p for p in stdlib_files() if not is_heldout(p)):
        size = path.stat().st_size
        if total + size > max_bytes:
            break
        files.append(path)
        total += size
    return files


def load_tokenizer(model_dir: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
