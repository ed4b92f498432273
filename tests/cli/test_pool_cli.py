"""`vllm-sweep pool ...` with no pool running, and the pool's settings refused before anything starts."""
from __future__ import annotations

import subprocess


def pool(cli, *args: str, cache) -> subprocess.CompletedProcess:
    return cli.argv("pool", *args, env={"RUNNER_CACHE_DIR": str(cache)})


def test_pool_list_with_nothing_running_says_so(tmp_path, warm_cli):
    proc = pool(warm_cli, "list", cache=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no engine pool" in proc.stdout and "execution.keep_engines=true" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_pool_release_needs_a_name_or_all(tmp_path, warm_cli):
    proc = pool(warm_cli, "release", cache=tmp_path)
    assert proc.returncode == 2 and "fix: vllm-sweep pool release default" in proc.stderr
    proc = pool(warm_cli, "release", "--all", cache=tmp_path)
    assert proc.returncode == 0 and "no engine pool" in proc.stdout


def test_a_bad_pool_ttl_is_refused_naming_its_fix(tmp_path, warm_cli):
    for value in ("0", "soon"):
        proc = warm_cli("execution.keep_engines=true", f"execution.pool_ttl_s={value}", "tracking=none",
                        output_root=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "execution.pool_ttl_s" in proc.stderr and "fix: execution.pool_ttl_s=1800" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
