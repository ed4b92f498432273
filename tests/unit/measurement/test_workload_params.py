"""Pure tests: workload params and sizes, prompt sources, explicit arms, and the named studies' plans."""
import json
from pathlib import Path

import pytest

from runner.measurement import prompts
from runner.measurement.prompts import PromptMaker, TokenStream, insert_at, needle
from runner.measurement.workloads import WORKLOADS, workload_class
from runner.config.sections import run_config
from runner.plan.grid import PlanError, build_plan
from runner.plan.validate import check_workloads

ROOT = Path(__file__).resolve().parents[3]
STUDIES = ["mtp_vs_prefix_cache", "mtp_bringup", "draft_count"]


class FakeEngine:
    """A character-level tokenizer: enough to test text sources without a model."""

    vocab_size = 300
    first_token_id = 3
    max_model_len = 1024

    def encode_text(self, text: str) -> list[int]:
        return [ord(c) % 256 + 3 for c in text]

    def chat_renderer(self, mode):
        from tests.support.fake_engine import char_renderer

        return char_renderer(mode)


def test_registry_lists_all_reference_workloads():
    assert set(WORKLOADS) == {"decode", "shared_prefix", "second_request", "multi_turn", "long_context",
                              "fixed_task", "trace", "prompt_set"}
    with pytest.raises(ValueError, match="valid: decode, fixed_task"):
        workload_class("nope")


def test_sequence_sizes():
    mt = workload_class("multi_turn").parse_params({"context_len": 300, "turns": 3, "turn_tokens": 100,
                                                    "output_len": 8})
    assert mt.max_sequence_tokens() == 300 + 2 * 108 + 8
    sp = workload_class("shared_prefix").parse_params({"prefix_len": 512, "suffix_len": 64, "output_len": 8})
    assert sp.max_sequence_tokens() == 584
    lc = workload_class("long_context").parse_params({})
    assert lc.max_sequence_tokens() < 200  # context_len null fills whatever max_model_len is


def test_measured_phases():
    assert workload_class("second_request").params_type().measured_phases() == ("repeat",)
    assert workload_class("fixed_task").params_type().measured_phases() == ("measured",)
    assert workload_class("long_context").params_type().measured_phases() == ("first",)


def test_fixed_task_defaults_match_the_study_and_allow_no_warmup():
    p = workload_class("fixed_task").params_type()
    assert (p.warmup, p.runs, p.seed, p.output_len) == (1, 3, 6000, 256)
    assert workload_class("fixed_task").parse_params({"warmup": 0}).validate() == []
    assert workload_class("fixed_task").parse_params({"runs": 0}).validate()


def test_validation_names_the_fix():
    errors = check_workloads(workloads={"multi_turn": {"context_len": 2000, "turns": 3}},
                             grid={"max_model_len": [2048]})
    assert errors and "max_model_len" in errors[0] and "fix:" in errors[0]
    errors = check_workloads(workloads={"shared_prefix": {"prompt_source": "web"}}, grid={})
    assert any("prompt_source='web'" in e for e in errors)
    errors = check_workloads(workloads={"multi_turn": {"api": "offline"}}, grid={})
    assert any("cannot use api='offline'" in e and "fix: ++workload.multi_turn.api=async" in e for e in errors)
    assert check_workloads(workloads={"decode": {"api": "offline"}}, grid={}) == []


def test_synthetic_prompts_are_seeded():
    maker = PromptMaker(source="synthetic", engine=FakeEngine())
    a, b = maker.tokens(length=50, seed=1), maker.tokens(length=50, seed=1)
    assert a == b and len(a) == 50 and a != maker.tokens(length=50, seed=2)
    assert all(3 <= t < 300 for t in a)


def test_token_stream_windows_are_exact_seeded_and_wrap():
    stream = TokenStream(items=["abc", [7, 8], "de"], encode=lambda s: [ord(c) for c in s])
    w = stream.window(length=12, seed=5)
    assert len(w) == 12 and w == stream.window(length=12, seed=5)
    ring = [97, 98, 99, 7, 8, 100, 101]
    start = ring.index(w[0])
    assert w == [ring[(start + i) % len(ring)] for i in range(12)]


def test_corpus_prompts_come_from_the_standard_library():
    maker = PromptMaker(source="corpus", engine=FakeEngine())
    tokens = maker.tokens(length=400, seed=3)
    assert len(tokens) == 400 and tokens == maker.tokens(length=400, seed=3)
    text = "".join(chr(t - 3) for t in tokens)
    assert "def " in text or "import" in text or "self" in text


def test_jsonl_prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "hello"}) + "\n\n" + json.dumps({"prompt_token_ids": [5, 6]}) + "\n")
    maker = PromptMaker(source="jsonl", engine=FakeEngine(), prompt_file=str(path))
    assert len(maker.tokens(length=20, seed=0)) == 20
    assert set(maker.tokens(length=20, seed=0)) <= {5, 6} | {ord(c) + 3 for c in "hello"}
    assert prompts.check_prompt_source(source="jsonl", prompt_file=None)
    assert prompts.check_prompt_source(source="jsonl", prompt_file=str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "x"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl': line 1: expected"):  # read whole before any prompt is made
        PromptMaker(source="jsonl", engine=FakeEngine(), prompt_file=str(bad)).tokens(length=3, seed=0)
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        list(prompts.jsonl_rows(str(bad)))


def test_needle_is_seeded_and_inserted_without_changing_the_length():
    assert needle(seed=1) == needle(seed=1) and needle(seed=1) != needle(seed=2)
    body = list(range(100))
    out = insert_at(tokens=body, piece=[-1, -2], depth=0.5)
    assert len(out) == 100 and out[49:51] == [-1, -2]
    assert insert_at(tokens=body, piece=[-1], depth=0.0)[0] == -1


GRID = {"num_speculative_tokens": [3], "max_model_len": [1024], "concurrency": [1]}
ARMS = [{"spec_method": "off", "enable_prefix_caching": True},
        {"spec_method": "mtp", "enable_prefix_caching": False},
        {"spec_method": "mtp", "enable_prefix_caching": True}]


def arm_plan(**over):
    kwargs = dict(sweep_name="s", model="m", grid=GRID, workloads={"decode": {}}, engine_args={}, arms=ARMS)
    kwargs.update(over)
    return build_plan(run_config(**kwargs))


def test_explicit_arms_give_exactly_those_engines():
    p = arm_plan()
    got = [(e.settings.spec_method, e.settings.num_speculative_tokens, e.settings.enable_prefix_caching)
           for e in p.engines]
    assert got == [("off", 0, True), ("mtp", 3, False), ("mtp", 3, True)]
    # An arm's engine is the same engine (same id) as the grid would give for those settings.
    grid_only = build_plan(run_config(sweep_name="s", model="m", grid={**GRID, "spec_method": ["off"]},
                                      workloads={"decode": {}}, engine_args={}))
    assert grid_only.engines[0].engine_id == p.engines[0].engine_id


def test_explicit_arms_are_checked():
    from runner.config.checks import ConfigError
    from runner.config.store import load_config

    with pytest.raises(ConfigError, match="not an engine axis"):
        load_config(["sweep.arms=[{concurrency:2}]"])
    with pytest.raises(PlanError, match="give the same engine"):
        arm_plan(arms=[ARMS[0], dict(ARMS[0])])
    with pytest.raises(ConfigError, match="unknown speculative method 'mtpp'"):
        arm_plan(arms=[{"spec_method": "mtpp"}])


def test_offline_api_gets_its_own_engines():
    p = build_plan(run_config(sweep_name="s", model="m", grid={"spec_method": ["off"], "concurrency": [2]},
                              workloads={"decode": {"api": "offline"}, "second_request": {}}, engine_args={}))
    assert [e.api for e in p.engines] == ["async", "offline"]
    offline = p.engines[1]
    assert [t.workload for t in p.trials_of(offline.engine_id)] == ["decode"]
    assert [t.workload for t in p.trials_of(p.engines[0].engine_id)] == ["second_request"]


def compose(*overrides):
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(version_base=None, config_dir=str(ROOT / "conf")):
        return hydra_compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("study", STUDIES)
def test_named_study_plans_validate_scaled_down_and_full_size(study, tmp_path):
    from runner.command.sweep import make_plan
    from runner.config.store import typed

    cpu = make_plan(typed(compose(f"sweep={study}", "sweep.preset=cpu")), check_engine_args=False)
    assert cpu.sweep == study and cpu.trials
    assert all(e.settings.max_model_len <= 4096 for e in cpu.engines)
    full = make_plan(typed(compose(f"sweep={study}", "model=mimo_7b_dummy", "engine=gpu", f"model.path={tmp_path}")),
                     check_engine_args=False)
    assert len(full.trials) > len(cpu.trials)


def test_study_a_has_its_three_arms():
    from runner.command.sweep import make_plan
    from runner.config.store import typed

    plan = make_plan(typed(compose("sweep=mtp_vs_prefix_cache")), check_engine_args=False)
    got = {(e.settings.spec_method, e.settings.num_speculative_tokens, e.settings.enable_prefix_caching)
           for e in plan.engines}
    assert got == {("off", 0, True), ("mtp", 3, False), ("mtp", 3, True)}
    shared = {t.params.prefix_len for t in plan.trials if t.workload == "shared_prefix"}
    assert shared == {4096, 16384}
    assert {t.concurrency for t in plan.trials} == {1, 2, 4, 8, 16, 32}


def test_unknown_preset_lists_the_valid_ones():
    from runner.config.presets import apply_preset
    from runner.config.checks import ConfigError

    with pytest.raises(ConfigError, match="valid: cpu"):
        apply_preset(compose("sweep=draft_count", "sweep.preset=tiny"))


def test_a_race_that_cannot_stop_anything_is_warned_about():
    from runner.command.sweep import make_plan
    from runner.config.store import typed

    said: list[str] = []
    make_plan(typed(compose("sweep.race=true", "sweep.repeats=3")), check_engine_args=False, warn=said.append)
    assert any("sweep.race=true saves nothing with sweep.repeats=3" in s and "fix: sweep.repeats=5" in s
               for s in said)
    said.clear()
    make_plan(typed(compose("sweep.race=true", "sweep.repeats=5")), check_engine_args=False, warn=said.append)
    assert not any("sweep.race" in s for s in said)
