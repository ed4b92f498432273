"""Ray: start or join the cluster, what it offers, one placement-group bundle per CUDA lane."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from runner.scheduling.settings import Capacity


def connect_ray(*, address: Optional[str], namespace: Optional[str] = None) -> None:
    """Starts a local Ray, or joins a running cluster; quiet either way (engine logs go to files). `namespace`:
    where named actors live (an engine pool's)."""
    import logging

    if address:
        use_cluster_token()  # before Ray reads its config
    import ray

    kwargs = dict(log_to_driver=False, logging_level=logging.ERROR, namespace=namespace)
    if address:
        # Remote nodes need the runner's code, not a shared filesystem: ship the package.
        package = str(Path(__file__).resolve().parents[1])
        ray.init(address=address, runtime_env={"py_modules": [package], "excludes": ["__pycache__"]}, **kwargs)
    else:
        # "local", not None: None would join whatever cluster `ray start` last left on this machine.
        ray.init(address="local", include_dashboard=False, **kwargs)


def use_cluster_token(environ: Optional[dict] = None) -> None:
    """`ray start` (Ray ≥ 2.5x) turns token authentication on and leaves the token in ~/.ray/auth_token;
    a driver joining that cluster must say so before Ray reads its config (a retry cannot)."""
    environ = os.environ if environ is None else environ
    if environ.get("RAY_AUTH_MODE"):
        return
    if environ.get("RAY_AUTH_TOKEN") or environ.get("RAY_AUTH_TOKEN_PATH") or \
            Path("~/.ray/auth_token").expanduser().exists():
        environ["RAY_AUTH_MODE"] = "token"


def cluster_capacity(*, cluster, device: str, resources: Optional[dict] = None) -> Capacity:
    """What the cluster offers; `resources` is Ray's cluster_resources() (None: from the running Ray)."""
    if device == "cuda":
        if resources is None:
            import ray

            resources = ray.cluster_resources()
        per_gpu = int(cluster.engines_per_gpu or 1)
        units = max(int(resources.get("GPU", 0)), 1) * per_gpu
    else:
        per_gpu, units = 1, int(cluster.cpu_engine_slots or 1)
    cap = int(cluster.max_parallel_engines or max(units, 1))
    return Capacity(device_units=max(units, 1), max_parallel_engines=cap, engines_per_gpu=per_gpu)


def lane_gpus(width: int, gpus_per_unit: float) -> float:
    """A lane's bundle of GPUs: whole ones, or its share of one."""
    return width if gpus_per_unit >= 1 else round(width * gpus_per_unit, 4)


class LaneBundles:
    """One bundle per lane: resident engines of a lane share its GPU(s), and no other lane's. `gpus_per_unit`: the
    GPUs one device unit is (1/n with cluster.engines_per_gpu=n: n lanes pack onto one GPU)."""

    def __init__(self, *, gpus_per_unit: float = 1.0):
        self.group = None
        self.detached = False
        self.gpus_per_unit = gpus_per_unit

    def reserve(self, *, lanes: int, width: int, timeout_s: float, detached_name: Optional[str] = None) -> list[tuple]:
        """`detached_name`: the group outlives the command (pooled engines live in its bundles) under that name, and
        the next command reuses it; `pool release` removes it."""
        import ray
        from ray.util.placement_group import get_placement_group, placement_group

        bundles = [{"GPU": lane_gpus(width, self.gpus_per_unit), "CPU": 1} for _ in range(lanes)]
        if detached_name:
            try:
                self.group = get_placement_group(detached_name)
            except ValueError:
                self.group = placement_group(bundles, strategy="PACK", name=detached_name, lifetime="detached")
            self.detached = True
        else:
            self.group = placement_group(bundles, strategy="PACK")
        ray.get(self.group.ready(), timeout=timeout_s)
        return [(self.group, i) for i in range(lanes)]

    def release(self) -> None:
        if self.group is None or self.detached:
            return
        try:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.group)
        except Exception:
            pass
        self.group = None


def scheduling_strategy(bundle: tuple):
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(placement_group=bundle[0], placement_group_bundle_index=bundle[1])
