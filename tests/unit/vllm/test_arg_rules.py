"""runner.vllm.arg_rules: the engine-argument rules read from the installed vLLM (the child process that
runner.plan.engine_args starts on a cache miss runs `extract`; here it runs in this process).

The readers of vLLM's parser and annotations on stand-ins, then `extract` on the installed vLLM: what the plan's
checks rely on (kinds, choices, bounds, the speculative keys, the architectures) is there, and it is what the plan
has cached for this vLLM."""
from __future__ import annotations

import json
import typing
from typing import Annotated, Literal, Optional, Union

import pytest

from runner.vllm import arg_rules


def test_type_rule_reads_the_kind_behind_vllms_type_callables():
    def optional_type(return_type):
        def _optional_type(value):
            return None if value == "" else return_type(value)
        return _optional_type

    def human_readable_int(value): ...

    def union_dict_and_str(value): ...

    assert arg_rules._type_rule(int) == {"kind": "int"}
    assert arg_rules._type_rule(json.loads) == {"kind": "json"}
    assert arg_rules._type_rule(optional_type(float)) == {"kind": "float", "nullable": True}
    assert arg_rules._type_rule(human_readable_int) == {"kind": "int", "human": True}
    assert arg_rules._type_rule(union_dict_and_str) == {"kind": "dict_or_str"}
    assert arg_rules._type_rule(lambda v: v) == {"kind": "any"}


def test_annotation_rule_reads_pydantic_annotations():
    class SkipValidation:
        pass

    assert arg_rules._annotation_rule(Literal["a", "b"]) == {"kind": "str", "choices": ["a", "b"]}
    assert arg_rules._annotation_rule(Optional[int]) == {"kind": "int", "nullable": True}
    assert arg_rules._annotation_rule(Union[Literal["x"], Literal["y", "z"]]) == \
        {"kind": "str", "choices": ["x", "y", "z"], "nullable": False}
    assert arg_rules._annotation_rule(list[int]) == {"kind": "int", "many": True}
    assert arg_rules._annotation_rule(dict[str, int]) == {"kind": "json"}
    assert arg_rules._annotation_rule(Annotated[int, SkipValidation()]) is None  # vLLM fills it in itself
    assert arg_rules._annotation_rule(int | str) == {"kind": "any", "nullable": False}
    assert arg_rules._literal_values(Literal["a", Literal["b", "c"]]) == ["a", "b", "c"]
    assert typing.get_origin(Literal["a"]) is Literal  # the reader's own assumption about typing


@pytest.fixture(scope="module")
def extracted() -> dict:
    return arg_rules.extract()


def test_extract_reads_the_arguments_the_plan_checks(extracted):
    rules = extracted["rules"]
    assert extracted["format"] == arg_rules.SPEC_FORMAT
    assert rules["max_model_len"]["kind"] == "int" and rules["max_model_len"].get("human")
    assert rules["enable_prefix_caching"]["kind"] == "bool"
    assert rules["gpu_memory_utilization"]["kind"] == "float"
    assert rules["gpu_memory_utilization"]["bounds"].get("le") == 1  # from vLLM's CacheConfig field
    assert "auto" in rules["kv_cache_dtype"]["choices"]
    assert rules["speculative_config"]["kind"] == "json"
    assert sum(r["kind"] != "any" for r in rules.values()) > 0.8 * len(rules)  # the parser is read, not guessed


def test_extract_reads_the_speculative_keys_and_the_architectures(extracted):
    spec = extracted["speculative"]
    assert spec["num_speculative_tokens"]["kind"] == "int"
    assert {"mtp", "ngram", "eagle"} <= set(spec["method"]["choices"])
    assert spec["prompt_lookup_min"]["bounds"] == {"ge": 1}
    assert "num_speculative_tokens_per_batch_size" in spec  # the schedule key the runner sets
    assert "target_model_config" not in spec  # SkipValidation: vLLM fills it in
    assert "Qwen2ForCausalLM" in extracted["architectures"]
    assert "ForCausalLM" in extracted["architecture_suffixes"]


def test_what_the_plan_cached_is_this_extraction(extracted):
    from runner.plan.engine_args import load_spec

    spec = load_spec()  # the conftest filled the cache before any test
    assert spec is not None and spec.vllm_version == extracted["vllm_version"]
    assert set(spec.rules) == set(extracted["rules"])
    assert set(spec.speculative) == set(extracted["speculative"])


def test_rules_that_cannot_be_read_say_so_and_which_checks_are_off(tmp_path, monkeypatch, capsys):
    """A failed extraction is a warning naming what goes unchecked, never a silent None."""
    from runner.plan import engine_args

    monkeypatch.setattr(engine_args, "cache_path", lambda: tmp_path / "rules.json")

    def broken(*_, **__):
        raise engine_args.RulesUnread("python -m runner.vllm.arg_rules exited 1: ImportError: renamed")

    monkeypatch.setattr(engine_args, "_extract_in_subprocess", broken)
    assert engine_args.load_spec() is None
    err = capsys.readouterr().err
    assert "engine-argument rules could not be read (python -m runner.vllm.arg_rules exited 1: ImportError: " \
           "renamed)" in err and "not checked before start" in err and "--warm shows the error" in err
    assert not (tmp_path / "rules.json").exists()
