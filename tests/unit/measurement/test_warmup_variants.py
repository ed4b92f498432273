"""A light warm-up's passes: a point's own prompts with few tokens out; a short pass with every workload's prompts
capped, few tokens out, the rest of its shape kept."""
from __future__ import annotations

import pytest

from runner.measurement.workloads import WORKLOADS
from runner.measurement.workloads.base import SHORT_OUTPUT_TOKENS, SHORT_PROMPT_TOKENS


@pytest.mark.parametrize("name", sorted(n for n in WORKLOADS if n != "trace"))
def test_short_variant_caps_prompts_and_output(name):
    params = WORKLOADS[name]().parse_params({})
    short = params.short_variant()
    for field in type(params).length_fields:
        assert getattr(short, field) <= SHORT_PROMPT_TOKENS
    if isinstance(getattr(params, "output_len", None), int):
        assert short.output_len == min(params.output_len, SHORT_OUTPUT_TOKENS)
    assert short.seed == params.seed and type(short) is type(params)


def test_long_prompts_are_what_the_short_pass_leaves_out():
    params = WORKLOADS["shared_prefix"]().parse_params({"prefix_len": 16384, "suffix_len": 256})
    short = params.short_variant()
    assert (short.prefix_len, short.suffix_len) == (SHORT_PROMPT_TOKENS, SHORT_PROMPT_TOKENS)
    assert WORKLOADS["long_context"]().parse_params({}).short_variant().context_len == SHORT_PROMPT_TOKENS


@pytest.mark.parametrize("name", sorted(n for n in WORKLOADS if n != "trace"))
def test_point_variant_keeps_prompts_and_caps_output(name):
    params = WORKLOADS[name]().parse_params({})
    point, warm = params.point_variant(), params.warmup_variant()
    for field in type(params).length_fields:
        assert getattr(point, field) == getattr(warm, field)
    if isinstance(getattr(params, "output_len", None), int):
        assert point.output_len == min(warm.output_len, SHORT_OUTPUT_TOKENS)
    assert type(point) is type(params)
