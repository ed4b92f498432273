"""The report CLI (`python -m runner.report`) on hand-made Parquet results (tests/support/results.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT
from tests.support.results import report_fixture


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory) -> Path:
    return report_fixture(tmp_path_factory.mktemp("fx") / "fixture")


def test_write_report_files_and_cli(fixture_dir, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(fixture_dir), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # The Answer ends the output: its table, then the draft count in words.
    answer = proc.stdout[proc.stdout.index("\nanswer:"):]
    assert "| decode (decode tok/s per session) | mtp:1 c=1–4, off c=16; one for all: mtp:1 |" in answer
    assert proc.stdout.rstrip().splitlines()[-1].startswith("multi_turn, mtp")
    text = (out / "report.md").read_text()
    assert text.index("## Answer") < text.index("## Sources") < text.index("## Verdict")  # the answer first
    for heading in ("## Verdict", "## Crossovers", "## Best draft count", "## Capacity-wall flags",
                    "## Output divergence", "## Failed configurations", "## Plots", "## Recommendation",
                    "## Under a latency target", "## Pareto"):
        assert heading in text
    names = {p.name for p in out.glob("*.png")}
    assert names == {"decode_vs_concurrency.png", "multi_turn_vs_concurrency.png", "acceptance_per_position.png",
                     "kv_capacity.png", "decode_pareto.png", "decode_throughput.png", "decode_speedup.png",
                     "multi_turn_speedup.png"}
    assert "![decode_speedup](decode_speedup.png)" in text and (out / "report.html").exists()
    assert (out / "recommendation.yaml").exists()
    assert not (fixture_dir / "report.md").exists()  # --out was honoured; the data folder is untouched


def test_missing_folder_is_an_error_not_a_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no results" in proc.stderr
