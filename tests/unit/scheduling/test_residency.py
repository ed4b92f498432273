"""Residency (pure): how many engines stay loaded, from the memory an actor reported."""
from __future__ import annotations

from runner.scheduling.device import CPU, CUDA
from runner.scheduling.residency import (MemoryReport, host_allows, host_for_residents, lane_residency,
                                         parallel_cpu_loads, plan_residency)

H200_GIB = 139.8


def test_two_engines_at_0_9_stay_resident_on_an_h200():
    plan = plan_residency(device="cuda", budgets=[0.9, 0.9], device_total_gib=H200_GIB, host_available_gib=1000)
    assert plan.max_resident == 2


def test_budget_0_985_falls_back_to_load_run_stop():
    # 0.985 × 139.8 = 137.7 GiB: 1.5 GiB left cannot hold an asleep engine's 1.8 GiB plus the next actor.
    plan = plan_residency(device="cuda", budgets=[0.9, 0.985], device_total_gib=H200_GIB, host_available_gib=1000)
    assert plan.max_resident == 1


def test_resident_count_follows_what_asleep_engines_hold():
    # 0.9: 13.98 GiB free - 0.6 GiB context = 13.38 GiB: 7 asleep at 1.8 GiB each, 1 awake.
    assert plan_residency(device="cuda", budgets=[0.9] * 12, device_total_gib=H200_GIB,
                          host_available_gib=1000).max_resident == 8
    assert plan_residency(device="cuda", budgets=[0.9] * 12, device_total_gib=H200_GIB, host_available_gib=1000,
                          asleep_held_gib=7.0).max_resident == 2
    assert plan_residency(device="cuda", budgets=[0.5] * 3, device_total_gib=None,
                          host_available_gib=1000).max_resident == 1  # unknown GPU: nothing resident


def test_cpu_residents_limited_by_host_memory():
    assert plan_residency(device="cpu", budgets=[0.9] * 4, device_total_gib=None, host_available_gib=20,
                          cpu_engine_gib=2.5).max_resident == 4
    assert plan_residency(device="cpu", budgets=[0.9] * 4, device_total_gib=None, host_available_gib=5,
                          cpu_engine_gib=2.5).max_resident == 1
    assert plan_residency(device="cpu", budgets=[0.9], device_total_gib=None, host_available_gib=50).max_resident == 1


def test_a_lane_without_resident_engines_loads_one_at_a_time():
    report = MemoryReport.of({"host_available_gib": 100.0, "unrelated": 1})
    assert lane_residency(policy=CPU, budgets=[0.9] * 3, any_resident=True, report=report, cpu_kv_gib=1.0) == 3
    assert lane_residency(policy=CPU, budgets=[0.9] * 3, any_resident=False, report=report, cpu_kv_gib=1.0) == 1
    assert lane_residency(policy=CUDA, budgets=[0.9] * 3, any_resident=True, report=MemoryReport.of(None),
                          cpu_kv_gib=1.0) == 1  # GPU memory unknown


def test_asleep_weights_must_fit_host_ram_on_cuda_only():
    assert host_allows(policy=CUDA, held_gib=70, host_gib=100) and not host_allows(policy=CUDA, held_gib=90,
                                                                                   host_gib=100)
    assert host_allows(policy=CPU, held_gib=90, host_gib=100)


def test_pooled_engines_host_ram_counts_as_this_commands_own():
    # Four ~15 GiB engines asleep in the pool: the node reports 55 GiB free with their backups taken. Counted once
    # more against that figure, only two would stay resident and the other two would reload every round.
    host = host_for_residents(55.0, claimed_gib=4 * 15.0)
    assert host_allows(policy=CUDA, held_gib=4 * 15.0, host_gib=host)
    assert not host_allows(policy=CUDA, held_gib=3 * 15.0, host_gib=host_for_residents(55.0))
    assert host_for_residents(None, claimed_gib=60.0) == float("inf")


def test_cpu_lanes_load_side_by_side_only_with_cores_to_spare():
    assert parallel_cpu_loads(cores=2, cpus_per_engine=1, lanes=1) == 1
    assert parallel_cpu_loads(cores=16, cpus_per_engine=2, lanes=1) == 4
    assert parallel_cpu_loads(cores=16, cpus_per_engine=2, lanes=4) == 1
