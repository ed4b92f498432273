"""Prompt sets in ShareGPT, MT-Bench / Spec-Bench and plain JSONL formats: conversations with their categories,
refused naming the line when a file is not its declared format, sessions that keep each request's category."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.traffic.prompt_sets import PromptSetError, categories, parse_prompt_set, read_prompt_set
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import TrialContext

from tests.support.fake_engine import SlowEngine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "load"
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
    (SHAREGPT, "mt_bench", "sharegpt_small.json line 1: the file is one JSON value over several lines, not one a "
                           "line (it looks like ShareGPT: prompt_format=sharegpt)"),
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


PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public"


def test_public_mt_bench_questions_sample_stratified_by_category_not_the_first_n():
    whole = read_prompt_set(str(PUBLIC / "mt_bench_question.jsonl"), "mt_bench")
    assert len(whole) == 80 and len(categories(whole)) == 8
    p = params(prompt_file=str(PUBLIC / "mt_bench_question.jsonl"), prompt_format="mt_bench", num_sessions=20,
               seed=3)
    drawn = p.conversations()
    counts = {c: sum(1 for x in drawn if x.category == c) for c in categories(whole)}
    assert counts == dict.fromkeys(categories(whole), 20 / 8) or sorted(counts.values()) == [2, 2, 2, 2, 3, 3, 3, 3]
    assert drawn == p.conversations()  # seeded: the same sample every time
    assert drawn != params(prompt_file=str(PUBLIC / "mt_bench_question.jsonl"), prompt_format="mt_bench",
                           num_sessions=20, seed=4).conversations()
    assert [c.category for c in drawn[:4]] != ["writing"] * 4  # interleaved, not in file order
    # The mix is checked against the whole file, not the sample.
    small = params(prompt_file=str(PUBLIC / "mt_bench_question.jsonl"), prompt_format="mt_bench", num_sessions=2,
                   mix={"coding": 1, "writing": 1})
    assert small.validate() == [] and len(small.conversations()) == 2


def test_stratified_sample_keeps_shares_and_small_categories():
    from runner.traffic.prompt_sets import Conversation, stratified_sample

    convs = [Conversation(where=f"l{i}", turns=("x",), category="a" if i < 90 else "b") for i in range(100)]
    drawn = stratified_sample(convs, 10, seed=0)
    assert sum(c.category == "a" for c in drawn) == 9 and sum(c.category == "b" for c in drawn) == 1
    assert stratified_sample(convs, None, seed=0) == convs and stratified_sample(convs, 500, seed=0) == convs


def test_spec_bench_is_reported_by_its_tasks():
    convs = read_prompt_set(str(PUBLIC / "spec_bench_question.jsonl"), "spec_bench")
    assert set(categories(convs)) == {"mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"}
    assert sum(c.category == "mt_bench" for c in convs) == 10
    # Read as MT-Bench questions, the raw categories stay.
    assert "writing" in categories(read_prompt_set(str(PUBLIC / "spec_bench_question.jsonl"), "mt_bench"))


def test_public_sharegpt_with_tool_turns_keeps_the_human_turns():
    from runner.traffic.prompt_sets import read_prompt_file

    read = read_prompt_file(str(PUBLIC / "sharegpt_glaive_toolcall_12.json"), "sharegpt")
    assert len(read.conversations) == 12 and read.skipped_messages == 0
    tools = read.conversations[3]  # human, function_call, observation, gpt, ... : the human turns only
    assert tools.turns == ("I need to calculate the area of a rectangle. The length is 5 units and the breadth is 3 "
                           "units.", "What about a circle with a radius of 4 units?",
                           "And a square with side length 7 units?")


def test_system_prompts_are_kept():
    convs = read_prompt_set(SHAREGPT, "sharegpt")
    assert convs[1].system == "You are terse." and convs[0].system is None
    entry = {"system": "Be brief.", "conversations": [{"from": "human", "value": "hi"}]}
    assert parse_prompt_set(json.dumps([entry]), fmt="sharegpt", name="s")[0].system == "Be brief."
    openai = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"},
                           {"role": "assistant", "content": "a"}, {"role": "user", "content": "u2"}]}
    conv = parse_prompt_set(json.dumps(openai), fmt="openai", name="o")[0]
    assert conv.system == "S" and conv.turns == ("u1", "u2")


def test_openai_messages_jsonl_with_content_parts_and_null_messages_counted():
    from runner.traffic.prompt_sets import parse_prompt_file

    lines = [
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "look"},
                                                   {"type": "image_url", "image_url": {"url": "x"}}]}],
         "category": "vision"},
        {"messages": [None, {"role": "user", "content": None}, {"role": "user", "content": "hello"}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
                      {"role": "user", "content": "q"}]},
    ]
    read = parse_prompt_file("\n".join(json.dumps(x) for x in lines), fmt="openai", name="o")
    assert [c.turns for c in read.conversations] == [("look",), ("hello",), ("q",)]
    assert read.skipped_messages == 3 and read.conversations[0].category == "vision"


def test_null_sharegpt_message_is_skipped_and_counted_not_fatal():
    from runner.traffic.prompt_sets import parse_prompt_file

    text = json.dumps([{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": None},
                                          None, {"from": "human", "value": "b"}]}])
    read = parse_prompt_file(text, fmt="sharegpt", name="s")
    assert read.conversations[0].turns == ("a", "b") and read.skipped_messages == 2


@pytest.mark.parametrize("text,fmt,message", [
    (json.dumps({"category": "x", "turns": ["ok", "  "]}), "mt_bench", "q line 1: turn 1 is empty"),
    (json.dumps([{"conversations": [{"from": "human", "value": ""}]}]), "sharegpt",
     "q entry 0: message 0 (human) is empty"),
    (json.dumps({"messages": [{"role": "user", "content": ""}]}), "openai", "q line 1: message 0 (user) is empty"),
    ('{"prompt": ""}', "jsonl", "q line 1: the prompt is empty"),
])
def test_empty_turns_are_refused_with_their_line(text, fmt, message):
    with pytest.raises(PromptSetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_prompt_set(text, fmt=fmt, name="q")


@pytest.mark.parametrize("text,fmt,hint", [
    # A ShareGPT list given as JSONL (pretty-printed, or compact on one line), and one pretty-printed conversation.
    (json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}], indent=1), "jsonl", "prompt_format=sharegpt"),
    (json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}]), "jsonl", "prompt_format=sharegpt"),
    (json.dumps({"conversations": [{"from": "human", "value": "hi"}]}, indent=2), "mt_bench",
     "prompt_format=sharegpt"),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}]}), "sharegpt", "prompt_format=openai"),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}]}), "jsonl", "prompt_format=openai"),
    (json.dumps({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": []}), "jsonl",
     "workload=[trace]"),
])
def test_a_misdeclared_file_names_the_format_it_is(text, fmt, hint):
    with pytest.raises(PromptSetError) as info:
        parse_prompt_set(text, fmt=fmt, name="f")
    assert hint in str(info.value) and "f line 1" in str(info.value) or "f entry 0" in str(info.value)


def test_one_pretty_printed_conversation_reads_as_sharegpt_and_openai():
    one = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
    assert parse_prompt_set(json.dumps(one, indent=2), fmt="sharegpt", name="s")[0].turns == ("hi",)
    msgs = {"messages": [{"role": "user", "content": "hi"}]}
    assert parse_prompt_set(json.dumps(msgs, indent=2), fmt="openai", name="o")[0].turns == ("hi",)


def test_prompt_set_reports_skipped_messages_per_trial(tmp_path):
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": None}]}]))
    assert params(prompt_file=str(path), prompt_format="sharegpt").source_columns(max_model_len=64) == {
        "source_skipped": 1}
