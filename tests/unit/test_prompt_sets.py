"""Prompt sets in ShareGPT, MT-Bench / Spec-Bench and plain JSONL formats: conversations with their categories,
refused naming the line when a file is not its declared format, sessions that keep each request's category."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.measurement.prompt_sets import PromptSetError, categories, parse_prompt_set, read_prompt_set
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext

from tests.support.fake_engine import SlowEngine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "load"
QUESTIONS, SHAREGPT, PLAIN = (str(FIXTURES / n) for n in ("questions_3cat.jsonl", "sharegpt_small.json",
                                                            "prompts_categories.jsonl"))


def test_mt_bench_questions_keep_their_category_and_turns():
    convs = read_prompt_set(QUESTIONS, "mt_bench")
    assert len(convs) == 12 and all(len(c.turns) == 2 for c in convs)
    assert categories(convs) == ["code", "prose", "counting"]
    assert read_prompt_set(QUESTIONS, "spec_bench") == convs


def test_sharegpt_human_turns_become_a_session_and_empty_ones_are_skipped():
    convs = read_prompt_set(SHAREGPT, "sharegpt")
    assert [len(c.turns) for c in convs] == [2, 1, 3]  # c3 has no human turn
    assert convs[0].turns[1] == "And how do I read it line by line?"
    assert [c.category for c in convs] == [None, "chat", "code"]
    assert categories(convs) == ["–", "chat", "code"]
    # One conversation a line is ShareGPT too.
    lines = "\n".join(json.dumps(e) for e in json.loads(Path(SHAREGPT).read_text()))
    assert parse_prompt_set(lines, fmt="sharegpt", name="s") == [c.__class__(**{**c.__dict__, "where": w}) for c, w in
                                                                zip(convs, ["s line 1", "s line 2", "s line 4"])]


def test_plain_jsonl_takes_prompt_text_or_token_ids_with_an_optional_category():
    convs = read_prompt_set(PLAIN, "jsonl")
    assert [c.category for c in convs] == ["code", "chat", None, "ids"]
    assert convs[3].turns == ((5, 6, 7, 8, 9, 10),)


@pytest.mark.parametrize("path,fmt,message", [
    (QUESTIONS, "sharegpt", "questions_3cat.jsonl line 1: no 'conversations' list: not ShareGPT (it looks like "
                            "MT-Bench / Spec-Bench questions: prompt_format=mt_bench)"),
    (SHAREGPT, "mt_bench", "sharegpt_small.json line 1: not JSON"),
    (PLAIN, "mt_bench", "prompts_categories.jsonl line 1: no 'turns' list of strings: not MT-Bench / Spec-Bench "
                        "question JSONL (it looks like plain prompt JSONL: prompt_format=jsonl)"),
    (QUESTIONS, "jsonl", "line 1: no 'prompt', 'text' or 'prompt_token_ids' key: not plain prompt JSONL (it looks "
                         "like MT-Bench"),
])
def test_a_file_not_in_its_declared_format_is_refused_naming_the_line(path, fmt, message):
    with pytest.raises(PromptSetError) as info:
        read_prompt_set(path, fmt)
    assert message in str(info.value)


def test_bad_sharegpt_entries_name_the_entry():
    with pytest.raises(PromptSetError, match=r"s entry 1: no 'conversations' list"):
        parse_prompt_set('[{"conversations": [{"from": "human", "value": "hi"}]}, {"id": 2}]', fmt="sharegpt",
                         name="s")
    with pytest.raises(PromptSetError, match="s line 2: not JSON"):
        parse_prompt_set('[\n{"conversations": ]', fmt="sharegpt", name="s")


def params(**raw):
    return workload_class("prompt_set").parse_params(raw)


def test_params_are_checked_before_start():
    assert params(prompt_file=QUESTIONS, prompt_format="mt_bench", mix={"code": 2, "prose": 1}).validate() == []
    errors = params(prompt_file=QUESTIONS, prompt_format="mt_bench", mix={"code": 1, "maths": 1}).validate()
    assert errors == ["mix={code:1,maths:1} names category 'maths', which the prompt file lacks; it has: code, prose, "
                      "counting"]
    assert "mix={code:-1}: the weight of 'code' must be a number ≥ 0" in params(
        prompt_file=QUESTIONS, prompt_format="mt_bench", mix={"code": -1}).validate()
    assert "mix={code:0}: every weight is 0" in params(prompt_file=QUESTIONS, prompt_format="mt_bench",
                                                       mix={"code": 0}).validate()
    assert any("prompt_format='csv' is unknown" in e for e in params(prompt_file=QUESTIONS,
                                                                       prompt_format="csv").validate())
    assert any("not ShareGPT" in e for e in params(prompt_file=QUESTIONS, prompt_format="sharegpt").validate())
    assert any("prompt_file=null" in e for e in params().validate())


def run(concurrency=1, **raw):
    engine = SlowEngine(service_s=0.01)
    p = params(**raw)
    assert p.validate() == []
    return engine, asyncio.run(workload_class("prompt_set")().run(TrialContext(engine=engine, concurrency=concurrency,
                                                                               repeat=0, params=p)))


def test_sessions_send_their_turns_with_the_history_and_keep_the_category():
    _, results = run(concurrency=2, prompt_file=SHAREGPT, prompt_format="sharegpt", output_len=3)
    assert [(r.session, r.turn) for r in results] == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1), (2, 2)]
    assert [r.category for r in results] == ["–", "–", "chat", "code", "code", "code"]
    first, second = results[0], results[1]
    asked = len("And how do I read it line by line?")
    assert second.prompt_tokens == first.prompt_tokens + 3 + asked  # history + answer + the next turn


def test_closed_loop_runs_concurrency_sessions_at_a_time():
    engine, results = run(concurrency=3, prompt_file=QUESTIONS, prompt_format="mt_bench", output_len=2)
    assert len(results) == 24 and engine.peak == 3


def test_open_loop_sessions_start_on_the_clock():
    engine, results = run(prompt_file=QUESTIONS, prompt_format="mt_bench", output_len=2, arrival="poisson",
                          request_rate=500, max_turns=1, num_sessions=6)
    assert len(results) == 6 and all(r.send_lag_s is not None for r in results)
    assert params(prompt_file=QUESTIONS, prompt_format="mt_bench", arrival="poisson",
                  request_rate=2).warmup_variant().num_sessions == 8


def test_long_histories_keep_their_last_tokens_only_where_the_config_says_so_and_are_counted():
    _, results = run(prompt_file=QUESTIONS, prompt_format="mt_bench", output_len=2, max_prompt_tokens=40,
                     over_length="clip")
    assert max(r.prompt_tokens for r in results) == 40
    clipped = [r for r in results if r.prompt_clipped_tokens]
    assert clipped and all(r.prompt_tokens == 40 for r in clipped)
    assert all(r.prompt_rendering == "raw" for r in results)  # the stand-in tokenizer has no template
    with pytest.raises(ValueError, match=r"line 1 turn 1: the prompt is \d+ tokens, over 40"):
        run(prompt_file=QUESTIONS, prompt_format="mt_bench", output_len=2, max_prompt_tokens=40)
    assert any("over_length='cut' is unknown" in e
               for e in params(prompt_file=QUESTIONS, prompt_format="mt_bench", over_length="cut").validate())
