"""Failures are results: real engines, real faults, checked through the Parquet files.

Faults come from the KV-cache size itself (vLLM refuses the engine) and from the RUNNER_FAULTS
test hook (runner/execution/failures.py): the actor SIGKILLs itself mid-trial, or a trial hangs.
One sweep, run once: `faulty` (engine loads: 4 + 1 refused). Ctrl-C, the resume and the rerun with nothing to do:
tests/engine/test_stops.py.
The pure scheduling policies are in tests/unit/scheduling/, the fault hook in tests/unit/test_fault_hook.py, the
crash-mid-write check in tests/cli/test_faults_cli.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from runner.sinks.parquet import read_frame

from tests.support.cli import start_cli, wait_until_gone

pytestmark = pytest.mark.engine

# The embedded model without its training (orchestration does not need sensible tokens).
SMALL = ["model.weights=dummy", "model.load_format=dummy", "tracking=none", "report=false",
         "sweep.grid.spec_method=[mtp]", "sweep.grid.num_speculative_tokens=[1]",
         "workload.decode.input_len=32", "workload.decode.output_len=8"]
KV_BYTES = 8 * 1024**2  # per engine, through vLLM's kv_cache_memory_bytes (VLLM_CPU_KVCACHE_SPACE is whole GiB)
FAULTS = [{"fault": "kill", "concurrency": 2},                     # killed once: the retry succeeds
          {"fault": "kill", "concurrency": 3, "attempts": [1, 2]},  # killed on every attempt: recorded failed
          {"fault": "hang", "concurrency": 4}]                      # never returns: ends at the trial timeout
TRIAL_TIMEOUT_S = 20


def kv_bytes_per_token() -> int:
    """The embedded model's KV bytes per token under MTP, from its own config.json."""
    from runner.config.sections import ModelSection
    from runner.models.source import resolve_model_source

    path = resolve_model_source(ModelSection(name="tiny-mtp-dummy", builtin="tiny_mtp", weights="dummy",
                                             load_format="dummy")).path
    c = json.loads((Path(path) / "config.json").read_text())
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    layers = c["num_hidden_layers"] + c.get("num_nextn_predict_layers", 1)
    return 2 * layers * c["num_key_value_heads"] * head_dim * 2


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """Engine 512 fits its 16 MiB KV; engine 32768 does not. Trials c=1..4 meet the faults above."""
    out = tmp_path_factory.mktemp("faulty")
    proc = start_cli("run=f", "sweep.name=faulty", *SMALL, "sweep.grid.max_model_len=[512,32768]",
                     f"+sweep.engine_axes.kv_cache_memory_bytes=[{KV_BYTES}]", "sweep.grid.concurrency=[1,2,3,4]",
                     "cluster.cpu_engine_slots=2", f"execution.trial_timeout_s={TRIAL_TIMEOUT_S}",
                     "execution.max_trial_retries=1", output_root=out,
                     env={"RUNNER_FAULTS": json.dumps(FAULTS)})
    stdout, stderr = proc.communicate(timeout=1500)
    left = wait_until_gone(proc.pid)
    assert proc.returncode == 0, stderr[-4000:]
    run_dir = out / "faulty" / "f"
    return {"run_dir": run_dir, "engines": read_frame(run_dir, "engines"),
            "trials": read_frame(run_dir, "trials"),
            "requests": read_frame(run_dir, "requests"), "stdout": stdout, "left": left}


def _trial(trials: pd.DataFrame, *, max_model_len: int, concurrency: int) -> pd.Series:
    rows = trials[(trials.max_model_len == max_model_len) & (trials.concurrency == concurrency)]
    assert len(rows) == 1
    return rows.iloc[0]


@pytest.mark.engine
def test_kv_cache_too_small_is_recorded_with_its_numbers(faulty):
    engines = faulty["engines"].set_index("max_model_len")
    refused = engines.loc[32768]
    assert refused.status == "failed" and refused.failure_kind == "kv_cache_too_small_for_max_len"
    numbers = json.loads(refused.failure_numbers_json)
    per_token = kv_bytes_per_token()  # 2 (K, V) x layers (body + MTP) x KV heads x head_dim x 2 B (bf16)
    assert numbers["max_model_len"] == 32768
    assert numbers["needed_gib"] == round(32768 * per_token / 1024**3, 2)
    assert numbers["available_gib"] == round(KV_BYTES / 1024**3, 2) < numbers["needed_gib"]
    assert 0.9 * KV_BYTES / per_token <= numbers["estimated_max_len"] <= KV_BYTES / per_token
    assert "GiB KV cache is needed" in refused.failure_reason
    assert engines.loc[512].status == "ok"
    failed = faulty["trials"][faulty["trials"].max_model_len == 32768]
    assert len(failed) == 4 and (failed.failure_kind == "engine_start:kv_cache_too_small_for_max_len").all()


@pytest.mark.engine
def test_killed_actor_is_retried_on_a_fresh_actor(faulty):
    first = _trial(faulty["trials"], max_model_len=512, concurrency=1)
    retried = _trial(faulty["trials"], max_model_len=512, concurrency=2)
    assert first.status == "ok" and first.attempts == 1
    assert retried.status == "ok" and retried.attempts == 2
    requests = faulty["requests"]
    assert len(requests[requests.trial_id == retried.trial_id]) == 2  # the retry's requests, once


@pytest.mark.engine
def test_actor_killed_on_every_attempt_is_recorded_failed_with_the_cause(faulty):
    dead = _trial(faulty["trials"], max_model_len=512, concurrency=3)
    assert dead.status == "failed" and dead.failure_kind == "actor_died" and dead.attempts == 2
    assert "ActorDiedError" in dead.failure_reason or "RayActorError" in dead.failure_reason
    assert not (faulty["requests"].trial_id == dead.trial_id).any()


@pytest.mark.engine
def test_hung_trial_ends_at_the_timeout(faulty):
    hung = _trial(faulty["trials"], max_model_len=512, concurrency=4)
    assert hung.status == "failed" and hung.failure_kind == "timeout"
    assert f"trial_timeout_s={float(TRIAL_TIMEOUT_S)}" in hung.failure_reason


@pytest.mark.engine
def test_faulty_sweep_completes_every_trial_and_leaves_no_process(faulty):
    assert len(faulty["trials"]) == 8 and faulty["trials"].trial_id.is_unique
    assert faulty["left"] == []
    assert "results:" in faulty["stdout"]
