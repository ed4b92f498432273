"""Seeded, reproducible prompts as token ids."""
from __future__ import annotations

import random
import zlib


def random_token_ids(*, length: int, seed: int, low: int, high: int) -> list[int]:
    """`length` token ids drawn uniformly from [low, high) by a seeded generator."""
    rng = random.Random(seed)
    return [rng.randrange(low, high) for _ in range(length)]


def derived_seed(*, base: int, session: int = 0, turn: int = 0, salt: str = "") -> int:
    """A seed per (base, session, turn, salt), the same in every process."""
    return zlib.crc32(f"{base}/{session}/{turn}/{salt}".encode())
