"""What the cluster offers (pure where Ray's resources are given)."""
from __future__ import annotations

from runner.config.sections import ClusterSection
from runner.scheduling.cluster import cluster_capacity


def test_cluster_capacity():
    assert cluster_capacity(cluster=ClusterSection(cpu_engine_slots=2), device="cpu", resources={}).device_units == 2
    gpu = cluster_capacity(cluster=ClusterSection(), device="cuda", resources={"GPU": 8.0})
    assert (gpu.device_units, gpu.max_parallel_engines) == (8, 8)
    assert cluster_capacity(cluster=ClusterSection(max_parallel_engines=3), device="cuda",
                            resources={"GPU": 8}).max_parallel_engines == 3
