"""A fixed timed task: one prompt, fixed output length, `warmup` runs then `runs` measured runs.

Temperature 0 and a fixed `seed`; the prompt depends only on the params (not on
the engine or the repeat), so every arm answers the same prompt and the output
hashes tell whether two arms generated the same tokens. Runs are sequential
(one request at a time); the generated token ids are kept per request.
"""
from __future__ import annotations

from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.workloads.base import DECODE_SPEED_PER_RUN, RequestResult, TrialContext, Workload, WorkloadParams


@dataclass(kw_only=True)
class FixedTaskParams(WorkloadParams):
    length_fields = ("input_len",)
    input_len: int = 512
    output_len: int = 256
    warmup: int = 1
    runs: int = 3
    seed: int = 6000
    zero_allowed = ("seed", "warmup")

    def max_sequence_tokens(self) -> int:
        return self.input_len + self.output_len

    def tokens_decoded_in_turn(self) -> int:
        return (self.warmup + self.runs) * self.output_len

    def measured_phases(self) -> tuple[str, ...]:
        return ("measured",)


class FixedTask(Workload):
    name = "fixed_task"
    params_type = FixedTaskParams
    description = "one fixed prompt: warmup runs, then `runs` measured runs at temperature 0 with a fixed seed"
    deciding = DECODE_SPEED_PER_RUN

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: FixedTaskParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        prompt = prompt_maker(p, engine).tokens(length=p.input_len, seed=derived_seed(base=p.seed, salt="fixed"))
        results = []
        plan = ["warmup"] * p.warmup + ["measured"] * p.runs
        for turn, phase in enumerate(plan):
            if turn == p.warmup:
                await ctx.window.begin()
            results.append(await engine.stream(prompt_token_ids=prompt, max_tokens=p.output_len, turn=turn,
                                               phase=phase, seed=p.seed))
        await ctx.window.end()
        return results
