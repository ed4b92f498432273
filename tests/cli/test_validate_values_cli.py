"""vLLM's engine-argument rules: extracted once by `python -m runner.plan.engine_args` (a subprocess that imports
vLLM), then read from the JSON cache."""
from __future__ import annotations

import json

import pytest


def test_spec_is_extracted_once_then_read_from_the_cache(tmp_path, monkeypatch):
    """Cold: one subprocess that imports vLLM; warm: the JSON only (the extractor must not run)."""
    from runner.plan import engine_args

    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path))
    spec = engine_args.load_spec()
    if spec is None:
        pytest.skip("vLLM is not installed here")
    files = list((tmp_path / "engine-args").glob("vllm-*.json"))
    assert len(files) == 1 and spec.vllm_version in files[0].name
    rules = json.loads(files[0].read_text())["rules"]
    assert rules["max_num_seqs"]["kind"] == "int" and rules["max_num_seqs"]["bounds"] == {"ge": 1}
    assert "fp8" in rules["kv_cache_dtype"]["choices"] and rules["enforce_eager"]["kind"] == "bool"
    assert not rules["enforce_eager"].get("many")
    # speculative_config's fields and the loadable architectures come with them
    assert spec.speculative["prompt_lookup_max"].bounds == {"ge": 1} and spec.speculative["prompt_lookup_max"].nullable
    assert "synthetic" in spec.speculative["rejection_sample_method"].choices
    assert "target_model_config" not in spec.speculative  # vLLM fills it in itself
    assert spec.knows_architecture("Qwen2ForCausalLM") and spec.knows_architecture("MiMoForCausalLM")
    assert spec.knows_architecture("Qwen2ForSequenceClassification")  # vLLM converts between endings
    assert spec.knows_architecture("Qwen2ForCausalLMM") is False

    def no_extract():
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(engine_args, "_extract_in_subprocess", no_extract)
    again = engine_args.load_spec()
    assert again.rules["kv_cache_dtype"].choices == spec.rules["kv_cache_dtype"].choices
