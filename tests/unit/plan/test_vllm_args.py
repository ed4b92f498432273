"""runner.plan.vllm_args: each engine's vLLM arguments, built once by the plan; the runner's keys are the builder's;
what the recommendation reads back is what ran, as a deployment takes it."""
from __future__ import annotations

import json

import pytest

from runner.config.sections import ModelSection, run_config
from runner.plan.grid import PlanError, build_plan
from runner.plan.validate import validate
from runner.plan.vllm_args import (HOSTING, OWNED, PER_REQUEST_METRICS, RUNNER_KEYS, SHORTCUTS, Target, VllmArgs,
                                   deployment, vllm_args)
from runner.schema import EngineSettings

PLAIN = Target(cuda=False, per_request_metrics=False)


def _config(**kw):
    return run_config(sweep_name="t", model="tiny-mtp", workloads={"decode": {}}, **{
        "grid": {"spec_method": ["off", "mtp"], "num_speculative_tokens": [2], "max_model_len": [1024]}, **kw})


def test_every_engine_of_the_plan_carries_its_complete_arguments():
    plan = build_plan(_config(engine_args={"enforce_eager": True}))
    by_arm = {e.settings.spec.label: e for e in plan.engines}
    off, mtp = by_arm["off"].vllm_args.as_dict(), by_arm["mtp:2"].vllm_args.as_dict()
    for args, engine in ((off, by_arm["off"]), (mtp, by_arm["mtp:2"])):
        s = engine.settings
        assert (args["max_model_len"], args["gpu_memory_utilization"], args["enable_prefix_caching"],
                args["tensor_parallel_size"]) == (s.max_model_len, s.gpu_memory_utilization,
                                                  s.enable_prefix_caching, s.tensor_parallel_size)
        assert args["enforce_eager"] is True and args["disable_log_stats"] is False
    assert "speculative_config" not in off
    assert mtp["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2}


def test_the_runners_keys_are_the_builders_keys():
    """RUNNER_KEYS (what validation refuses in engine.args) is what the builder sets on its own."""
    settings = EngineSettings(model="m", spec_method="mtp", num_speculative_tokens=2)
    built = vllm_args(settings=settings, engine_args={}, spec_extra={}, model=ModelSection(name="m"), target=PLAIN)
    assert set(built.as_dict()) == set(RUNNER_KEYS)
    assert set(OWNED) == set(RUNNER_KEYS) | set(SHORTCUTS)


@pytest.mark.parametrize("key", sorted(RUNNER_KEYS))
def test_each_runner_key_passed_through_is_refused_naming_the_fix(key):
    with pytest.raises(PlanError, match=f"engine.args.{key} is set by the runner.*fix: remove engine.args.{key}; use"):
        validate(_config(engine_args={key: 1}))


def test_what_the_installed_vllm_and_the_device_need_is_added_and_recorded():
    settings = EngineSettings(model="m", spec_method="mtp", num_speculative_tokens=3, spec_schedule="[[1,1,3],[2,8,1]]")
    model = ModelSection(name="m", path="/models/m")
    cpu = vllm_args(settings=settings, engine_args={}, spec_extra={}, model=model, target=PLAIN)
    assert cpu.added_json is None and PER_REQUEST_METRICS not in cpu.as_dict()
    cuda = vllm_args(settings=settings, engine_args={PER_REQUEST_METRICS: "none"}, spec_extra={}, model=model,
                     target=Target(cuda=True, per_request_metrics=True))
    args = cuda.as_dict()
    assert args["compilation_config"] == {"cudagraph_mode": "PIECEWISE"}
    assert json.loads(cuda.added_json) == {"compilation_config": {"cudagraph_mode": "PIECEWISE"}}
    assert args[PER_REQUEST_METRICS] == "none"  # the user's choice stands
    assert args["speculative_config"]["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 8, 1]]


def test_the_node_puts_in_the_model_folder():
    settings = EngineSettings(model="tiny-mtp")
    built = vllm_args(settings=settings, engine_args={}, spec_extra={},
                      model=ModelSection(name="tiny-mtp", builtin="tiny_mtp", weights="dummy"), target=PLAIN)
    assert built.as_dict()["load_format"] == "dummy"
    here = built.located(path="/cache/tiny", tokenizer=None, load_format="dummy").as_dict()
    assert (here["model"], here["tokenizer"], here["load_format"]) == ("/cache/tiny", "/cache/tiny", "dummy")


def test_a_start_completes_the_arguments_once_and_the_users_pass_through_wins():
    one, two = VllmArgs.of({"tensor_parallel_size": 1}), VllmArgs.of({"tensor_parallel_size": 2})
    assert one.for_start(sleep_mode=False) is one and not one.sleep_mode
    assert two.for_start(sleep_mode=False).as_dict() == {"tensor_parallel_size": 2,
                                                         "distributed_executor_backend": "mp"}
    slept = one.for_start(sleep_mode=True)
    assert slept.as_dict() == {"tensor_parallel_size": 1, "enable_sleep_mode": True} and slept.sleep_mode
    assert slept.for_start(sleep_mode=True) is slept  # complete already
    theirs = VllmArgs.of({"enable_sleep_mode": False, "distributed_executor_backend": "ray",
                          "tensor_parallel_size": 2}, added={"x": 1})
    assert theirs.for_start(sleep_mode=True) is theirs and not theirs.sleep_mode


def test_a_deployment_leaves_out_what_the_runner_added_to_host_and_measure():
    ran = {"model": "/cache/tiny", "tokenizer": "/cache/tiny", "load_format": "auto", "max_model_len": 1024,
           "speculative_config": {"method": "mtp", "num_speculative_tokens": 2}, "enable_prefix_caching": True,
           "gpu_memory_utilization": 0.9, "tensor_parallel_size": 1, "enforce_eager": True, **HOSTING}
    out = deployment(ran, model="/models/m")
    assert list(out) == ["model", "speculative_config", "enable_prefix_caching", "gpu_memory_utilization",
                         "max_model_len", "tensor_parallel_size", "enforce_eager"]
    assert out["model"] == "/models/m"
    assert deployment({**ran, "tokenizer": "/tok", "enable_sleep_mode": False})["tokenizer"] == "/tok"
    assert deployment({**ran, "enable_sleep_mode": False})["enable_sleep_mode"] is False  # the user's, not ours
