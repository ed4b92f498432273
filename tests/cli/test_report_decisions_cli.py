"""recommendation.yaml and report settings through the report CLI (`python -m runner.report`), on hand-made
Parquet and on the committed H200 results."""
from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.support.cli import ROOT
from tests.support.results import slo_study


def test_recommendation_yaml_content_and_settings_from_the_run_folder(tmp_path):
    run = slo_study(load_format="dummy").write(tmp_path / "rec")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "model": {"name": "m", "path": "/models/m", "load_format": "dummy"},
        "spec": {"mtp": {}}, "report": {"enabled": True, "tie_band": 0.02, "slo": {"ttft_p99_ms": 200},
                                        "gpu_hour_usd": 2.0}}))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(run), "--out", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "report.slo.ttft_p99_ms is deprecated" in proc.stderr and "use slo.ttft=200" in proc.stderr  # older key
    rec = yaml.safe_load((out / "recommendation.yaml").read_text())
    decode = rec["workloads"]["decode"]
    # mtp:2 wins at c=1 and c=4 (1.50× and 1.11× per session), off at c=16 (1.33×): mtp:2 wins most points.
    assert decode["choice"] == "mtp:2"
    assert decode["engine_args"]["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2}
    # Production never loads dummy weights: the benchmark-only setting is named beside the arguments.
    assert decode["engine_args"]["model"] == "/models/m" and "load_format" not in decode["engine_args"]
    assert decode["measured_with"] == {"load_format": "dummy"} and "dummy" not in decode["vllm_serve"]
    assert decode["vllm_serve"].startswith("vllm serve /models/m --speculative-config "
                                           "'{\"method\":\"mtp\",\"num_speculative_tokens\":2}'")
    assert "--enable-prefix-caching" in decode["vllm_serve"]
    assert decode["evidence"]["points_won"] == "2/3" and len(decode["evidence"]["points"]) == 3
    assert decode["draft_count"][0]["k_per_range"] == "k=2 at c=1, 4; k=0 (off) at c=16"
    assert decode["draft_count"][0]["single_k"] == 2
    assert any(c.startswith("dummy weights") for c in decode["caveats"])
    text = (out / "report.md").read_text()
    assert "## Recommendation" in text and "TTFT p99 ≤ 200 ms" in text and "## Cost" in text
    # A flag overrides the persisted setting; a bad one is an error that names the fix.
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(run), "--out", str(out), "--quiet",
                           "--slo", "ttft_p42_ms=1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "valid: ttft, tpot, e2el, percentile (fix: --slo ttft=500)" in proc.stderr


def test_h200_results_without_the_new_columns(tmp_path):
    """The committed H200 run (older Parquet: no round, no distinct_token_share) still gives a report."""
    run = ROOT / "docs/results/h200-2026-12-02/draft_count"
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(run), "--out", str(tmp_path), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rec = yaml.safe_load((tmp_path / "recommendation.yaml").read_text())
    assert rec["workloads"]["second_request"]["choice"] is None  # one repeat: no choice
    assert json.dumps(rec)  # plain data only
