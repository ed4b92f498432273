"""Prompts rendered as chat requests with the embedded model's own tokenizer and ChatML template (system prompt
kept, the history as messages, the model's answers spliced as assistant messages), raw text as the option; the
checks before start count the rendered prompts; the driver ships a prompt file's conversations with the trial."""
import dataclasses
from pathlib import Path

import pytest

from runner.traffic.chat import ChatRenderer, Rendering
from runner.measurement.records import RunKeys, trial_row
from runner.measurement.workloads import workload_class
from runner.plan import load_checks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "load"
QUESTIONS = str(FIXTURES / "questions_3cat.jsonl")


@pytest.fixture(scope="module")
def tokenizer():
    from runner.traffic.chat import load_tokenizer
    from runner.models.tiny import ensure_tiny_model

    return load_tokenizer(str(ensure_tiny_model(weights="dummy")))


def test_the_embedded_model_ships_a_chatml_template(tokenizer):
    assert "<|im_start|>" in tokenizer.chat_template
    ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>", add_special_tokens=False)
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")  # a special token, not its characters


def test_a_session_renders_as_the_template_renders_each_turn_with_the_answers_as_assistant_messages(tokenizer):
    renderer = ChatRenderer(tokenizer, "auto")
    session = renderer.session(["Write a haiku.", "Now one about rain."], system="You are terse.")
    assert session.rendering == Rendering.CHAT_TEMPLATE and len(session.segments) == 2
    answer = tokenizer.encode("Leaves fall", add_special_tokens=False)
    # What a chat client sends at turn 2: system, user, the model's answer, user, the assistant header.
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Write a haiku."},
                {"role": "assistant", "content": "Leaves fall"}, {"role": "user", "content": "Now one about rain."}]
    expected = tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                                add_special_tokens=False)
    assert list(session.segments[0]) + answer + list(session.segments[1]) == expected
    text = tokenizer.decode(list(session.segments[0]))
    assert text.startswith("<|im_start|>system\nYou are terse.<|im_end|>") and text.endswith("<|im_start|>assistant\n")
    assert session.prompt_lengths(output_len=5) == [len(session.segments[0]),
                                                    len(session.segments[0]) + 5 + len(session.segments[1])]


def test_token_id_turns_are_spliced_into_the_template(tokenizer):
    session = ChatRenderer(tokenizer, "auto").session([(7, 8, 9)])

    def enc(text):
        return tokenizer.encode(text, add_special_tokens=False)

    assert list(session.segments[0]) == enc("<|im_start|>user\n") + [7, 8, 9] + enc(
        "<|im_end|>\n<|im_start|>assistant\n")


def test_raw_sends_the_turns_alone(tokenizer):
    session = ChatRenderer(tokenizer, "raw").session(["Write a haiku.", (5, 6)], system="Be terse.")
    assert session.rendering == Rendering.RAW
    assert list(session.segments[0]) == tokenizer.encode("Be terse.\nWrite a haiku.", add_special_tokens=False)
    assert session.segments[1] == (5, 6)


def test_auto_on_a_tokenizer_without_template_is_raw(tokenizer):
    class Plain:
        chat_template = None

        def encode(self, text, add_special_tokens=False):
            return [1] * len(text)

    assert ChatRenderer(Plain(), "auto").rendering == Rendering.RAW


def _prompt_set(**raw):
    return workload_class("prompt_set").parse_params({"prompt_file": QUESTIONS, "prompt_format": "mt_bench",
                                                      "output_len": 16, **raw})


def test_checks_before_start_count_the_rendered_prompts_and_name_the_line_and_the_fix(tokenizer):
    longest = _prompt_set().with_prompts(tokenizer).max_sequence_tokens()
    raw = _prompt_set(chat_template="raw").with_prompts(tokenizer).max_sequence_tokens()
    assert longest > raw > 16  # the template's tokens are counted
    ok = load_checks.check_prompt_lengths(workloads={"prompt_set": {"prompt_file": QUESTIONS, "prompt_format":
                                                                    "mt_bench", "output_len": 16}},
                                          max_lens=[longest], tokenizer=lambda: tokenizer)
    assert ok == []
    [error] = load_checks.check_prompt_lengths(
        workloads={"prompt_set": {"prompt_file": QUESTIONS, "prompt_format": "mt_bench", "output_len": 16}},
        max_lens=[longest - 1], tokenizer=lambda: tokenizer)
    assert f"questions_3cat.jsonl line " in error and "chat_template" in error and "over_length=clip" in error
    assert f"over {longest - 1 - 16} tokens" in error and "sweep.grid.max_model_len=[" in error
    clip = {"prompt_set": {"prompt_file": QUESTIONS, "prompt_format": "mt_bench", "output_len": 16,
                           "over_length": "clip"}}
    assert load_checks.check_prompt_lengths(workloads=clip, max_lens=[longest - 1], tokenizer=lambda: tokenizer) == []


def test_a_tokenizer_that_does_not_load_refuses_a_prompt_file_naming_the_fix():
    def broken():
        raise OSError("no tokenizer here")

    [error] = load_checks.check_prompt_lengths(
        workloads={"prompt_set": {"prompt_file": QUESTIONS, "prompt_format": "mt_bench"}}, max_lens=[1024],
        tokenizer=broken)
    assert "model.tokenizer=" in error


def test_multi_turn_counts_the_template_tokens(tokenizer):
    mt = workload_class("multi_turn").parse_params({"context_len": 100, "turns": 2, "turn_tokens": 10,
                                                    "output_len": 4})
    shipped = mt.with_prompts(tokenizer)
    assert shipped.max_sequence_tokens() > mt.max_sequence_tokens()
    assert workload_class("multi_turn").parse_params({"context_len": 100, "turns": 2, "turn_tokens": 10,
                                                      "output_len": 4, "chat_template": "raw"}).with_prompts(
        tokenizer).max_sequence_tokens() == mt.max_sequence_tokens()
    [error] = mt.prompt_problems(tokenizer=tokenizer, max_model_lens=[mt.max_sequence_tokens(), 10 ** 6])
    assert "chat_template=raw" in error


def test_the_driver_ships_the_conversations_so_the_actor_never_reads_the_file(tokenizer, tmp_path):
    from runner.config.sections import run_config
    from runner.plan.grid import build_plan

    copy = tmp_path / "q.jsonl"
    copy.write_text(Path(QUESTIONS).read_text())
    config = run_config(sweep_name="s", model="m", grid={"max_model_len": [1024]},
                        workloads={"prompt_set": {"prompt_file": str(copy), "prompt_format": "mt_bench",
                                                  "num_sessions": 5}})
    plan = load_checks.ship_prompts(build_plan(config), tokenizer=lambda: tokenizer)
    copy.unlink()  # the actor's view: no such file
    params = plan.trials[0].params
    assert len(params.prepared()) == 5 and params.arrivals() == 5 and params.max_sequence_tokens() > 16
    import pickle

    assert len(pickle.loads(pickle.dumps(params)).prepared()) == 5
    assert dataclasses.replace(params, num_sessions=2).prepared() == params.prepared()[:2]
    first_turns = dataclasses.replace(params, max_turns=1).prepared()  # a warm-up: the trial's own first prompts
    assert [s.rendered.segments for s in first_turns] == [s.rendered.segments[:1] for s in params.prepared()]
    with pytest.raises(ValueError, match="no parameter '_prompts'"):
        workload_class("prompt_set").parse_params({"_prompts": []})


def test_requests_and_trials_say_what_was_applied_and_how_many_were_clipped():
    from runner.measurement.latency import Timeline
    from runner.measurement.workloads.base import RequestResult
    from runner.schema import EngineSettings

    def result(rendering, clipped):
        t = Timeline(sent_at=0.0)
        t.add_chunk(at=0.1, tokens=2)
        return RequestResult(timeline=t, prompt_tokens=4, output_token_ids=[1, 2], prompt_rendering=rendering,
                             prompt_clipped_tokens=clipped)

    trial = type("T", (), {"trial_id": "t", "engine_id": "e", "workload": "prompt_set", "params_json": "{}",
                           "api": "async", "concurrency": 1, "repeat": 0})()
    row = trial_row(keys=RunKeys(sweep="s", run_id="r"), trial=trial, settings=EngineSettings(
        model="m", spec_method="off", num_speculative_tokens=0, enable_prefix_caching=False,
        gpu_memory_utilization=0.9, max_model_len=1024), results=[result("chat_template", 0),
                                                                   result("chat_template", 3)],
        measured_phases=("measured",), wall_s=1.0, started_at=0.0, counter_deltas={}, kv_usage_peak=None)
    assert row.prompt_rendering == "chat_template" and row.clipped_requests == 1
