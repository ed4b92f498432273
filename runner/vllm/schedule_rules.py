"""vLLM's own validator of a draft-count schedule (`num_speculative_tokens_per_batch_size`), the same in 0.26 and
0.32; runner.numerics.draft_schedule keeps the runner's statement of its rules."""
from __future__ import annotations

from runner.vllm.versions import Check


def validate_schedule(ranges: list[list[int]]) -> list[tuple[int, int, int]]:
    """vLLM's normalised ranges; raises its ValueError where it refuses them."""
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    return validate_and_normalize_dynamic_sd_schedule(ranges)


def check() -> Check:
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    validate_and_normalize_dynamic_sd_schedule([[1, 4, 2]])
    return Check(active=True)
