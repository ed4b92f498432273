"""Bad input is refused before anything starts, each refusal naming the override that fixes it.

The cases go through the same functions the CLI calls (override check, then make_plan on the composed config);
a few go through `python -m runner` itself with dry_run=false in tests/cli/test_validate_refusals_cli.py.
"""
from __future__ import annotations

import pytest
from runner.config.store import CONF_DIR
from runner.config.overrides import check_overrides

from tests.support.malformed import MALFORMED
from tests.support.plans import plan_error


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


def test_a_deferred_check_refuses_once_and_unreadable_rules_leave_it_unchecked():
    from concurrent.futures import Future

    from runner.config.checks import ConfigError
    from runner.config.store import load_config
    from runner.plan.deferred_check import DeferredEngineArgCheck

    config = load_config(["tracking=none", "+engine.args.not_an_engine_arg=1"])
    refused = Future()
    refused.set_result({"model", "max_num_seqs"})
    check = DeferredEngineArgCheck(config=config, pending=refused)
    with pytest.raises(ConfigError, match="not_an_engine_arg"):
        check()
    check()  # once
    broken = Future()
    broken.set_exception(RuntimeError("vLLM's import failed"))
    DeferredEngineArgCheck(config=config, pending=broken)()
