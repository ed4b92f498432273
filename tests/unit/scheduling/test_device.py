"""The device policy (pure): what CPU and CUDA lanes do differently, and the Ray options of an actor."""
from __future__ import annotations

from runner.config.execution import Residency
from runner.scheduling.device import CPU, CUDA, lane_share, policy_for
from tests.unit.scheduling.plans import tp_plan


def test_units_and_residency_per_device():
    plan = tp_plan(tps_and_trials=[(1, 1), (2, 1)])
    single, tp2 = plan.engines
    assert (CUDA.units_needed(tp2), CPU.units_needed(tp2)) == (2, 1)
    assert CUDA.may_stay_resident(single, Residency.AUTO) and not CUDA.may_stay_resident(tp2, Residency.AUTO)
    assert CPU.may_stay_resident(tp2, Residency.AUTO)  # an idle CPU engine takes no core
    assert not CPU.may_stay_resident(single, Residency.OFF) and not CUDA.may_stay_resident(single, Residency.OFF)
    assert policy_for("cpu") is CPU and policy_for("cuda") is CUDA


def test_several_actors_share_one_gpu_and_idle_cpu_actors_hold_no_core():
    assert CUDA.actor_resources(width=1, share=lane_share(True)) == {"num_gpus": 0.0625, "num_cpus": 0}
    assert CUDA.actor_resources(width=1, share=lane_share(False)) == {"num_gpus": 0.5, "num_cpus": 0}
    assert CUDA.actor_resources(width=2, share=16) == {"num_gpus": 2, "num_cpus": 0}
    assert CPU.actor_resources(width=1, share=2) == {"num_cpus": 0}
