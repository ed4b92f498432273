"""An acceptance profile file read back (speculation_profile.json, schema 1.x: the format
runner.sinks.speculation_profiles writes, or another producer's): the marginal rates a `measured:<file>.json`
acceptance profile forces, and the model it was measured on. An engine drafting k takes the first k rates."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from runner.sinks.speculation_profiles import SCHEMA_VERSION

SCHEMA_MAJOR = SCHEMA_VERSION.split(".")[0] + "."


@dataclass(frozen=True, kw_only=True)
class ProfileFile:
    """A profile file as the plan reads it."""

    path: str
    method: Optional[str]
    k: int
    rates: tuple[float, ...]  # marginal, non-increasing
    model: Optional[str]  # target_model's name (or its checkpoint id, or the string a producer wrote)
    conditions: dict


def is_profile_file(source: str) -> bool:
    return str(source).endswith(".json") or Path(source).is_file()


def read_profile(path: str) -> ProfileFile:
    """A speculation_profile.json (this project's or another producer's). ValueError says what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON ({exc})") from None
    if not isinstance(data, dict) or not str(data.get("schema_version", "")).startswith(SCHEMA_MAJOR):
        raise ValueError(f"{path} is not a speculation_profile.json of schema 1.x (its schema_version: "
                         f"{data.get('schema_version') if isinstance(data, dict) else None!r})")
    if data.get("measured") is False:
        raise ValueError(f"{path} is a placeholder (measured: false): it holds no measured acceptance")
    rates = data.get("marginal_accept_rates")
    if not isinstance(rates, list) or not rates or not all(
            isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r <= 1 for r in rates):
        raise ValueError(f"{path}: marginal_accept_rates must be a non-empty list of numbers in [0, 1]")
    monotone: list[float] = []
    for r in rates:
        monotone.append(min([float(r), *monotone[-1:]]))
    target = data.get("target_model")
    model = (target.get("name") or target.get("checkpoint") or target.get("path")) if isinstance(target, dict) \
        else target
    return ProfileFile(path=str(path), method=data.get("method"), k=int(data.get("num_speculative_tokens") or len(rates)),
                       rates=tuple(monotone), model=str(model) if model else None,
                       conditions=data.get("measurement_conditions") or {})
