"""Mooncake-format traces: read and checked line by line, replayed on their clock, prompts sharing prefix blocks
where their hash ids do."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.traffic.traces import (TraceError, TraceRequest, parse_trace, read_trace, send_offsets,
                                       shared_prefix_blocks, trace_prompt)
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext

from tests.support.fake_engine import SlowEngine

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "load" / "mooncake_200.jsonl"


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


PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public"


def test_azure_llm_inference_csv_reads_natively():
    from runner.traffic.traces import read_trace_file

    read = read_trace_file(str(PUBLIC / "azure_llm_conv_2023_199.csv"), "azure")
    assert len(read.requests) == 199 and read.failed == 0
    first, second = read.requests[:2]
    assert (first.timestamp_ms, first.input_length, first.output_length, first.line) == (0.0, 374, 44, 2)
    assert second.timestamp_ms == pytest.approx(4314.579, abs=0.01)  # 18:15:50.9951690 − 18:15:46.6805900
    assert first.hash_ids == () and first.category is None


def test_burstgpt_csv_reads_natively_with_failures_counted_and_the_model_as_category():
    from runner.traffic.traces import parse_trace_file, read_trace_file

    read = read_trace_file(str(PUBLIC / "burstgpt_head.csv"), "burstgpt")
    assert [(r.timestamp_ms, r.input_length, r.output_length, r.category) for r in read.requests] == [
        (5000.0, 472, 18, "ChatGPT"), (45000.0, 1087, 230, "ChatGPT"), (118000.0, 417, 276, "GPT-4")]
    text = ("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "0,a,1,GPT-4,100,10,110,Conversation log\n3.5,a,1,ChatGPT,400,0,400,API log\n")
    read = parse_trace_file(text, name="b", fmt="burstgpt")
    assert len(read.requests) == 1 and read.failed == 1


@pytest.mark.parametrize("text,fmt,message", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n", "mooncake",
     "t line 1: not JSON (Expecting value); a Mooncake trace is one JSON object a line (it looks like azure: "
     "trace_format=azure)"),
    ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n",
     "azure", "t line 1: no 'TIMESTAMP' column: not a azure trace (its columns: Timestamp, Model, Request tokens, "
              "Response tokens, Total tokens, Log Type; azure needs TIMESTAMP, ContextTokens, GeneratedTokens) (it "
              "looks like burstgpt: trace_format=burstgpt)"),
    (line(0), "burstgpt", "(it looks like mooncake: trace_format=mooncake)"),
    ('[{"conversations": [{"from": "human", "value": "hi"}]}]', "mooncake", "workload=[prompt_set]"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,1\n", "azure", "t line 2: TIMESTAMP='yesterday'"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,0,1\n", "azure",
     "t line 2: ContextTokens='0' must be an integer ≥ 1"),
    ("Timestamp,Request tokens,Response tokens\n5,1,1\n4,1,1\n", "burstgpt", "t line 3: timestamp 4000 is before"),
    ("Timestamp,Request tokens,Response tokens\n5,1,0\n", "burstgpt", "t: no requests (1 recorded as failed)"),
])
def test_a_trace_in_another_format_names_the_one_it_is(text, fmt, message):
    from runner.traffic.traces import parse_trace_file

    with pytest.raises(TraceError) as info:
        parse_trace_file(text, name="t", fmt=fmt)
    assert message in str(info.value)


def reqs(*spec):
    return [TraceRequest(line=i + 1, timestamp_ms=t, input_length=inp, output_length=out, hash_ids=())
            for i, (t, inp, out) in enumerate(spec)]


def test_a_selection_takes_a_window_then_a_range_then_a_seeded_sample():
    from runner.traffic.traces import Selection

    trace = reqs(*[(1000.0 * i, 10, 2) for i in range(10)])  # one a second
    window = Selection(start_s=2, end_s=7).apply(trace)
    assert [r.line for r in window] == [3, 4, 5, 6, 7] and window[0].timestamp_ms == 2000.0  # clock kept
    assert [r.line for r in Selection(start_s=2, end_s=7, skip=1, count=2).apply(trace)] == [4, 5]
    half = Selection(sample_fraction=0.5, seed=1).apply(trace)
    assert len(half) == 5 and half == Selection(sample_fraction=0.5, seed=1).apply(trace)
    assert [r.timestamp_ms for r in half] == sorted(r.timestamp_ms for r in half)
    assert half != Selection(sample_fraction=0.5, seed=2).apply(trace)
    assert len(Selection(sample_requests=3).apply(trace)) == 3 and Selection(sample_requests=30).apply(trace) == trace


def test_over_length_requests_are_refused_skipped_or_clipped_and_counted():
    from runner.traffic.traces import fit

    trace = reqs((0, 10, 2), (1, 100, 20), (2, 5, 60), (3, 30, 2))
    refused = fit(trace, max_model_len=50, policy="refuse")
    assert [r.line for r in refused.over] == [2, 3] and (refused.skipped, refused.clipped) == (0, 0)
    skipped = fit(trace, max_model_len=50, policy="skip")
    assert [r.line for r in skipped.requests] == [1, 4] and (skipped.skipped, skipped.clipped) == (2, 0)
    clipped = fit(trace, max_model_len=50, policy="clip")
    # Line 2's prompt keeps 50 − 20 tokens; line 3's output alone does not fit: skipped.
    assert [(r.line, r.input_length) for r in clipped.requests] == [(1, 10), (2, 30), (4, 30)]
    assert (clipped.skipped, clipped.clipped) == (1, 1)


def test_the_mooncake_trace_past_its_first_over_long_request():
    trace = PUBLIC / "mooncake_conversation_200.jsonl"
    p = workload_class("trace").parse_params({"trace_file": str(trace), "max_requests": 14})
    assert p.max_sequence_tokens() == 87571 and p.sequence_tokens_at(32768) == 87571
    assert p.over_length_error(32768) == (
        "1 of the 14 requests replayed exceed max_model_len=32768 (the first at line 12: 87169 in + 402 out = 87571 "
        "tokens; the longest needs 87571) (fix: workload.trace.over_length=skip or =clip to replay the rest, "
        "workload.trace.max_requests=11, or sweep.grid.max_model_len=[87571])")
    skip = workload_class("trace").parse_params({"trace_file": str(trace), "over_length": "skip"})
    assert skip.sequence_tokens_at(32768) <= 32768 and len(skip.requests(32768)) == 184
    assert skip.source_columns(max_model_len=32768) == {"over_length_skipped": 16, "over_length_clipped": 0,
                                                        "source_skipped": 0}
    clip = workload_class("trace").parse_params({"trace_file": str(trace), "over_length": "clip"})
    assert len(clip.requests(32768)) == 200 and clip.source_columns(max_model_len=32768)["over_length_clipped"] == 16
    nothing = workload_class("trace").parse_params({"trace_file": str(trace), "over_length": "skip",
                                                     "skip_requests": 11, "max_requests": 1})
    assert nothing.sequence_tokens_at(32768) > 32768 and "every one of the 1 requests" in nothing.over_length_error(
        32768)


def test_trace_selection_params_are_checked(tmp_path):
    text = "\n".join(line(1000 * i) for i in range(5))
    assert trace_params(tmp_path, text, start_s=1, end_s=3.5, sample_fraction=0.5).validate() == []
    assert len(trace_params(tmp_path, text, start_s=1, end_s=3.5).requests()) == 3
    for extra, message in [({"end_s": 1, "start_s": 2}, "end_s=1 must be after start_s=2"),
                           ({"start_s": -1}, "start_s=-1 must be a number of seconds ≥ 0"),
                           ({"sample_fraction": 0}, "sample_fraction=0 must be in (0, 1]"),
                           ({"sample_fraction": 0.5, "sample_requests": 2}, "set one"),
                           ({"over_length": "drop"}, "over_length='drop' is unknown; valid: refuse, "
                                                            "skip, clip"),
                           ({"trace_format": "csv"}, "trace_format='csv' is unknown; valid: mooncake, azure, burstgpt"),
                           ({"start_s": 100}, "the selection leaves no request (the trace has 5 requests over 4 s")]:
        errors = trace_params(tmp_path, text, **extra).validate()
        assert any(message in e for e in errors), (extra, errors)


def test_a_skipping_replay_sends_what_fits_on_its_clock(tmp_path):
    params = trace_params(tmp_path, "\n".join([line(0, 8, 2), line(30, 5000, 3), line(60, 5, 1)]),
                          over_length="skip")
    engine = SlowEngine(service_s=0.01)
    results = asyncio.run(workload_class("trace")().run(TrialContext(engine=engine, concurrency=0, repeat=0,
                                                                     params=params)))
    assert [r.prompt_tokens for r in results] == [8, 5]
    starts = [r.timeline.sent_at - results[0].timeline.sent_at for r in results]
    assert starts == pytest.approx([0.0, 0.06], abs=1e-9)


def test_the_report_names_what_was_skipped_or_clipped():
    import pandas as pd

    from runner.report.answer_caveats import data_file_caveats

    trials = pd.DataFrame({"max_model_len": [32768, 32768, 8192], "over_length_skipped": [16, 16, 40],
                           "over_length_clipped": [0, 0, 0], "source_skipped": [None, None, None]})
    assert data_file_caveats(trials) == ["requests over their length limit skipped: 40 per trial at "
                                         "max_model_len=8192, 16 per trial at max_model_len=32768"]
    assert data_file_caveats(pd.DataFrame({"max_model_len": [1024]})) == []


def test_a_trace_read_on_the_driver_travels_with_its_params(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text(FIXTURE.read_text())
    params = workload_class("trace").params_type(trace_file=str(path), max_requests=20)
    shipped = params.with_prompts(tokenizer=None)
    path.unlink()  # the actors' node has no such file
    assert [r.line for r in shipped.selected()] == list(range(1, 21))
    assert shipped.source_columns(max_model_len=1 << 20)["source_skipped"] == 0
