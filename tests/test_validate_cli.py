"""The README's override forms through the real CLI (`python -m runner ... dry_run=true`): accepted, and the
plan tells the engines apart. No engine starts; each case spawns the CLI, so they are few."""
from __future__ import annotations

import pytest

from runner.sinks.parquet import read_frame

from conftest import run_cli

FORMS = [
    (["sweep.engine_axes={kv_cache_dtype:[auto,fp8]}", "sweep.grid.spec_method=[off]"],
     ["off kv_cache_dtype=auto:", "off kv_cache_dtype=fp8:"]),
    (["sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]", "sweep.race=true",
      "sweep.repeats=2"],
     [" off:", " mtp:2:"]),
]


@pytest.mark.parametrize("overrides,labels", FORMS, ids=[" ".join(f[0]) for f in FORMS])
def test_documented_form_runs_as_a_dry_run(tmp_path, overrides, labels):
    proc = run_cli("dry_run=true", "tracking=none", "run=forms", *overrides, output_root=tmp_path, check=False,
                   timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in labels:
        assert label in proc.stdout, proc.stdout[-3000:]
    assert not list(tmp_path.rglob("*.parquet"))


def test_engine_value_refused_through_the_cli(tmp_path):
    proc = run_cli("dry_run=true", "tracking=none", "run=bad", "sweep.engine_axes={kv_cache_dtype:[auto,fp9]}",
                   output_root=tmp_path, check=False, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "kv_cache_dtype=fp9 is not one of vLLM's values" in proc.stderr
    assert "fix: sweep.engine_axes.kv_cache_dtype=[auto]" in proc.stderr


@pytest.mark.engine
def test_documented_forms_run_on_real_engines(tmp_path):
    """The README's dict forms for engine axes and explicit arms, together, on real CPU engines."""
    
    run_cli("run=real", "sweep.name=forms", "tracking=none", "report=false",
            "sweep.engine_axes={kv_cache_dtype:[auto,fp8]}",
            "sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]",
            "sweep.grid.concurrency=[2]", "sweep.grid.max_model_len=[512]",
            "workload.decode.input_len=64", "workload.decode.output_len=16", output_root=tmp_path)
    engines = read_frame(tmp_path / "forms" / "real", "engines")
    assert len(engines) == 4
    fp8 = engines.engine_args_json.str.contains('"fp8"')
    assert (engines[~fp8].status == "ok").all()
    if _cpu_has_fp8_kv():
        assert (engines[fp8].status == "ok").all()
    else:  # vLLM's CPU build: FP8 KV needs AVX-512 or AMX; the refusal is a result with vLLM's own reason
        assert (engines[fp8].status == "failed").all() and (engines[fp8].failure_kind == "not_supported_here").all()
        assert engines[fp8].failure_reason.str.contains("FP8 KV cache on CPU requires").all()
    assert sorted(engines.engine_args_json.str.contains('"fp8"')) == [False, False, True, True]
    assert sorted(engines.spec_method) == ["mtp", "mtp", "off", "off"]


def _cpu_has_fp8_kv() -> bool:
    text = open("/proc/cpuinfo").read()
    return "avx512" in text or "amx" in text
