"""Mooncake-format traces: read and checked line by line, replayed on their clock, prompts sharing prefix blocks
where their hash ids do."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.measurement.traces import (TraceError, TraceRequest, parse_trace, read_trace, send_offsets,
                                       shared_prefix_blocks, trace_prompt)
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext

from tests.support.fake_engine import SlowEngine

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "load" / "mooncake_200.jsonl"


def line(ts, inp=10, out=2, ids=(1,)):
    return json.dumps({"timestamp": ts, "input_length": inp, "output_length": out, "hash_ids": list(ids)})


def test_the_fixture_is_a_valid_two_hundred_request_trace_with_sharing():
    requests = read_trace(str(FIXTURE))
    assert len(requests) == 200
    assert [r.timestamp_ms for r in requests] == sorted(r.timestamp_ms for r in requests)
    shared = shared_prefix_blocks(requests)
    assert sum(1 for s in shared if s >= 2) > 100 and shared.count(0) > 20


@pytest.mark.parametrize("text,message", [
    (line(0) + "\n" + line(500) + "\n" + line(400), "line 3: timestamp 400 is before line 2's 500"),
    (line(-5), "line 1: timestamp=-5 is negative"),
    (line(0) + "\n{not json", "line 2: not JSON"),
    (json.dumps({"timestamp": 0, "input_length": 4}), "line 1: no 'output_length' key"),
    (line(0, inp=0), "line 1: input_length=0 must be an integer ≥ 1"),
    (json.dumps({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": "ab"}), "hash_ids must be a list"),
    (json.dumps([1, 2]), "line 1: expected a JSON object"),
    ("\n\n", "no requests"),
])
def test_bad_traces_are_refused_naming_the_line(text, message):
    with pytest.raises(TraceError, match=message):
        parse_trace(text, name="t.jsonl")


def test_offsets_follow_the_trace_clock_scaled():
    requests = parse_trace("\n".join([line(1000), line(1500), line(3000)]), name="t")
    assert send_offsets(requests, time_scale=1.0) == [0.0, 0.5, 2.0]
    assert send_offsets(requests, time_scale=0.5) == [0.0, 0.25, 1.0]


def test_prompts_share_exactly_the_blocks_their_hash_ids_share():
    def block(key, length):
        return [hash((key, i)) % 1000 for i in range(length)]

    a = TraceRequest(line=1, timestamp_ms=0, input_length=10, output_length=1, hash_ids=(1, 2, 3))
    b = TraceRequest(line=2, timestamp_ms=0, input_length=12, output_length=1, hash_ids=(1, 2, 9))
    c = TraceRequest(line=3, timestamp_ms=0, input_length=9, output_length=1, hash_ids=(1,))
    pa, pb, pc = (trace_prompt(r, index=i, block_tokens=4, block=block) for i, r in enumerate((a, b, c)))
    assert (len(pa), len(pb), len(pc)) == (10, 12, 9)
    assert pa[:8] == pb[:8] and pa[8:10] != pb[8:10]
    assert pc[:4] == pa[:4] and pc[4:] != pa[4:9]  # padded past its one block with tokens of its own
    assert shared_prefix_blocks([a, b, c]) == [0, 2, 1]


def trace_params(tmp_path, text, **extra):
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    return workload_class("trace").parse_params({"trace_file": str(path), **extra})


def test_trace_params_are_checked_before_start(tmp_path):
    assert trace_params(tmp_path, line(0) + "\n" + line(10)).validate() == []
    errors = trace_params(tmp_path, line(10) + "\n" + line(0)).validate()
    assert any("t.jsonl line 2: timestamp 0 is before line 1's 10" in e for e in errors), errors
    assert any("time_scale=0 must be a number > 0" in e for e in trace_params(tmp_path, line(0), time_scale=0).validate())
    assert any("trace_file=null" in e for e in workload_class("trace").parse_params({}).validate())
    assert trace_params(tmp_path, line(0, inp=300, out=20)).max_sequence_tokens() == 320


def test_a_trace_replays_on_its_clock_with_its_lengths(tmp_path):
    params = trace_params(tmp_path, "\n".join([line(0, 8, 2, (1,)), line(30, 6, 3, (1, 2)), line(60, 5, 1, (7,))]),
                          block_tokens=4)
    engine = SlowEngine(service_s=0.05)
    results = asyncio.run(workload_class("trace")().run(TrialContext(engine=engine, concurrency=0, repeat=0,
                                                                     params=params)))
    assert [r.prompt_tokens for r in results] == [8, 6, 5]
    assert [r.timeline.output_tokens for r in results] == [2, 3, 1]
    starts = [r.timeline.sent_at - results[0].timeline.sent_at for r in results]
    assert starts == pytest.approx([0.0, 0.03, 0.06], abs=1e-9)
    assert engine.peak >= 2  # the second left before the first finished
    assert params.trial_concurrency(4) == 0 and params.arrival_columns() == {"arrival": "trace"}
    warm = params.warmup_variant()
    assert warm.time_scale == 0.0 and len(warm.requests()) == 3
