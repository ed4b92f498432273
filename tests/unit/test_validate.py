"""Bad input is refused before anything starts, each refusal naming the override that fixes it.

The cases go through the same functions the CLI calls (override check, then make_plan on the composed config);
a few go through `python -m runner` itself with dry_run=false in tests/cli/test_validate.py.
"""
from __future__ import annotations

import pytest
from runner.cli import CONF_DIR
from runner.config.overrides import check_overrides

from tests.support.plans import plan_error


MALFORMED = [
    # (overrides, what the message must say, the fix it must name)
    (["sweep.grid.spec_method=[off,medusa2]"], "unknown speculative method 'medusa2'", "fix: sweep.grid.spec_method="),
    (["sweep.grid.num_speculative_tokens=[0]"], "num_speculative_tokens=0 is outside 1..8", "fix: sweep.grid.num_speculative_tokens="),
    (["sweep.grid.num_speculative_tokens=[9]"], "num_speculative_tokens=9 is outside 1..8", "fix: sweep.grid.num_speculative_tokens="),
    (["sweep.grid.num_speculative_tokens=[1.5]"], "num_speculative_tokens=1.5", "fix: sweep.grid.num_speculative_tokens="),
    (["sweep.grid.concurrency=[0]"], "concurrency=0 must be an integer ≥ 1", "fix: sweep.grid.concurrency="),
    (["sweep.grid.concurrency=[4,-2]"], "concurrency=-2 must be an integer ≥ 1", "fix: sweep.grid.concurrency="),
    (["sweep.grid.gpu_memory_utilization=[0]"], "gpu_memory_utilization=0 is outside (0, 1]", "fix: sweep.grid.gpu_memory_utilization="),
    (["sweep.grid.gpu_memory_utilization=[1.5]"], "gpu_memory_utilization=1.5 is outside (0, 1]", "fix: sweep.grid.gpu_memory_utilization="),
    (["sweep.grid.max_model_len=[65536]"], "max_model_len=65536 is above the model's limit 32768", "fix: sweep.grid.max_model_len=[32768]"),
    (["model=hf", "model.path=/nonexistent/model-dir"], "model path '/nonexistent/model-dir' does not exist", "fix: model.path="),
    (["sweep.grid.max_model_len=[256]", "workload.decode.input_len=250"], "needs 314 tokens per sequence", "raise sweep.grid.max_model_len"),
    (["workload=[nope]"], "unknown workload 'nope'; valid: decode", "fix: workload=[decode]"),
    (["sweep.grid.concurrency=[]"], "grid axis 'concurrency' has no values", "fix: sweep.grid.concurrency=[...]"),
    (["sweep.grdi.concurrency=[1]"], "unknown config key 'sweep.grdi'", "fix: sweep.grid.concurrency=[1]"),
    (["engine.args.enforce_eagr=true"], "did you mean 'enforce_eager'", "fix: engine.args.enforce_eager=true"),
    (["execution.trial_timout_s=3"], "unknown config key 'execution.trial_timout_s'", "fix: execution.trial_timeout_s=3"),
    (["+engine.args.not_an_engine_arg=1"], "'not_an_engine_arg' is not a vLLM engine argument", "fix: remove or rename engine.args.not_an_engine_arg"),
    (["+sweep.engine_axes.kv_cache_dtyp=[auto]"], "'kv_cache_dtyp' is not a vLLM engine argument; did you mean 'kv_cache_dtype'", "fix: sweep.engine_axes.kv_cache_dtype="),
    (["+sweep.engine_axes.kv_cache_memory_bytes=[0]"], "kv_cache_memory_bytes=0 must be a positive integer", "fix: sweep.engine_axes.kv_cache_memory_bytes="),
    (["+sweep.grid.batch_size=[1]"], "unknown grid axis 'batch_size'", "fix: remove sweep.grid.batch_size"),
    (["sweep.grid.enable_prefix_caching=[maybe]"], "enable_prefix_caching='maybe' must be true or false", "fix: sweep.grid.enable_prefix_caching="),
    (["workload.decode.output_len=0"], "output_len=0 must be ≥ 1", "fix: workload.decode.output_len="),
    (["+workload.decode.outptu_len=5"], "has no parameter 'outptu_len'", "fix: remove or rename workload.decode.outptu_len"),
    (["execution.trial_timeout_s=0"], "execution.trial_timeout_s=0 must be a number of seconds > 0", "fix: execution.trial_timeout_s="),
    (["execution.max_trial_retries=-1"], "execution.max_trial_retries=-1 must be an integer ≥ 0", "fix: execution.max_trial_retries=1"),
    (["cluster.cpu_engine_slots=0"], "cluster.cpu_engine_slots=0 must be an integer ≥ 1", "fix: cluster.cpu_engine_slots=1"),
    (["cluster.address=nowhere"], "cluster.address='nowhere' must be auto or HOST:PORT", "fix: cluster.address="),
    (["engine.cpu_kvcache_space_gib=0.5"], "whole number of GiB", "sweep.engine_axes.kv_cache_memory_bytes"),
    (["sweep.repeats=0"], "sweep.repeats=0 must be an integer ≥ 1", "fix: sweep.repeats=1"),
    (["model=nope"], "unknown model option 'nope'; valid: hf, mimo_7b_dummy, tiny_mtp", "fix: model="),
    (["sweep.grid.concurrency=[1"], "cannot parse override 'sweep.grid.concurrency=[1'", "fix: key=value"),
    (["+workload.decode.concurrency=[0]"], "concurrency=0 must be an integer ≥ 1", "fix: workload.decode.concurrency="),
]


@pytest.mark.parametrize("overrides,message,fix", MALFORMED, ids=[" ".join(m[0]) for m in MALFORMED])
def test_malformed_config_is_refused_with_its_fix(overrides, message, fix):
    error = plan_error(overrides)
    assert message in error, error
    assert fix in error, error


def test_the_default_config_is_valid():
    assert plan_error([]) == ""


def test_every_problem_is_listed_not_just_the_first():
    error = plan_error(["sweep.grid.concurrency=[0]", "sweep.grid.gpu_memory_utilization=[2]"])
    assert "concurrency=0" in error and "gpu_memory_utilization=2" in error


def test_several_typos_are_all_named():
    errors = check_overrides(["sweep.grdi.concurrency=[1]", "cluster.cpu_engine_slot=2"], config_dir=CONF_DIR)
    assert len(errors) == 2
    assert "fix: cluster.cpu_engine_slots=2" in errors[1]
