"""Shared fixtures. Engine loads dominate test time: each sweep fixture here runs once per session.

Layout: unit/ (pure logic; spawns nothing, enforced by unit/conftest.py), cli/ (runs `python -m runner ...`
or the report CLI, no engine), engine/ (real vLLM engines; every test there is marked `engine`).
Helpers that are not fixtures live in tests/support/.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_cli

HERE = Path(__file__).resolve().parent
FOLDER_MARKERS = {HERE / "engine": "engine", HERE / "cli": "cli"}  # every test in the folder carries the marker


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        parents = Path(item.path).resolve().parents
        for folder, marker in FOLDER_MARKERS.items():
            if folder in parents:
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session", autouse=True)
def engine_arg_rules():
    """vLLM's engine-argument rules in the cache before any test runs the CLI, so that a refusal test sees them
    checked at once on a fresh machine too (a first use reads them beside Ray's start: one test covers that)."""
    from runner.plan.engine_args import load_spec

    load_spec()


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory):
    """A small real sweep (spec off vs MTP k=2, concurrency 1 and 2) on the embedded model, run once. Its arms are
    in docs/reference.md's dict form (the engine axes' on real engines: tests/engine/test_validate_cli_engine.py)."""
    out = tmp_path_factory.mktemp("small_sweep")
    proc = run_cli(
        "run=e2e", "sweep.name=small",
        "sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]",
        "sweep.grid.concurrency=[1,2]", "sweep.grid.max_model_len=[512]",
        "workload.decode.input_len=64", "workload.decode.output_len=24",
        output_root=out,
    )
    return out / "small" / "e2e", proc


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """W&B offline, its config, cache, data and artifact folders inside the test's own folder."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
