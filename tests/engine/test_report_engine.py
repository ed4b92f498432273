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


@pytest.mark.engine
def test_the_engines_table_records_what_ran_and_the_recommendation_reads_it_back(small_sweep, tmp_path):
    import json

    import yaml

    from runner.plan.vllm_args import deployment, production
    from runner.sinks.parquet import read_frame

    run_dir, _ = small_sweep
    engines = read_frame(run_dir, "engines")
    ok = engines[engines.status == "ok"]
    assert len(ok) == 2
    for row in ok.to_dict("records"):
        ran = json.loads(row["vllm_args_json"])
        assert (ran["max_model_len"], ran["gpu_memory_utilization"], ran["enable_prefix_caching"],
                ran["tensor_parallel_size"]) == (row["max_model_len"], row["gpu_memory_utilization"],
                                                 row["enable_prefix_caching"], row["tensor_parallel_size"])
        spec = ran.get("speculative_config") or {"method": "off", "num_speculative_tokens": 0}
        assert (spec["method"], spec["num_speculative_tokens"]) == (row["spec_method"], row["num_speculative_tokens"])
        if "speculative_config" in ran:  # the row says the level the engine ran with
            assert row["per_request_spec_metrics"] == ran["per_request_spec_decode_metrics"]
    report = write_report(run_dirs=[run_dir], out_dir=tmp_path)
    assert report is not None
    rec = yaml.safe_load((tmp_path / "recommendation.yaml").read_text())["workloads"]["decode"]
    if rec["choice"] is not None:
        row = ok[ok.arm == rec["choice"]] if "arm" in ok else ok[ok.spec_method.eq(rec["choice"].split(":")[0])]
        ran = json.loads(row.iloc[0]["vllm_args_json"])
        assert rec["engine_args"] == production(deployment(ran, model=str(row.iloc[0]["model"])))[0]
