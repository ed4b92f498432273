"""The speculative arm: a method and its draft count k, from the config (runner.config.sections) through the plan
to the result rows (runner.schema) and the report. Pure: imports nothing from the runner."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def method_name(value) -> Any:
    """YAML reads a bare `off` as false (and an empty value as null): both mean `off`."""
    return "off" if value is False or value is None else value


# How many draft tokens a speculative method proposes when the sweep does not say (the one default; `off` has 0).
DEFAULT_DRAFT_COUNT = 1


@dataclass(frozen=True, kw_only=True)
class SpecMethod:
    name: str  # the value of sweep.grid.spec_method
    max_k: int  # the largest draft count the method accepts
    needs: tuple[str, ...] = ()  # speculative_config keys the method needs beyond method and k (a draft model)
    description: str = ""
    defaults: dict = field(default_factory=dict)  # speculative_config keys the runner sets unless spec.<method> does

    def accepts(self, k) -> bool:
        """A draft count the method takes: an integer in 1..max_k (one rule for a static arm's k and a draft-count
        schedule's largest k, which vLLM takes as num_speculative_tokens)."""
        return isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= self.max_k


SPEC_METHODS: dict[str, SpecMethod] = {
    m.name: m
    for m in [
        SpecMethod(name="off", max_k=0, description="no speculative decoding"),
        SpecMethod(name="mtp", max_k=8, description="the model's own multi-token-prediction layers"),
        SpecMethod(name="ngram", max_k=16, description="prompt lookup",
                   defaults={"prompt_lookup_min": 2, "prompt_lookup_max": 5}),
        SpecMethod(name="suffix", max_k=32, description="suffix decoding (needs arctic-inference)"),
        SpecMethod(name="eagle", max_k=8, needs=("model",), description="EAGLE draft head"),
        SpecMethod(name="eagle3", max_k=8, needs=("model",), description="EAGLE-3 draft head"),
        SpecMethod(name="draft_model", max_k=8, needs=("model",), description="a separate draft model"),
    ]
}


@dataclass(frozen=True, kw_only=True)
class SpecArm:
    """One speculative arm: a method and its draft count k. `off` always has k = 0 (normalised here, once)."""

    method: str = "off"  # "off" or a key of SPEC_METHODS
    k: int = 0  # draft tokens per step (0 for off)

    def __post_init__(self):
        method = str(method_name(self.method))
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "k", 0 if method == "off" else int(self.k))

    @classmethod
    def of(cls, method, k=None) -> "SpecArm":
        """From stored or configured values: a null/NaN/false method is off, a null k is the default count."""
        if isinstance(method, float) and method != method:
            method = None
        if k is None or isinstance(k, float) and k != k:
            k = DEFAULT_DRAFT_COUNT
        return cls(method=method_name(method), k=int(k))

    @classmethod
    def parse(cls, label: str) -> "SpecArm":
        """"off" → off; "mtp:2" → mtp with k=2; "mtp" → mtp with the default count."""
        method, _, k = str(label).partition(":")
        return cls.of(method, int(k) if k else None)

    @property
    def off(self) -> bool:
        return self.method == "off"

    @property
    def label(self) -> str:
        """"off", "mtp:2", "ngram:3"."""
        return "off" if self.off else f"{self.method}:{self.k}"

    def __str__(self) -> str:
        return self.label


def spec_arms(*, methods: list, ks: list[int]) -> list[SpecArm]:
    """Method × k, where `off` takes no k (so it appears once)."""
    arms: list[SpecArm] = []
    for method in methods:
        for k in ([0] if method_name(method) == "off" else ks):
            arm = SpecArm(method=method, k=k)
            if arm not in arms:
                arms.append(arm)
    return arms


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


@dataclass(frozen=True, kw_only=True)
class RowSpec:
    """A result row's speculative fields, read in one place: the arm the trial ran (its k, or its schedule's
    largest k, and the schedule) and the k its engine was loaded with, which is larger where the trial's draft
    count was set on the largest-k engine (runner.plan.draft_hosts). Engines' rows: engine_k is k."""

    method: str
    k: int  # what the trial drafted (0 for off)
    engine_k: int  # what its engine was loaded with
    schedule: Any = None  # [[start, end, k], ...] as JSON, or None (a static k)

    @classmethod
    def of(cls, row) -> "RowSpec":
        """From a trial or engine row (a dict, a pandas row, a record): nulls and NaN read as off / 0 / none."""
        get = row.get if hasattr(row, "get") else lambda name, default=None: getattr(row, name, default)
        method = get("spec_method")
        method = str(method_name(method if _present(method) else None))
        k = int(get("num_speculative_tokens") or 0) if _present(get("num_speculative_tokens")) else 0
        k = 0 if method == "off" else k
        engine_k = get("engine_num_speculative_tokens")
        schedule = get("spec_schedule")
        return cls(method=method, k=k, engine_k=int(engine_k) if _present(engine_k) else k,
                   schedule=schedule if isinstance(schedule, str) and schedule else None)

    @property
    def arm(self) -> SpecArm:
        return SpecArm(method=self.method, k=self.k)

    @property
    def set_live(self) -> bool:
        """The trial's k differs from its engine's (set between trials)."""
        return self.k != self.engine_k


def row_spec(row) -> RowSpec:
    return RowSpec.of(row)
