"""How a workload's requests sample: greedy by default, or at a temperature with a seed per request. Pure.

Greedy (temperature 0) is the default wherever arms' outputs are compared token for token. A model that loops
under greedy decoding (the embedded tiny model does) makes speculative acceptance meaningless, so a workload
can sample instead (`workload.<name>.temperature`, `top_p`); each request then gets its own seed, derived from
the trial's seed, session, turn and phase, so that a repeat is reproducible and two sessions never share one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.measurement.prompts import derived_seed


@dataclass(frozen=True, kw_only=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def request_seed(self, *, base: int, session: int, turn: int, phase: str) -> int:
        return derived_seed(base=base, session=session, turn=turn, salt=f"sample/{phase}")


class SampledEngine:
    """The engine as a workload sees it, with the workload's sampling applied to every request it sends."""

    def __init__(self, engine: Any, sampling: Sampling, *, base_seed: int):
        self._engine = engine
        self._sampling = sampling
        self._base_seed = base_seed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    async def stream(self, *, session: int = 0, turn: int = 0, phase: str = "measured", **kwargs):
        seed = self._sampling.request_seed(base=self._base_seed, session=session, turn=turn, phase=phase)
        return await self._engine.stream(session=session, turn=turn, phase=phase, seed=seed,
                                         temperature=self._sampling.temperature, top_p=self._sampling.top_p,
                                         **kwargs)

    async def generate_batch(self, *, phase: str = "measured", **kwargs):
        seed = self._sampling.request_seed(base=self._base_seed, session=-1, turn=0, phase=phase)
        return await self._engine.generate_batch(phase=phase, seed=seed, temperature=self._sampling.temperature,
                                                 top_p=self._sampling.top_p, **kwargs)


def sampled(engine: Any, params: Any, *, base_seed: int) -> Any:
    """`engine` as-is for greedy params; wrapped so that each request samples as the params say otherwise."""
    sampling = Sampling(temperature=float(getattr(params, "temperature", 0.0) or 0.0),
                        top_p=float(getattr(params, "top_p", 1.0) or 1.0))
    return engine if sampling.greedy else SampledEngine(engine, sampling, base_seed=base_seed)
