"""Acceptance profiles: the engine's own acceptance (real), or a synthetic one that vLLM forces. Pure.

vLLM's synthetic rejection (`rejection_sample_method: synthetic` with `synthetic_acceptance_rates`, in
`config/speculative.py`) runs the drafter for real and accepts by the given per-position *unconditional* rates:
entry i is P(the first i + 1 drafts are all accepted), in [0, 1], non-increasing, one per draft token. A profile
here is written for the largest k it serves; an engine drafting k takes its first k rates (for a chain drafter
those are the same positions). `measured:<run folder>` takes the per-position rates an earlier run measured
(resolved when the plan is built); `measured:<file>.json` (or the path alone) a speculation_profile.json's marginal
rates (runner.config.profile_file), such as a run writes in its speculation_profiles/ folder. vLLM's CPU build
refuses synthetic acceptance at start.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Optional

REAL = "real"
# The default: real acceptance, except on random weights on a GPU, whose own acceptance means nothing, where every
# speculative engine takes study B's level (DUMMY_WEIGHTS_RATES). vLLM's CPU build refuses synthetic acceptance.
AUTO = "auto"
DUMMY_WEIGHTS_RATES = (0.86, 0.74, 0.64)
MEASURED_PREFIX = "measured:"
# speculative_config keys the runner sets from a profile (never passed through spec.<method>).
SYNTHETIC_KEYS = ("rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length")


class ProfileKind(enum.StrEnum):
    REAL = "real"
    SYNTHETIC = "synthetic"
    MEASURED = "measured"  # synthetic rates still to be read from an earlier run


@dataclass(frozen=True, kw_only=True)
class AcceptanceProfile:
    kind: ProfileKind = ProfileKind.REAL
    rates: tuple[float, ...] = ()
    source: Optional[str] = None  # the run folder of a measured profile

    @classmethod
    def parse(cls, value: Any) -> "AcceptanceProfile":
        """null / "real" / false → real; a list of rates → synthetic; "measured:<run folder or .json>" or a .json
        path → measured.
        Raises ValueError naming the rule."""
        if value is None or value is False or (isinstance(value, str) and value.strip().lower() == REAL):
            return cls()
        if isinstance(value, str) and value.startswith(MEASURED_PREFIX):
            folder = value[len(MEASURED_PREFIX):].strip()
            if not folder:
                raise ValueError(f"{value!r} names no run folder (measured:<run folder>)")
            return cls(kind=ProfileKind.MEASURED, source=folder)
        if isinstance(value, str) and value.strip().endswith(".json"):  # a profile file (speculation_profile.json)
            return cls(kind=ProfileKind.MEASURED, source=value.strip())
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError(f"{value!r} is neither real, measured:<run folder> nor a list of rates") from None
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"{value!r} must be real, measured:<run folder> or a non-empty list of rates")
        rates = []
        for rate in value:
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
                raise ValueError(f"rate {rate!r} in {list(value)} must be a number in [0, 1]")
            rates.append(float(rate))
        if any(b > a for a, b in zip(rates, rates[1:])):
            raise ValueError(f"rates {rates} must not increase: entry i is P(the first i + 1 drafts all accepted), "
                             f"an unconditional rate")
        return cls(kind=ProfileKind.SYNTHETIC, rates=tuple(rates))

    @property
    def synthetic(self) -> bool:
        return self.kind is not ProfileKind.REAL

    def text(self) -> Optional[str]:
        """The `spec_acceptance_profile` column: the rates as JSON (None: real acceptance)."""
        if self.kind is ProfileKind.REAL:
            return None
        if self.kind is ProfileKind.MEASURED:
            raise ValueError(f"measured:{self.source} is not resolved to rates yet")
        return json.dumps([round(r, 6) for r in self.rates], separators=(",", ":"))

    def speculative_keys(self, k: int) -> dict:
        """The speculative_config keys for an engine drafting (at most) k tokens: its first k rates."""
        if self.kind is ProfileKind.REAL:
            return {}
        if len(self.rates) < k:
            raise ValueError(f"profile {list(self.rates)} has {len(self.rates)} rates, fewer than k = {k}")
        return {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": list(self.rates[:k])}


def resolve_auto(value: Any, *, dummy_weights: bool, cuda: bool) -> Any:
    """`auto` as the profile it stands for here (see AUTO); any other value as given."""
    if not (isinstance(value, str) and value.strip().lower() == AUTO):
        return value
    return list(DUMMY_WEIGHTS_RATES) if dummy_weights and cuda else REAL


def profile_of_text(text: Optional[str]) -> AcceptanceProfile:
    """A persisted `spec_acceptance_profile` value back as a profile."""
    return AcceptanceProfile.parse(text if isinstance(text, str) and text else None)
