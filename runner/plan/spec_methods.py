"""Registry of speculative decoding methods the grid may name."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class SpecMethod:
    name: str
    max_k: int
    # Settings vLLM needs beyond the method and k (a draft model path, …).
    needs: tuple[str, ...] = ()
    description: str = ""
    defaults: dict = field(default_factory=dict)


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


def speculative_config(*, method: str, k: int, extra: dict | None = None) -> dict | None:
    """The `speculative_config` engine argument for one arm (None when off)."""
    if method == "off":
        return None
    cfg = dict(SPEC_METHODS[method].defaults)
    cfg.update(extra or {})
    cfg.update({"method": method, "num_speculative_tokens": int(k)})
    return cfg
