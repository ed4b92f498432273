"""Schedules from the best k per batch size: ranges, merging, k = 0, ties; vLLM's validator and argument parser
take what the runner emits."""
from __future__ import annotations

import shlex

import pytest

from runner.numerics.draft_schedule import DraftSchedule, ScheduleError, build_schedule, check_with_vllm
from runner.spec_arm import SpecArm
from runner.vllm.serve import serve_command
from runner.vllm.spec_config import speculative_config


def test_ranges_start_at_1_and_reach_max_num_seqs():
    schedule = build_schedule({1: 3, 4: 2, 16: 1}, max_num_seqs=64)
    assert schedule.as_list() == [[1, 3, 3], [4, 15, 2], [16, 64, 1]]
    assert schedule.max_k == 3 and schedule.label == "1-3:3,4-15:2,16-64:1"
    assert [schedule.k_at(b) for b in (1, 3, 4, 15, 16, 64, 200)] == [3, 3, 2, 2, 1, 1, 1]


def test_the_smallest_batch_extends_down_to_1_and_equal_ks_merge():
    assert build_schedule({2: 2, 8: 2, 32: 1}, max_num_seqs=32).as_list() == [[1, 31, 2], [32, 32, 1]]


def test_k0_where_speculation_loses():
    schedule = build_schedule({1: 2, 8: 0}, max_num_seqs=16)
    assert schedule.as_list() == [[1, 7, 2], [8, 16, 0]]
    assert schedule.k_at(10) == 0
    assert schedule.max_k == 2  # vLLM's num_speculative_tokens for it
    assert build_schedule({1: 0, 4: 0}, max_num_seqs=8) is None  # speculation loses everywhere: spec off
    with pytest.raises(ScheduleError, match="spec off"):
        DraftSchedule.parse([[1, 8, 0]])


def test_ties_go_to_the_smaller_k():
    assert build_schedule({1: [3, 2], 4: {1, 2}}, max_num_seqs=4).as_list() == [[1, 3, 2], [4, 4, 1]]


def test_batch_sizes_above_max_num_seqs_never_run():
    assert build_schedule({1: 2, 8: 1, 64: 0}, max_num_seqs=32).as_list() == [[1, 7, 2], [8, 32, 1]]
    with pytest.raises(ScheduleError, match="no batch size"):
        build_schedule({64: 1}, max_num_seqs=32)


@pytest.mark.parametrize("bad, rule", [
    ([[2, 4, 1]], "start at 1"), ([[1, 4, 1], [3, 8, 2]], "overlap"), ([[1, 0, 1]], "positive"),
    ([[1, 4, -1]], ">= 0"), ([[1, 4]], "three integers"), ([], "non-empty"), ("[[1,2", "JSON"),
    ([[1, 3, 1.5]], "three integers"),
])
def test_parse_refuses_what_vllm_refuses(bad, rule):
    with pytest.raises(ScheduleError, match=rule):
        DraftSchedule.parse(bad)


def test_vllms_validator_accepts_the_built_schedules():
    for best, seqs in (({1: 3, 4: 2, 16: 1}, 64), ({1: 2, 8: 0}, 16), ({1: 1}, 1), ({3: 2, 5: 3}, 256)):
        schedule = build_schedule(best, max_num_seqs=seqs)
        assert [list(r) for r in check_with_vllm(schedule)] == schedule.as_list()


def test_vllm_refuses_what_parse_refuses():
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    for bad in ([[2, 4, 1]], [[1, 4, 1], [3, 8, 2]], [[1, 0, 1]], [[1, 4, -1]]):
        with pytest.raises(ValueError):
            validate_and_normalize_dynamic_sd_schedule(bad)


def test_round_trip_json_and_serve_command_through_vllms_parser():
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    schedule = build_schedule({1: 3, 2: 1}, max_num_seqs=8)
    assert DraftSchedule.parse(schedule.json()) == schedule
    config = speculative_config(SpecArm(method="mtp", k=schedule.max_k), extra={"prompt_lookup_max": 4},
                                schedule=schedule.ranges)
    line = serve_command({"model": "/models/my model", "speculative_config": config})
    words = shlex.split(line)
    assert words[:3] == ["vllm", "serve", "/models/my model"]
    try:  # `vllm serve`'s own parser (its module moved between versions), else the engine arguments' parser
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(words[2:])
    assert parsed.model_tag == "/models/my model"
    assert AsyncEngineArgs.from_cli_args(parsed).speculative_config == config
    assert serve_command({"model": "m"}) == "vllm serve m"
