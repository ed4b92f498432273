"""Bad input through `python -m runner` itself with dry_run=false: refused before anything starts, with its fix."""
from __future__ import annotations

import pytest

from tests.support.cli import run_cli


# Through the real CLI with dry_run=false: exit 2, the message on stderr, no engine, no results.
CLI_CASES = [
    (["sweep.grid.concurrency=[0]"], "fix: sweep.grid.concurrency="),
    (["sweep.grdi.concurrency=[1]"], "fix: sweep.grid.concurrency=[1]"),
    (["workload=[nope]"], "fix: workload=[decode]"),
    (["+engine.args.not_an_engine_arg=1"], "fix: remove or rename engine.args.not_an_engine_arg"),
]


@pytest.mark.parametrize("overrides,fix", CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_cli_refuses_before_anything_starts(tmp_path, overrides, fix):
    proc = run_cli("dry_run=false", "tracking=none", "run=bad", *overrides, output_root=tmp_path, check=False,
                   timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert fix in proc.stderr
    assert "sweep '" not in proc.stdout  # the line printed once execution begins
    assert not list(tmp_path.rglob("*.parquet"))
    assert not list(tmp_path.rglob("logs"))
