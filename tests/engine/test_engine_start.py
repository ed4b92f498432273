"""The fork server an engine core starts from: the child runs with the parent's environment of the moment it
started (as a spawned one would) and goes when the fork server goes (which goes with its actor)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from runner.config.execution import EngineStart
from runner.vllm import fork_server
from runner.vllm.sleep_pinning import PIN_AHEAD_ENV

pytestmark = pytest.mark.engine


def _report_env_then_wait(path: str) -> None:
    Path(path).write_text(f"{os.environ.get('LATE_SETTING')} {os.environ.get('VLLM_WORKER_MULTIPROC_METHOD')} "
                          f"{os.getpid()}")
    time.sleep(120)


def test_auto_is_the_fork_server_and_an_explicit_method_stays():
    assert EngineStart.AUTO.resolved() is EngineStart.FORKSERVER
    assert EngineStart.SPAWN.resolved() is EngineStart.SPAWN


def test_a_forked_engine_core_carries_the_environment_and_dies_with_its_fork_server(tmp_path, monkeypatch):
    from multiprocessing import forkserver

    monkeypatch.setattr(fork_server, "PRELOAD", ())  # vLLM's import is not what is tested here
    fork_server.warm_fork_server()
    monkeypatch.setenv("LATE_SETTING", "set-after-the-server-started")
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # as vLLM's CPU platform sets it: kept
    out = tmp_path / "child.txt"
    child = fork_server._ForkServerContext().Process(target=_report_env_then_wait, args=(str(out),), daemon=True)
    child.start()
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    late, method, pid = out.read_text().split()
    assert (late, method) == ("set-after-the-server-started", "spawn")
    forkserver._forkserver._stop()  # what an actor's death does to its fork server
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_start_called_while_prepare_still_imports_forks_the_engine_core():
    """The scheduler starts the spare actor's engine as soon as its turn comes, whether or not the spare's
    `prepare` (imports, fork server) has finished; the two calls interleave in the actor and must still give
    a forked engine core (on the H200 a start during prepare fell back to a cold spawn). The engine core runs with
    the sleep's pinning installed, which must leave the load as it was (on CPU vLLM's worker is a process of its
    own, so its wrappers are not reached: tests/unit/vllm/test_sleep_pinning.py)."""
    import ray

    from runner.config.sections import ModelSection, run_config
    from runner.execution.actor import EngineActor
    from runner.scheduling.cluster import connect_ray
    from runner.measurement.records import RunKeys
    from runner.plan.grid import build_plan

    plan = build_plan(run_config(sweep_name="start", model="tiny-mtp", grid={
        "spec_method": ["off"], "max_model_len": [1024], "enable_prefix_caching": [True]},
        workloads={"decode": {}}, engine_args={"enforce_eager": True, "max_num_seqs": 4}))
    connect_ray(address=None)
    try:
        actor = ray.remote(num_cpus=1, max_restarts=0)(EngineActor).remote(
            env={"VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false", PIN_AHEAD_ENV: "1"},
            keys=RunKeys(sweep="start", run_id="r"), engine_start=EngineStart.FORKSERVER.value)
        prepared = actor.prepare.remote()
        started = ray.get(actor.start.remote(engine=plan.engines[0], model=ModelSection(
            name="tiny-mtp", builtin="tiny_mtp", weights="trained", load_format="auto")), timeout=900)
        ray.get(prepared, timeout=60)
        assert started.ok, started.failure_reason
        assert started.columns["engine_start"] == EngineStart.FORKSERVER.value
        # The row records what the engine ran: the plan's arguments as built, with the node's model folder put in.
        ran = json.loads(started.columns["vllm_args_json"])
        planned = plan.engines[0].vllm_args.as_dict()
        assert Path(ran["model"], "config.json").exists() and ran["tokenizer"] == ran["model"]
        assert {k: v for k, v in ran.items() if k not in ("model", "tokenizer")} == {
            k: v for k, v in planned.items() if k not in ("model", "tokenizer")}
        ray.get(actor.shutdown.remote(), timeout=120)
        ray.kill(actor)
    finally:
        ray.shutdown()
