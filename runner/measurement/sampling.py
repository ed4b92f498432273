"""How a workload's requests sample: greedy by default, or at a temperature with a seed per request. Pure.

Greedy (temperature 0) is the default wherever arms' outputs are compared token for token. A model that loops
under greedy decoding (the embedded tiny model does) makes speculative acceptance meaningless: a workload can
sample instead (`workload.<name>.temperature`, `top_p`; each request then gets its own seed, derived from the
trial's seed, session and turn, so that a repeat is reproducible and two sessions never share one), or stay
greedy with a penalty on repeated tokens (`presence_penalty`, `frequency_penalty`, `repetition_penalty`: vLLM's
own), which keeps outputs deterministic and comparable across arms.

Greedy requests get their own seed too: vLLM's synthetic acceptance (`rejection_sample_method: synthetic`) draws
each draft's accept/reject from the request's seed and the token's position (the model runner's per-request
random stream), so one seed shared by every request (vLLM's SamplingParams.seed was 0 for all of them) accepted
at the same positions in every request and every repeat. A seed per (trial seed + repeat, session, turn) gives each
request its own draws, the same ones when a repeat is run again. Greedy outputs do not depend on the seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from runner.measurement.prompts import derived_seed


PENALTIES = ("presence_penalty", "frequency_penalty", "repetition_penalty")


@dataclass(frozen=True, kw_only=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def is_default(self) -> bool:
        return self == GREEDY

    def params(self) -> dict[str, float]:
        """vLLM SamplingParams keywords."""
        return {"temperature": self.temperature, "top_p": self.top_p, "presence_penalty": self.presence_penalty,
                "frequency_penalty": self.frequency_penalty, "repetition_penalty": self.repetition_penalty}

    def request_seed(self, *, base: int, session: int, turn: int, phase: str) -> int:
        return derived_seed(base=base, session=session, turn=turn, salt=f"sample/{phase}")


GREEDY = Sampling()


class SampledEngine:
    """The engine as a workload sees it, with the workload's sampling applied to every request it sends."""

    def __init__(self, engine: Any, sampling: Sampling, *, base_seed: int):
        self._engine = engine
        self._sampling = sampling
        self._base_seed = base_seed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    async def stream(self, *, session: int = 0, turn: int = 0, phase: str = "measured", seed: Optional[int] = None,
                     **kwargs):
        if seed is None:  # a workload's own fixed seed (fixed_task) stays
            seed = self._sampling.request_seed(base=self._base_seed, session=session, turn=turn, phase=phase)
        return await self._engine.stream(session=session, turn=turn, phase=phase, seed=seed,
                                         sampling=self._sampling, **kwargs)

    async def generate_batch(self, *, phase: str = "measured", seed: Optional[int] = None, **kwargs):
        if seed is None:
            seed = self._sampling.request_seed(base=self._base_seed, session=-1, turn=0, phase=phase)
        return await self._engine.generate_batch(phase=phase, seed=seed, sampling=self._sampling, **kwargs)


def sampling_of(params: Any) -> Sampling:
    """A workload's params as its Sampling."""
    return Sampling(**{f: float(getattr(params, f)) for f in ("temperature", "top_p", *PENALTIES)
                       if getattr(params, f, None) is not None})


def sampled(engine: Any, params: Any, *, base_seed: int) -> Any:
    """`engine` wrapped so that each request samples as the params say (greedy by default), with its own seed."""
    return SampledEngine(engine, sampling_of(params), base_seed=base_seed)
