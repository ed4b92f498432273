"""Engine-argument values by vLLM's own rules, runner-owned keys, speculative extras, sweep keys, capacity
warnings, and the documented override forms: through the same functions the CLI calls (fast: no engine)."""
from __future__ import annotations

import pytest

from runner.plan.engine_args import ArgRule, value_problem
from runner.plan.grid import PlanError
from runner.vllm.spec_config import speculative_config

from tests.support.malformed import REFUSED
from tests.support.plans import plan_error

ARMS = "sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]"


@pytest.mark.parametrize("overrides,message,fix", REFUSED, ids=[" ".join(c[0]) for c in REFUSED])
def test_refused_with_its_fix(overrides, message, fix):
    error = plan_error(overrides)
    assert message in error, error
    assert fix in error, error


# The forms docs/reference.md documents, and the lead's CPU engine test's overrides: all accepted.
ACCEPTED = [
    [],
    ["sweep.engine_axes={kv_cache_dtype:[auto,fp8]}"],
    ["+sweep.engine_axes.kv_cache_dtype=[auto,fp8]"],
    [ARMS],
    ["sweep=mtp_vs_prefix_cache", "sweep.preset=cpu", ARMS],
    ["sweep=draft_count", "sweep.preset=cpu", "sweep.engine_axes={kv_cache_dtype:[auto,fp8]}"],
    ["sweep.repeats=2", "sweep.race=true"],
    ["sweep.grid.concurrency=[1,8,32]"],
    ["+engine.args.kv_cache_dtype=fp8"],
    ["engine.args.max_num_seqs=8", "sweep.engine_axes={max_num_batched_tokens:[1K,2048]}"],
    ["sweep.grid.spec_method=[off,ngram]", "sweep.grid.num_speculative_tokens=[3]"],
    ["sweep.grid.spec_method=[eagle]", "+spec.eagle.model=/tmp/eagle-draft"],
]


@pytest.mark.parametrize("overrides", ACCEPTED, ids=[" ".join(a) or "default" for a in ACCEPTED])
def test_documented_forms_are_accepted(overrides):
    assert plan_error(overrides) == ""


def _plan(overrides, warnings=None):
    from runner.command.sweep import make_plan
    from runner.config.store import load_config

    return make_plan(load_config(["tracking=none", *overrides]), warn=(warnings.append if warnings is not None else None))


def test_engines_that_differ_only_in_an_engine_axis_are_labelled_apart():
    from runner.scheduling.describe import describe_plan

    plan = _plan(["sweep.grid.spec_method=[off]", "sweep.engine_axes={kv_cache_dtype:[auto,fp8]}"])
    text = describe_plan(plan, done=set(), parallel=1)
    assert "off kv_cache_dtype=auto:" in text and "off kv_cache_dtype=fp8:" in text, text


def test_capacity_wall_is_warned_and_still_planned():
    warnings = []
    plan = _plan(["sweep.grid.spec_method=[off]", "sweep.grid.concurrency=[100000]"], warnings)
    assert plan.trials  # a wall to measure: it still runs
    text = "\n".join(warnings)
    assert "concurrency 100000 > max_num_seqs=32" in text, text
    assert "above the KV pool" in text and "capacity wall" in text, text


def test_mtp_layers_count_in_the_kv_estimate():
    from runner.plan.capacity import kv_bytes_per_token, model_shape

    from runner.config.sections import ModelSection

    shape = model_shape(ModelSection(name="tiny-mtp", builtin="tiny_mtp"))
    off = kv_bytes_per_token(shape=shape, engine_args={}, spec_method="off")
    mtp = kv_bytes_per_token(shape=shape, engine_args={}, spec_method="mtp")
    fp8 = kv_bytes_per_token(shape=shape, engine_args={"kv_cache_dtype": "fp8"}, spec_method="off")
    assert (off, mtp, fp8) == (2 * 2 * 1 * 64 * 2, 2 * 3 * 1 * 64 * 2, 2 * 2 * 1 * 64)


def test_gpu_pool_is_unknown_before_start_unless_given():
    warnings = []
    _plan(["engine=gpu", "sweep.grid.spec_method=[off]"], warnings)
    assert any("KV pool unknown before start" in w for w in warnings), warnings
    warnings = []
    _plan(["engine=gpu", "sweep.grid.spec_method=[off]", "sweep.engine_axes={kv_cache_memory_bytes:[100000]}"],
          warnings)
    assert any("above the KV pool" in w for w in warnings), warnings


def test_default_plan_warns_nothing():
    warnings = []
    _plan([], warnings)
    assert warnings == []


# ---- the value rules themselves (pure) ------------------------------------------------------------------------
@pytest.mark.parametrize("rule,value,ok", [
    (ArgRule(kind="int", bounds={"ge": 1}), 1, True),
    (ArgRule(kind="int", bounds={"ge": 1}), 0, False),
    (ArgRule(kind="int"), True, False),
    (ArgRule(kind="int", human=True), "2K", True),
    (ArgRule(kind="int", human=True), "lots", False),
    (ArgRule(kind="float", bounds={"gt": 0, "le": 1}), 1, True),
    (ArgRule(kind="float", bounds={"gt": 0, "le": 1}), 0.0, False),
    (ArgRule(kind="str", choices=("auto", "fp8")), "fp8", True),
    (ArgRule(kind="str", choices=("auto", "fp8")), "fp9", False),
    (ArgRule(kind="str"), None, False),
    (ArgRule(kind="str", nullable=True), None, True),
    (ArgRule(kind="json"), {"a": 1}, True),
    (ArgRule(kind="json"), '{"a": 1}', True),
    (ArgRule(kind="json"), 3, False),
    (ArgRule(kind="int", many=True), [1, 2], True),
    (ArgRule(kind="int", many=True), 1, False),
])
def test_value_rule(rule, value, ok):
    assert (value_problem(rule, value) is None) == ok


def test_grid_values_follow_vllm_rules_too():
    from runner.plan.engine_args import EngineArgSpec
    from runner.plan.validate import check_engine_arg_rules

    spec = EngineArgSpec(vllm_version="x", rules={"spec_method": ArgRule(kind="str", choices=("mtp", "ngram")),
                                                   "spec_tokens": ArgRule(kind="int", bounds={"ge": 1})})
    errors = check_engine_arg_rules(spec=spec, engine_args={}, engine_axes={},
                                    grid={"spec_method": ["off", "mtp", "suffix"], "num_speculative_tokens": [2]})
    assert len(errors) == 1 and "sweep.grid.spec_method=suffix is not one of vLLM's values" in errors[0], errors


def test_labels_name_every_difference_and_nothing_shared():
    from runner.spec_arm import SpecArm
    from runner.labels import engine_labels
    from runner.schema import EngineSettings

    base = dict(model="m", max_model_len=1024)
    labels = engine_labels([
        EngineSettings(**base, engine_args_json='{"kv_cache_dtype": "auto", "seed": 0}'),
        EngineSettings(**base, engine_args_json='{"kv_cache_dtype": "fp8", "seed": 0}'),
        EngineSettings(**base, spec_method="mtp", num_speculative_tokens=2, enable_prefix_caching=False,
                       engine_args_json='{"kv_cache_dtype": "fp8", "seed": 0}'),
    ])
    assert labels == ["off pc=on kv_cache_dtype=auto", "off pc=on kv_cache_dtype=fp8",
                      "mtp:2 pc=off kv_cache_dtype=fp8"]
    assert len(set(labels)) == 3
    assert SpecArm(method="ngram", k=3).label == "ngram:3" and SpecArm(method="off", k=2).label == "off"
    assert SpecArm.parse("mtp:2") == SpecArm(method="mtp", k=2) and SpecArm.parse("off") == SpecArm.of(False)
    assert speculative_config(SpecArm(method="ngram", k=3), extra={"prompt_lookup_max": 4}) == {
        "prompt_lookup_min": 2, "prompt_lookup_max": 4, "method": "ngram", "num_speculative_tokens": 3}
    assert speculative_config(SpecArm.of(None, 0)) is None


def test_make_plan_raises_plan_error_not_a_traceback():
    from runner.config.checks import ConfigError

    with pytest.raises(ConfigError):
        _plan(["sweep.repeats=abc"])
