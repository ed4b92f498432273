"""cluster.engines_per_gpu (pure): engines side by side on one GPU, each a lane with its share; refused when the
budgets do not fit; every row labelled; the report's caveat."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from runner.config.checks import ConfigError
from runner.config.execution import Residency
from runner.config.sections import ClusterSection, run_config
from runner.measurement.records import RunKeys
from runner.plan.device_share import budget_each, check_device_share
from runner.report.shared_device import shared_device_section
from runner.scheduling.cluster import cluster_capacity, lane_gpus
from runner.scheduling.describe import describe_devices
from runner.scheduling.device import CPU, CUDA
from runner.scheduling.order import lane_steps
from runner.scheduling.race import Race
from runner.scheduling.recorder import Recorder
from runner.scheduling.settings import ExecutionSettings
from tests.unit.scheduling.plans import rounds_plan
from tests.unit.scheduling.test_recorder import Sink


def _check(**kw):
    args = dict(engines_per_gpu=2, device="cuda", budgets=[0.45], tensor_parallel=1, keep_engines=False)
    return check_device_share(**{**args, **kw})


def test_two_budgets_that_fit_pass_and_one_that_does_not_names_the_fix():
    assert _check() == [] and _check(engines_per_gpu=1, budgets=[0.9]) == []
    (error,) = _check(budgets=[0.45, 0.9])
    assert "0.9 × 2 engines per GPU = 1.8" in error and "(fix: sweep.grid.gpu_memory_utilization=[0.45], or" in error
    assert budget_each(3) == 0.3


def test_tp_a_pool_and_cpu_are_refused_with_their_fix():
    assert "(fix: cluster.engines_per_gpu=1, or engine.tensor_parallel_size=1)" in _check(tensor_parallel=2)[0]
    assert "(fix: execution.keep_engines=false)" in _check(keep_engines=True)[0]
    assert "(fix: cluster.engines_per_gpu=1 cluster.cpu_engine_slots=2)" in _check(device="cpu")[0]


def test_engines_per_gpu_is_checked_as_the_cluster_section_is_built():
    with pytest.raises(ConfigError, match=r"cluster.engines_per_gpu=1"):
        ClusterSection(engines_per_gpu=0)


def test_each_gpu_is_two_lanes_of_half_a_gpu():
    capacity = cluster_capacity(cluster=ClusterSection(engines_per_gpu=2), device="cuda", resources={"GPU": 1.0})
    assert (capacity.device_units, capacity.max_parallel_engines, capacity.engines_per_gpu) == (2, 2, 2)
    plan = rounds_plan(engines=2, trials=1, repeats=1)
    lanes = lane_steps(plan, policy=CUDA, units=capacity.device_units, max_parallel=capacity.max_parallel_engines,
                       seed=0)
    assert [[s.engine_id for s in lane] for lane in lanes] == [["e0"], ["e1"]]
    assert lane_gpus(1, 0.5) == 0.5 and lane_gpus(2, 1.0) == 2
    # Ray: a lane's actors (the running one, the next one's) fit in its half of the GPU.
    assert CUDA.actor_resources(width=1, share=2, engines_per_gpu=2) == {"num_gpus": 0.25, "num_cpus": 0}
    assert CUDA.actor_resources(width=1, share=2) == {"num_gpus": 0.5, "num_cpus": 0}
    assert CPU.actor_resources(width=1, share=2, engines_per_gpu=2) == {"num_cpus": 0}
    cpu = cluster_capacity(cluster=ClusterSection(engines_per_gpu=2), device="cpu", resources={})
    assert cpu.engines_per_gpu == 1


def test_settings_turn_residency_off_and_the_dry_run_shows_the_lanes():
    config = run_config(sweep_name="s", model="m", grid={"spec_method": ["off"]}, workloads={"decode": {}})
    config.engine = dataclasses.replace(config.engine, device="cuda")
    config.cluster = ClusterSection(engines_per_gpu=2)
    capacity = cluster_capacity(cluster=config.cluster, device="cuda", resources={"GPU": 1})
    settings = ExecutionSettings.of(config, capacity=capacity)
    assert settings.engines_per_gpu == 2 and settings.resident is Residency.OFF
    lines = describe_devices(rounds_plan(engines=2, trials=1, repeats=1), device="cuda", capacity=capacity,
                             done=set())
    assert lines[0].startswith("devices: 1 GPU(s), 2 engines side by side on each (cluster.engines_per_gpu=2")
    assert "2 lane(s)" in lines[0] and lines[1] == "  lane 0 (1/2 GPU): e0" and lines[2] == "  lane 1 (1/2 GPU): e1"


def test_every_row_says_how_many_engines_shared_its_device():
    plan = rounds_plan(engines=1, trials=1, repeats=1)
    sink = Sink([])
    recorder = Recorder(keys=RunKeys(sweep="s", run_id="r"), sink=sink, engines_on_device=2,
                        race=Race(plan=plan, enabled=False, tie_band=0.02, seed=0))
    recorder.engine_started(plan.engines[0], columns={"load_s": 1.0}, log_file=None, device="cuda")
    recorder.trial_failed(plan.engines[0], plan.trials[0], kind="x", reason="y")
    assert sink.engines[0].engines_on_device == 2 and sink.trials[0].engines_on_device == 2


def test_the_report_warns_that_shared_figures_are_not_speed_figures():
    alone = pd.DataFrame({"engines_on_device": [1, 1]})
    assert shared_device_section(alone) == "" and shared_device_section(pd.DataFrame({"x": [1]})) == ""
    text = shared_device_section(pd.DataFrame({"engines_on_device": [2, 2, 1]}))
    assert "Caveat: engines shared a GPU" in text and "not speed figures" in text and "2 of 3" in text


def test_an_adaptive_study_is_refused_with_its_fix():
    assert "(fix: cluster.engines_per_gpu=1)" in _check(adaptive=True)[0]


def test_the_budgets_checked_are_those_the_engines_run_with():
    from runner.config.store import load_config
    from runner.plan.validate import engine_budgets

    def budgets(*overrides):
        return engine_budgets(load_config(["tracking=none", "engine=gpu", "model=mimo_7b_dummy", "sweep=quick",
                                           *overrides]).sweep)

    assert budgets("sweep.grid.gpu_memory_utilization=[0.4]") == [0.4]
    # An arm that names its budget: the grid's never reaches an engine.
    assert budgets("sweep.grid.gpu_memory_utilization=[0.9]",
                   "sweep.arms=[{spec_method:off,gpu_memory_utilization:0.4},{spec_method:mtp}]") == [0.4, 0.9]
    assert budgets("sweep.grid.gpu_memory_utilization=[0.9]",
                   "sweep.arms=[{spec_method:off,gpu_memory_utilization:0.4}]") == [0.4]
