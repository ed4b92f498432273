"""The pool command's argument checks (pure, no cluster joined): each problem names its fix."""
from __future__ import annotations

import socket

from runner.command.arguments import pool_problems


def test_pool_names_follow_execution_pools_rule():
    assert pool_problems(action="release", names=["default", "exp-2.b"], every=False, address=None) == []
    (problem,) = pool_problems(action="release", names=["../x"], every=False, address=None)
    assert "fix: vllm-sweep pool release x" in problem
    assert "not both" in pool_problems(action="release", names=["a"], every=True, address=None)[0]


def test_an_address_is_checked_for_form_then_for_an_answer():
    assert "must be a number in 1–65535" in pool_problems(action="list", names=[], every=False,
                                                          address="host:70000")[0]
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        from runner.command.arguments import unreachable

        assert "no answer within 0.5 s" in unreachable(f"127.0.0.1:{port}", timeout_s=0.5)
    assert unreachable("auto") is None


def test_the_gcs_call_the_address_probe_makes_is_one_the_installed_ray_serves():
    import importlib.util
    from pathlib import Path

    from runner.command.arguments import GCS_PROBE

    (folder,) = importlib.util.find_spec("ray").submodule_search_locations[:1]
    stubs = Path(folder) / "core" / "generated" / "gcs_service_pb2_grpc.py"
    assert GCS_PROBE.lstrip("/") in stubs.read_text()
