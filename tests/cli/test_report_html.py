"""The report on the committed H200 results: report.html rendered by headless Chromium (the Answer table in the
DOM, every image decoded, a screenshot that is not blank), and every committed results folder's Answer within the
cell limit. Chromium is Debian's package; test.sh installs it when it runs as root (CI) and it is missing."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.report.brief import CELL_LIMIT
from runner.sinks.parquet import has_table

from tests.support.cli import ROOT

RESULTS = ROOT / "docs/results"
STUDY = RESULTS / "h200-2026-12-03c/h200_draft_schedule"  # acceptance profiles × five loads: the longest Answer
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() == 0:  # CI: test.sh installs it as root, so missing here is a failure, never a skip
        pytest.fail("chromium is not installed (fix: bash test.sh installs it, or apt-get install -y chromium)")
    pytest.skip("chromium is not installed and this user cannot install it (fix: apt-get install -y chromium)")


def _browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    proc = subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("redraw")
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(STUDY), "--out", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_the_page_is_self_contained(report):
    page = (report / "report.html").read_text()
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "<link" not in page and "http://" not in page and "https://" not in page
    assert len(set(sources)) == len(list(report.glob("*.png")))  # every plot is on the page


def test_chromium_renders_the_answer_and_decodes_every_image(report, tmp_path):
    page = (report / "report.html").as_uri()
    dom = _browser(tmp_path, "--virtual-time-budget=10000", "--dump-dom", page).stdout
    answer = dom[dom.index('<section id="answer">'):]
    answer = answer[:answer.index("</section>")]
    assert "<table>" in answer and "<th>deploy</th>" in answer and "one for all: mtp:3" in answer
    assert 'class="blocking"' in answer and "Dummy weights" in answer  # the blocking caveats above the table
    assert answer.index('class="blocking"') < answer.index("<table>")
    images = (report / "report.html").read_text().count("<img ")
    assert images >= len(list(report.glob("*.png"))) and f'data-images-decoded="{images}/{images}"' in dom

    from PIL import Image

    shot = tmp_path / "shot.png"
    _browser(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page)
    picture = Image.open(shot).convert("L")
    assert picture.size == (1280, 2000)
    low, high = picture.getextrema()
    assert high - low > 100 and len(picture.getcolors(256 * 256) or range(1000)) > 50  # text and tables drawn


def _committed() -> list[list[Path]]:
    """Each committed run folder alone, and the pairs a committed report compares ("A-B" beside A and B)."""
    runs = sorted(d for d in RESULTS.rglob("*") if d.is_dir() and (has_table(d, "trials") or has_table(d, "engines"))
                  and not any(has_table(p, "trials") for p in d.parents))
    pairs = []
    for d in RESULTS.glob("*/*-*"):
        names = d.name.split("-")
        if len(names) == 2 and all((d.parent / n) in runs for n in names):
            pairs.append([d.parent / n for n in names])
    return [[r] for r in runs] + pairs


def test_every_committed_answer_is_one_short_line_per_workload():
    from runner.report.build import analyse, render_markdown
    from runner.report.html import to_html
    from runner.report.load import load_results

    folders = _committed()
    assert len(folders) >= 20 and [STUDY] in folders
    for dirs in folders:
        a = analyse(load_results(dirs))
        assert list(a.answer.workload.str.split(" ").str[0]) == list(dict.fromkeys(a.outcomes.workload))
        for row in a.answer.to_dict("records"):
            for column, cell in row.items():
                assert len(str(cell)) <= CELL_LIMIT, (dirs, column, cell)
        for line in a.draft_lines:
            assert len(line.split("**: ", 1)[1]) <= CELL_LIMIT, (dirs, line)
        assert not any("sched=static" in arm or "accept=real" in arm for arm in a.engines.arm)
        markdown = render_markdown(a, plot_files=[])
        assert "<table>" in to_html(markdown, dirs[0], title="t")
