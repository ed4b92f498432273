"""docs/reference.md's override forms through the real CLI (`python -m runner ... dry_run=true`): accepted, and the
plan tells the engines apart. No engine starts; each case spawns the CLI, so they are few. The same forms on
real engines are in tests/engine/test_validate_cli_engine.py."""
from __future__ import annotations

import pytest


FORMS = [
    (["sweep.engine_axes={kv_cache_dtype:[auto,fp8]}", "sweep.grid.spec_method=[off]"],
     ["off kv_cache_dtype=auto:", "off kv_cache_dtype=fp8:"]),
    (["sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]", "sweep.race=true",
      "sweep.repeats=2"],
     [" off:", " mtp:2:"]),
]


@pytest.mark.parametrize("overrides,labels", FORMS, ids=[" ".join(f[0]) for f in FORMS])
def test_documented_form_runs_as_a_dry_run(tmp_path, overrides, labels, warm_cli):
    proc = warm_cli("dry_run=true", "tracking=none", "run=forms", *overrides, output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in labels:
        assert label in proc.stdout, proc.stdout[-3000:]
    assert not list(tmp_path.rglob("*.parquet"))


def test_engine_value_refused_through_the_cli(tmp_path, warm_cli):
    proc = warm_cli("dry_run=true", "tracking=none", "run=bad", "sweep.engine_axes={kv_cache_dtype:[auto,fp9]}",
                    output_root=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "kv_cache_dtype=fp9 is not one of vLLM's values" in proc.stderr
    assert "fix: sweep.engine_axes.kv_cache_dtype=[auto]" in proc.stderr
