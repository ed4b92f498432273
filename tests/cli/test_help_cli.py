"""`vllm-sweep --help` (and `-h`, `python -m runner --help`): ours, short, listing the shipped studies only; Hydra's
own flags keep working beside it."""
from __future__ import annotations

import pytest

from tests.support.cli import ROOT

MAX_LINES = 80


@pytest.fixture(scope="module")
def help_out(warm_cli) -> str:
    proc = warm_cli.argv("--help")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_help_is_short_and_lists_the_shipped_studies_only(help_out):
    lines = help_out.splitlines()
    assert len(lines) <= MAX_LINES, len(lines)
    assert "h200_" not in help_out
    shipped = sorted(p.stem for p in (ROOT / "sweeps").glob("*.yaml"))
    for study in shipped:
        assert any(line.split()[:1] == [study] for line in lines), study
    for group in ("sweep", "model", "engine", "spec", "workload", "cluster", "tracking"):
        assert any(line.split()[:1] == [group] for line in lines), group
    assert "vllm-sweep pool" in help_out and "vllm-sweep report" in help_out
    assert "Hydra" not in lines[0] and "== Config ==" not in help_out  # no banner, no config dump


def test_every_study_has_its_one_line_purpose(help_out):
    from runner.command.help import study_purpose

    for path in (ROOT / "sweeps").glob("*.yaml"):
        purpose = study_purpose(path.read_text())
        assert purpose and f"{path.stem}  " in help_out and purpose in help_out, path.name


def test_the_short_flag_prints_the_same(warm_cli, help_out):
    assert warm_cli.argv("-h").stdout == help_out


def test_hydras_own_flags_still_work(warm_cli):
    proc = warm_cli.argv("--cfg", "job", "sweep=quick")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "name: quick" in proc.stdout
    assert warm_cli.argv("--info").returncode == 0


def test_no_lab_study_in_the_shipped_group_and_each_is_reachable_by_search_path(warm_cli):
    assert not list((ROOT / "sweeps").glob("h200_*")) and not list((ROOT / "conf" / "sweep").glob("h200_*"))
    studies = sorted((ROOT / "bench" / "studies" / "sweep").glob("h200_*.yaml"))
    assert studies
    proc = warm_cli.argv("hydra.searchpath=[file://bench/studies]", f"sweep={studies[0].stem}", "--cfg", "job")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"name: {studies[0].stem}" in proc.stdout
