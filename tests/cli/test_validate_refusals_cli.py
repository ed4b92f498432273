"""Bad input through `python -m runner` itself: refused before anything starts, with its fix and no traceback; a
run folder held by another command."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.sinks.run_folder import LOCK_NAME, LockHolder, hold_run_folder

from tests.support.cli import ROOT, run_cli
from tests.support.malformed import CLI_ONLY, INPUTS, MALFORMED, REFUSED, with_inputs, write_inputs


# Through the real CLI with dry_run=false: exit 2, the message on stderr, no engine, no results.
CLI_CASES = [
    (["sweep.grid.concurrency=[0]"], "fix: sweep.grid.concurrency="),
    (["sweep.grdi.concurrency=[1]"], "fix: sweep.grid.concurrency=[1]"),
    (["workload=[nope]"], "fix: workload=[decode]"),
    (["+engine.args.not_an_engine_arg=1"], "fix: remove or rename engine.args.not_an_engine_arg"),
    (["spec.ngram.prompt_lookup_max=-1"], "fix: ++spec.ngram.prompt_lookup_max=1"),
    (["run=../escape"], "fix: run=escape"),
    (["cluster.address=notahost:99999"], "fix: cluster.address=notahost:6379"),
]


@pytest.mark.parametrize("overrides,fix", CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_cli_refuses_before_anything_starts(tmp_path, overrides, fix, warm_cli):
    proc = warm_cli("dry_run=false", "tracking=none", "run=bad", *overrides, output_root=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert fix in proc.stderr
    assert "sweep '" not in proc.stdout  # the line printed once execution begins
    assert not list(tmp_path.rglob("*.parquet"))
    assert not list(tmp_path.rglob("logs"))
    assert "Traceback" not in proc.stderr


def test_an_output_root_that_cannot_be_written_is_a_message(warm_cli):
    proc = warm_cli("dry_run=false", "tracking=none", output_root=Path("/proc/nope"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == ("error: output_root='/proc/nope' cannot be written: No such file or directory "
                                   "(fix: output_root=<a folder you can write>, e.g. output_root=outputs)")


def _argv(overrides: list[str], output_root: Path) -> list[str]:
    """A dry run's arguments with these overrides (and the defaults they do not set)."""
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    defaults = [d for d in ("dry_run=true", "tracking=none", "run=bad", f"output_root={output_root}")
                if d.split("=", 1)[0] not in keys]
    return [*defaults, *overrides]


def test_no_malformed_setting_reaches_the_terminal_as_a_traceback(tmp_path):
    """Every malformed setting of the test set through the CLI's entry point (one interpreter for all: see
    tests/support/cli_batch.py): exit 2, its fix on stderr, no traceback, nothing written outside output_root."""
    inputs = write_inputs(tmp_path / "inputs")
    cases = [with_inputs(c, inputs) for c in MALFORMED + REFUSED + INPUTS + CLI_ONLY]
    argvs = [_argv(overrides, tmp_path / f"out-{i}") for i, (overrides, _, _) in enumerate(cases)]
    proc = subprocess.run([sys.executable, "-m", "tests.support.cli_batch"], input=json.dumps(argvs), cwd=ROOT,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    failures = [f"{' '.join(overrides)}: exit {r['code']}\n{r['stderr'][-1500:]}"
                for (overrides, _, fix), r in zip(cases, results)
                if r["code"] != 2 or "Traceback" in r["stderr"] or fix not in r["stderr"]]
    assert len(results) == len(cases) >= 80
    assert not failures, "\n\n".join(failures)
    # run=../../../tmp/escape would have been <output_root>/demo/../../../tmp/escape; sweep.name=a/b <output_root>/a
    assert not (tmp_path.parent / "tmp" / "escape").exists()
    assert not [p for p in tmp_path.glob("out-*/*") if p.name != "demo"]


def test_a_second_command_on_a_held_run_is_refused_naming_the_holder(tmp_path, warm_cli):
    run_dir = tmp_path / "quick" / "held"  # run_cli builds on sweep=quick
    run_dir.mkdir(parents=True)
    with hold_run_folder(run_dir, say=pytest.fail) as me:
        proc = warm_cli("dry_run=true", "tracking=none", "run=held", output_root=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"run folder {run_dir} is in use by another command: pid {me.pid} on {me.host}" in proc.stderr
    assert "Traceback" not in proc.stderr and not (run_dir / ".hydra").exists()  # refused before Hydra wrote
    left = LockHolder(host=me.host, pid=2**22 + 1, started="2026-01-01T00:00:00+0000")
    (run_dir / LOCK_NAME).write_text(json.dumps(vars(left)))
    proc = warm_cli("dry_run=true", "tracking=none", "run=held", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"note: taking over the lock of {run_dir} left by pid {left.pid} on {left.host}" in proc.stderr
    assert (run_dir / LOCK_NAME).read_text() == ""


def test_a_refusal_on_a_first_use_of_vllm_does_not_wait_for_its_rules(tmp_path):
    """Bad input that needs no vLLM rules is refused before the rules are read on a fresh cache (else the process
    would wait for vLLM's import to finish before it exits)."""
    proc = run_cli("dry_run=false", "tracking=none", "run=bad", "sweep.grid.concurrency=[0]", output_root=tmp_path,
                   check=False, timeout=300, env={"RUNNER_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 2 and "fix: sweep.grid.concurrency=" in proc.stderr
    assert not list((tmp_path / "cache").rglob("*.json"))
