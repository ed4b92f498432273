"""The report over a real CPU sweep (the session's small_sweep)."""
from __future__ import annotations

import pytest

from runner.report.build import write_report

pytestmark = pytest.mark.engine


@pytest.mark.engine
def test_report_on_a_real_cpu_sweep(small_sweep, tmp_path):
    run_dir, proc = small_sweep
    assert "answer:" in proc.stdout  # the sweep's own end-of-run report
    assert (run_dir / "report.md").exists()
    report = write_report(run_dirs=[run_dir], out_dir=tmp_path)
    a = report.analysis
    assert set(a.points.arm) == {"off", "mtp:2"}
    assert len(a.verdict) >= 1 and set(a.verdict.workload) == {"decode"}
    assert not len(a.capacity)  # 2 sessions × ~88 tokens against a pool of hundreds of thousands
    assert len(a.draft_summary) == 1 and "fewer than 3" in a.draft_summary.iloc[0].notes
    assert (tmp_path / "recommendation.yaml").exists()
    assert {p.name for p in report.plots} >= {"decode_vs_concurrency.png", "acceptance_per_position.png",
                                              "kv_capacity.png"}
