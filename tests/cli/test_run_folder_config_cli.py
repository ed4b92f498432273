"""One config per run folder, through the real CLI (dry runs: no engine starts). The folder's results and its
config.yaml are made here as a first sweep leaves them (the config resolved, the preset applied): a command
that changes what is measured is refused with exit 2, naming the keys and `run=<new name>`; the same command,
or one that changes only what may change on resume, resumes."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.support.cli import base_sweep
from tests.support.results import decode_study

FIRST = ["run=r1", "sweep.grid.concurrency=[1,4]", "tracking=none"]


def first_run(root, *overrides: str):
    """The run folder a finished first sweep of `overrides` leaves: its config.yaml and a trials table."""
    from runner.config.presets import apply_preset
    from runner.config.store import compose

    cfg = compose([f"output_root={root}", *base_sweep(overrides)])
    run_dir = root / cfg.sweep.name / cfg.run
    saved = apply_preset(cfg).copy()
    OmegaConf.set_struct(saved, False)
    saved.pop("hydra")
    run_dir.mkdir(parents=True)
    OmegaConf.save(saved, run_dir / "config.yaml", resolve=True)
    decode_study().write(run_dir)
    return run_dir


def test_a_changed_axis_is_refused_with_the_keys_and_the_fix(tmp_path, warm_cli):
    run_dir = first_run(tmp_path, *FIRST)
    proc = warm_cli("dry_run=true", "run=r1", "sweep.grid.concurrency=[1,8]", "tracking=none", output_root=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"run folder {run_dir} holds results of another config" in proc.stderr
    assert "sweep.grid.concurrency: [1, 4] → [1, 8]" in proc.stderr
    assert "fix: run=<new name>" in proc.stderr
    assert "plan:" not in proc.stdout


def test_the_same_config_resumes_and_so_does_a_resumable_change(tmp_path, warm_cli):
    first_run(tmp_path, *FIRST)
    for extra in ([], ["tracking=wandb_offline", "execution.deadline_s=600", "retry_failed=true",
                       "report.enabled=false"]):
        proc = warm_cli("dry_run=true", *FIRST, *extra, output_root=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "plan:" in proc.stdout


def test_more_values_of_an_axis_extend_the_run(tmp_path, warm_cli):
    first_run(tmp_path, *FIRST)
    proc = warm_cli("dry_run=true", "run=r1", "sweep.grid.concurrency=[1,4,8]", "tracking=none", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "note: this command extends the run" in proc.stderr and "[1, 4] → [1, 4, 8]" in proc.stderr


def test_a_folder_without_results_takes_any_config(tmp_path, warm_cli):
    run_dir = first_run(tmp_path, *FIRST)
    for table in run_dir.glob("*.parquet"):
        table.unlink()
    proc = warm_cli("dry_run=true", "run=r1", "sweep.grid.concurrency=[2]", "tracking=none", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("change,key", [
    ("sweep.grid.concurrency=[2]", "sweep.grid.concurrency"),
    ("workload.decode.input_len=64", "workload.decode.input_len"),
])
def test_a_preset_study_compares_like_with_like(tmp_path, change, key, warm_cli):
    """A preset's values are what config.yaml holds: the same command (a key the preset sets, set on the command
    line too) resumes; another value of it is refused."""
    first = ["sweep=draft_count", "sweep.preset=cpu", "run=p1", "tracking=none", change]
    first_run(tmp_path, *first)
    same = warm_cli("dry_run=true", *first, output_root=tmp_path)
    assert same.returncode == 0, same.stderr[-3000:]
    other = warm_cli("dry_run=true", *first[:-1], output_root=tmp_path)
    assert other.returncode == 2 and f"{key}: " in other.stderr, other.stderr[-3000:]
