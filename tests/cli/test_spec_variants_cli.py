"""Synthetic acceptance and draft-count schedules through the real CLI: refused on CPU before any engine starts,
and the schedule study's plan on its CPU preset. No engine starts here."""
from __future__ import annotations


def test_synthetic_profile_on_cpu_is_refused_before_any_engine_starts(tmp_path, warm_cli):
    proc = warm_cli("tracking=none", "run=synthetic", "sweep.grid.spec_method=[off,mtp]",
                   "sweep.grid.num_speculative_tokens=[2]", "sweep.grid.spec_acceptance_profile=[[0.86,0.74]]",
                   output_root=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Synthetic acceptance not supported with CPU sampling" in proc.stderr
    assert "fix: sweep.grid.spec_acceptance_profile=[real]" in proc.stderr
    assert not list(tmp_path.rglob("*.parquet")) and not list(tmp_path.rglob("logs/e-*.log"))


def test_the_schedule_study_plans_its_first_stage_on_its_cpu_preset_and_full_size(tmp_path, warm_cli):
    proc = warm_cli("sweep=draft_schedule", "sweep.preset=cpu", "dry_run=true", "tracking=none", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "adaptive study predict_schedule: stage 'predict'" in proc.stdout
    assert "2 engine configs, 18 trials" in proc.stdout
    for label in (" off:", " mtp:3:"):
        assert label in proc.stdout, proc.stdout[-3000:]
    full = warm_cli("sweep=draft_schedule", "dry_run=true", "tracking=none", output_root=tmp_path)
    assert full.returncode == 0, full.stderr[-3000:]
    assert " mtp:3 accept=0.86/0.74/0.64:" in full.stdout and "2 engine configs, 24 trials" in full.stdout
    assert not list(tmp_path.rglob("*.parquet"))
