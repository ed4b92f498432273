"""The dry run of sweep.converge and cluster.engines_per_gpu through the real CLI: no engine starts."""
from __future__ import annotations



def test_converge_says_how_many_repeats_a_point_may_take(tmp_path, warm_cli):
    proc = warm_cli("sweep.converge=true", "sweep.repeats=6", "dry_run=true", "tracking=none", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "converge: each point takes 3 to 6 repeats; it stops once its verdict is settled" in out, out[-2000:]
    assert not list(tmp_path.rglob("*.parquet"))


def test_two_engines_per_gpu_show_as_lanes_and_a_budget_that_does_not_fit_is_refused(tmp_path, warm_cli):
    shared = ("engine=gpu", "cluster.engines_per_gpu=2", "dry_run=true", "tracking=none")
    refused = warm_cli(*shared, output_root=tmp_path)
    assert refused.returncode != 0
    assert "(fix: sweep.grid.gpu_memory_utilization=[0.45], or" in refused.stderr + refused.stdout
    proc = warm_cli(*shared, "sweep.grid.gpu_memory_utilization=[0.45]", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "2 engines side by side on each (cluster.engines_per_gpu=2" in out, out[-2000:]
    assert "  lane 0 (1/2 GPU): " in out and "  lane 1 (1/2 GPU): " in out
