"""The one over_length setting (refuse | skip | clip) for prompt sets and traces, its older trace name read from
saved configs; a prompt file rendered once per process by its content; binary and non-UTF-8 data files refused
with their path and the fix."""
from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from runner.config.resume import config_changes
from runner.config.workload_keys import id_point, with_current_names
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext
from runner.traffic.chat import ChatRenderer
from runner.traffic.traces import TraceError, read_trace_file

from tests.support.fake_engine import SlowEngine, char_renderer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "load"
QUESTIONS = str(FIXTURES / "questions_3cat.jsonl")


def prompt_set(**raw):
    return workload_class("prompt_set").parse_params(raw)


# ---- one name, older configs read ------------------------------------------------------------------------------
def test_the_older_trace_key_reads_as_over_length():
    assert with_current_names("trace", {"over_max_model_len": "skip", "time_scale": 2}) == {
        "over_length": "skip", "time_scale": 2}
    # conf/workload/trace.yaml declares over_length: refuse; `+workload.trace.over_max_model_len=clip` means clip
    assert with_current_names("trace", {"over_length": "refuse", "over_max_model_len": "clip"}) == {
        "over_length": "clip"}
    assert with_current_names("trace", {"over_length": "skip", "over_max_model_len": "clip"}) == {
        "over_length": "skip"}
    assert with_current_names("prompt_set", {"over_length": "clip"}) == {"over_length": "clip"}
    assert workload_class("trace").parse_params(with_current_names("trace", {"over_max_model_len": "clip"})
                                                ).over_length == "clip"


def test_trial_ids_hash_the_older_spelling_so_earlier_runs_resume():
    assert id_point("trace", {"over_length": "skip", "trace_file": "t"}) == {"over_max_model_len": "skip",
                                                                             "trace_file": "t"}
    assert id_point("prompt_set", {"over_length": "skip"}) == {"over_length": "skip"}
    from runner.config.sections import run_config
    from runner.plan.grid import build_plan, stable_hash

    trace = str(Path(__file__).resolve().parents[2] / "fixtures" / "public" / "mooncake_conversation_200.jsonl")
    new = run_config(sweep_name="s", model="m", grid={"max_model_len": [32768]},
                     workloads={"trace": {"trace_file": trace, "over_length": "skip"}})
    old = run_config(sweep_name="s", model="m", grid={"max_model_len": [32768]},
                     workloads={"trace": {"trace_file": trace, "over_max_model_len": "skip"}})
    [a], [b] = build_plan(new).trials, build_plan(old).trials
    assert a.trial_id == b.trial_id and a.params.over_length == "skip" and a.point == {"trace_file": trace,
                                                                                       "over_length": "skip"}
    key = {"engine": a.engine_id, "workload": "trace", "params": {"trace_file": trace, "over_max_model_len": "skip"},
           "concurrency": a.concurrency, "repeat": 0, "api": "async"}
    assert a.trial_id == "t-" + stable_hash(key)  # the id a run made before the rename gave this trial


def test_a_saved_config_with_the_older_name_resumes_unchanged():
    def config(trace: dict) -> dict:
        return {"run": "r", "sweep": {"name": "s"}, "workload": {"trace": {"trace_file": "t.jsonl", **trace}}}

    assert config_changes(config({"over_max_model_len": "skip"}), config({"over_length": "skip"})) == []
    assert config_changes(config({"over_max_model_len": "refuse"}), config({"over_length": "refuse"})) == []
    [change] = config_changes(config({"over_max_model_len": "skip"}), config({"over_length": "clip"}))
    assert (change.key, change.old, change.new) == ("workload.trace.over_length", "skip", "clip")


# ---- skip for prompt sets ----------------------------------------------------------------------------------------
def test_a_prompt_set_skips_the_turns_over_its_limit_and_counts_them():
    engine = SlowEngine(service_s=0.0)
    p = prompt_set(prompt_file=QUESTIONS, prompt_format="mt_bench", output_len=2, max_prompt_tokens=100,
                   over_length="skip")
    assert p.validate() == []
    p = p.with_payload(p.prepare(char_renderer("auto")))
    results = asyncio.run(workload_class("prompt_set")().run(TrialContext(engine=engine, concurrency=2, repeat=0,
                                                                          params=p)))
    assert results and max(r.prompt_tokens for r in results) <= 100
    assert not any(r.prompt_clipped_tokens for r in results)
    every_turn = sum(len(s.rendered.segments) for s in p.prepared())
    longest = max(max(s.rendered.prompt_lengths(output_len=2)) for s in p.prepared())
    assert longest > 100 and p.max_sequence_tokens() == 100 + 2
    assert dataclasses.replace(p, max_prompt_tokens=None, max_turns=1).max_sequence_tokens() == max(
        s.rendered.prompt_lengths(output_len=2)[0] for s in p.prepared()) + 2
    skipped = p.source_columns(max_model_len=1024)["over_length_skipped"]
    assert skipped > 0 and len(results) == every_turn - skipped
    for r in results:  # a session stops at its first turn over the limit: what was sent is a head of its turns
        assert r.turn == 0 or any(q.session == r.session and q.turn == r.turn - 1 for q in results)
    clip = dataclasses.replace(p, over_length="clip").source_columns(max_model_len=1024)
    assert clip["over_length_clipped"] == skipped and clip["over_length_skipped"] == 0


def test_a_prompt_set_that_skips_everything_is_refused_before_start():
    p = prompt_set(prompt_file=QUESTIONS, prompt_format="mt_bench", output_len=2, over_length="skip")
    renderer = char_renderer("auto")
    [error] = p.prompt_problems(tokenizer=renderer.tokenizer, max_model_lens=[4])
    assert "over_length=skip leaves nothing to send" in error and "sweep.grid.max_model_len=[" in error
    assert p.prompt_problems(tokenizer=renderer.tokenizer, max_model_lens=[4096]) == []
    [refused] = dataclasses.replace(p, over_length="refuse").prompt_problems(tokenizer=renderer.tokenizer,
                                                                             max_model_lens=[40])
    assert "over_length=skip to leave those turns out" in refused


# ---- rendered once, by content ------------------------------------------------------------------------------------
class CountingTokenizer:
    chat_template = None
    name_or_path = "counting"

    def __init__(self):
        self.calls = 0

    def encode(self, text, add_special_tokens=False):
        self.calls += 1
        return [ord(c) % 1000 for c in text]


def test_a_prompt_file_is_rendered_once_per_process_by_its_content(tmp_path):
    copy = tmp_path / "same.jsonl"
    copy.write_bytes(Path(QUESTIONS).read_bytes())
    tokenizer = CountingTokenizer()
    p = prompt_set(prompt_file=QUESTIONS, prompt_format="mt_bench", num_sessions=5, seed=11)
    first = p.with_prompts(tokenizer)
    rendered = tokenizer.calls
    assert rendered > 0
    p.prompt_problems(tokenizer=tokenizer, max_model_lens=[1024, 4096])  # the checks
    again = p.with_prompts(tokenizer)  # a later stage's plan
    elsewhere = dataclasses.replace(p, prompt_file=str(copy)).with_prompts(tokenizer)  # same bytes, another path
    assert tokenizer.calls == rendered
    assert again.payload() is first.payload() and elsewhere.payload() is first.payload()
    dataclasses.replace(p, seed=12).with_prompts(tokenizer)  # another sample renders
    assert tokenizer.calls > rendered
    copy.write_text(Path(QUESTIONS).read_text().replace("?", "??"))  # other content renders
    calls = tokenizer.calls
    dataclasses.replace(p, prompt_file=str(copy)).with_prompts(tokenizer)
    assert tokenizer.calls > calls


def test_the_prepared_sessions_are_what_the_renderer_gives():
    p = prompt_set(prompt_file=QUESTIONS, prompt_format="mt_bench", num_sessions=3)
    renderer = ChatRenderer(CountingTokenizer(), "auto")
    prepared = p.prepare(renderer)
    assert [s.rendered for s in prepared.sessions] == [renderer.session(c.turns, system=c.system)
                                                       for c in p.conversations()]
    assert [s.where for s in prepared.sessions] == [c.where for c in p.conversations()]


# ---- binary and non-UTF-8 files ------------------------------------------------------------------------------------
@pytest.mark.parametrize("data, what", [
    (b"PAR1\x15\x04\x00\x00" + bytes(range(256)), "a binary file (Parquet), not text"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "a binary file (gzip), not text"),
    ('{"prompt": "caf\u00e9"}\n'.encode("latin-1"), "line 1: not UTF-8 text (byte 0xe9 at offset 15)"),
    ('{"prompt": "hi"}\n'.encode("utf-16"), "not UTF-8 text"),
])
def test_a_binary_or_non_utf8_prompt_file_is_refused_with_its_path_and_the_fix(tmp_path, data, what):
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(data)
    [error] = [e for e in prompt_set(prompt_file=str(path)).validate() if "prompt_file=" in e]
    assert f"{path}" in error and what in error
    assert "fix: workload.prompt_set.prompt_file=<a UTF-8 JSON or JSONL file>" in error


@pytest.mark.parametrize("data, what", [
    (b"PK\x03\x04\x14\x00\x00\x00" + bytes(64), "a binary file (zip), not text"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6,3\u00b74,5\n".encode("cp1252"),
     "line 2: not UTF-8 text"),
])
def test_a_binary_or_non_utf8_trace_is_refused_with_its_path_and_the_fix(tmp_path, data, what):
    path = tmp_path / "trace.csv"
    path.write_bytes(data)
    with pytest.raises(TraceError) as refused:
        read_trace_file(str(path), "azure")
    assert str(refused.value).startswith(str(path)) and what in str(refused.value)
    assert "fix: workload.trace.trace_file=<a UTF-8 JSONL or CSV trace>" in str(refused.value)
    errors = workload_class("trace").parse_params({"trace_file": str(path), "trace_format": "azure"}).validate()
    assert any(what in e for e in errors)


def test_a_utf8_file_with_a_byte_order_mark_still_reads(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(json.dumps({"prompt": "hi"}).encode("utf-8"))
    assert prompt_set(prompt_file=str(path)).validate() == []


# ---- shipped once per node ----------------------------------------------------------------------------------------
class Ref:
    """A stand-in for ray.ObjectRef: what ray.put returns."""

    def __init__(self, n):
        self.n = n

    def hex(self):
        return f"ref{self.n}"


def test_each_payload_is_put_once_and_every_trial_carries_its_reference(monkeypatch, tmp_path):
    import pickle

    import ray

    from runner.config.sections import run_config
    from runner.measurement import shipped
    from runner.plan import load_checks
    from runner.plan.grid import build_plan
    from runner.scheduling.shipping import by_reference

    put, stored = [], {}

    def fake_put(value):
        put.append(value)
        stored[f"ref{len(put)}"] = value
        return Ref(len(put))

    from runner.scheduling import shipping

    monkeypatch.setattr(shipping, "_PUT", {})
    monkeypatch.setattr(ray, "put", fake_put)
    monkeypatch.setattr(ray, "get", lambda ref: stored[ref.hex()])
    config = run_config(sweep_name="s", model="m", grid={"max_model_len": [1024], "concurrency": [1, 2]},
                        workloads={"prompt_set": {"prompt_file": QUESTIONS, "prompt_format": "mt_bench",
                                                  "num_sessions": 5}})
    tokenizer = CountingTokenizer()
    for stage in range(2):  # a later stage ships the same prompts: no second put
        plan = by_reference(load_checks.ship_prompts(build_plan(config), tokenizer=lambda: tokenizer))
        assert len(plan.trials) == 2 and len(put) == 1
        refs = {id(t.params.payload()) for t in plan.trials}
        assert all(isinstance(t.params.payload(), shipped.ObjectStoreRef) for t in plan.trials)
        assert len(pickle.dumps(plan.trials[0])) < 2000  # the trial carries a reference, not the sessions
    assert len(refs) == 1 and [len(s.rendered.segments) for s in plan.trials[0].params.prepared()] == [
        len(s.rendered.segments) for s in put[0].sessions]
