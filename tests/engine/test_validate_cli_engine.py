"""docs/reference.md's override forms through the real CLI on real CPU engines (the arms' dict form: the session's
small_sweep, tests/conftest.py); one command per run folder; vLLM's rules read on a first use."""
from __future__ import annotations

import os
import signal
import time

import pytest

from runner.sinks.parquet import read_frame
from runner.sinks.run_folder import LOCK_NAME, LockHolder

from tests.support.cli import run_cli, session_processes, start_cli, wait_until_gone

pytestmark = pytest.mark.engine


def _cpu_has_fp8_kv() -> bool:
    text = open("/proc/cpuinfo").read()
    return "avx512" in text or "amx" in text


# One trial on the embedded model (dummy weights: no training needed), nothing else.
ONE_TRIAL = ["run=held", "sweep.name=lock", "tracking=none", "report=false", "model.weights=dummy",
             "model.load_format=dummy", "sweep.grid.spec_method=[off]", "sweep.grid.concurrency=[1]",
             "sweep.grid.max_model_len=[256]", "workload.decode.input_len=16", "workload.decode.output_len=4"]


# The engine axes in docs/reference.md's dict form: FP8 KV beside the default, so that the value is seen to reach vLLM.
LOCKED = [*ONE_TRIAL, "sweep.engine_axes={kv_cache_dtype:[auto,fp8]}"]


@pytest.mark.engine
def test_one_command_per_run_folder_and_a_killed_holder_is_taken_over(tmp_path):
    """Two commands on one run started together: one runs, the other is refused naming it. The one that runs is
    killed with SIGKILL once it has begun; the same command again takes its lock over, says so, and runs the trials:
    the engine axes' dict form on real engines (FP8 KV runs where the CPU has AVX-512 or AMX; elsewhere vLLM
    refuses it, and the refusal is a result with vLLM's own reason)."""
    run_dir = tmp_path / "lock" / "held"
    first, second = start_cli(*LOCKED, output_root=tmp_path), start_cli(*LOCKED, output_root=tmp_path)
    deadline = time.monotonic() + 300
    while first.poll() is None and second.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    refused, holder = (first, second) if first.poll() is not None else (second, first)
    _, stderr = refused.communicate(timeout=60)
    assert refused.returncode == 2, stderr[-3000:]
    assert f"run folder {run_dir} is in use by another command: pid {holder.pid} on " in stderr, stderr[-3000:]
    assert "Traceback" not in stderr
    while not (run_dir / "config.yaml").exists() and holder.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)  # config.yaml is written once the sweep has begun
    assert holder.poll() is None, holder.communicate()[1][-3000:]
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=60)
    for line in session_processes(holder.pid):  # what it started (Ray) dies with it, as a terminal's job would
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert wait_until_gone(holder.pid) == []
    assert LockHolder.parse((run_dir / LOCK_NAME).read_text()).pid == holder.pid  # left behind, not released

    proc = run_cli(*LOCKED, output_root=tmp_path)
    assert f"note: taking over the lock of {run_dir} left by pid {holder.pid} on " in proc.stderr, proc.stderr[-3000:]
    assert (run_dir / LOCK_NAME).read_text() == ""
    engines = read_frame(run_dir, "engines")
    fp8 = engines.engine_args_json.str.contains('"fp8"')
    assert sorted(fp8) == [False, True]
    trials = read_frame(run_dir, "trials").merge(engines[["engine_id"]][~fp8], on="engine_id")
    assert len(trials) == 1 and (trials.status == "ok").all() and (engines[~fp8].status == "ok").all()
    if _cpu_has_fp8_kv():
        assert (engines[fp8].status == "ok").all()
    else:  # vLLM's CPU build: FP8 KV needs AVX-512 or AMX; the refusal is a result with vLLM's own reason
        assert (engines[fp8].status == "failed").all() and (engines[fp8].failure_kind == "not_supported_here").all()
        assert engines[fp8].failure_reason.str.contains("FP8 KV cache on CPU requires").all()


@pytest.mark.engine
def test_first_use_of_vllm_checks_its_rules_before_any_engine_starts(tmp_path):
    """A fresh cache: vLLM's engine-argument rules are read beside Ray's start and the first actor's imports; a
    value vLLM refuses still exits 2 naming the fix, with no engine loaded and nothing left running."""
    proc = start_cli(*ONE_TRIAL, "sweep.engine_axes={kv_cache_dtype:[auto,fp9]}", output_root=tmp_path,
                     env={"RUNNER_CACHE_DIR": str(tmp_path / "cache")})
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 2, stderr[-3000:]
    assert "kv_cache_dtype=fp9 is not one of vLLM's values" in stderr
    assert "fix: sweep.engine_axes.kv_cache_dtype=[auto]" in stderr
    assert "start-up:" in stdout  # Ray had started: the check ran where the first engine would have loaded
    assert not list((tmp_path / "lock" / "held").glob("engines*"))
    assert wait_until_gone(proc.pid) == []
    assert list((tmp_path / "cache" / "engine-args").glob("*.json"))  # the next command reads them at once
