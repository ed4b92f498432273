"""The README's override forms through the real CLI on real CPU engines."""
from __future__ import annotations

import pytest

from runner.sinks.parquet import read_frame

from tests.support.cli import run_cli

pytestmark = pytest.mark.engine


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
