"""The holder's liveness on a real Ray cluster (the pools' own head; no engine): a detached actor keeps the holder
actor of a command's driver; while that driver runs the holder answers (alive), and once the driver has exited Ray
has ended it (gone), which is what puts a killed command's pooled engines back in the pool."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.support.cli import ROOT

DRIVER = """
import sys
from runner.scheduling.cluster import use_cluster_token
use_cluster_token()  # before Ray reads its config
import logging
import ray
from runner.pool.liveness import CommandHolder, check_holder


class Keeper:
    def __init__(self):
        self.holder = None

    def keep(self, handles):
        self.holder = handles[0]

    async def check(self):
        result = await check_holder(self.holder, timeout_s=30)
        return f"{result.liveness}|{result.reason}"


ray.init(address=sys.argv[1], namespace="holder-test", log_to_driver=False, logging_level=logging.ERROR)
if sys.argv[2] == "first":
    keeper = ray.remote(num_cpus=0)(Keeper).options(name="keeper", lifetime="detached").remote()
    ray.get(keeper.keep.remote([ray.remote(num_cpus=0, max_restarts=0)(CommandHolder).remote()]))
    print(ray.get(keeper.check.remote()))
else:
    keeper = ray.get_actor("keeper")
    print(ray.get(keeper.check.remote()))
    ray.kill(keeper)
"""


def test_a_holder_is_alive_while_its_driver_runs_and_gone_once_it_exited(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    from runner.pool.head import ensure_head, stop_head

    head = ensure_head()
    try:
        answers = []
        for step in ("first", "second"):
            proc = subprocess.run([sys.executable, "-c", DRIVER, head.address, step], cwd=ROOT, capture_output=True,
                                  text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT)})
            assert proc.returncode == 0, proc.stderr[-3000:]
            answers.append(proc.stdout.strip().splitlines()[-1])
    finally:
        stop_head()
    assert answers[0] == "alive|"
    assert answers[1].startswith("gone|holder actor died"), answers
