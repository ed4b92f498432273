"""The report command's argument checks and a run folder's damaged config.yaml (pure, on temporary folders): each
problem names its fix, and checking creates nothing."""
from __future__ import annotations

import pytest

from runner.config.resume import RunFolderConfigUnreadable, load_saved_config, unreadable_reason
from runner.report.arguments import out_folder_problem, report_problems, run_folder_problem
from runner.spec_arm import SPEC_METHODS
from tests.support.results import decode_study


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "sweep" / "run1"
    folder.mkdir(parents=True)
    decode_study().write(folder)
    return folder


def test_a_run_folder_passes_and_what_is_not_one_names_the_fix(run, tmp_path):
    assert run_folder_problem(run) is None
    (tmp_path / "afile").write_text("x")
    assert "is a file, not a run folder" in run_folder_problem(tmp_path / "afile")
    assert "no such folder" in run_folder_problem(tmp_path / "missing")
    assert f"name a run: {run}" in run_folder_problem(run.parent)
    assert not (tmp_path / "missing").exists()


def test_an_out_folder_is_tested_without_being_made(run, tmp_path):
    assert out_folder_problem(tmp_path / "new" / "deeper", flag="--out") is None
    assert not (tmp_path / "new").exists()
    (tmp_path / "afile").write_text("x")
    assert "is a file, not a folder" in out_folder_problem(tmp_path / "afile", flag="--out")
    assert "no folder can be made there" in out_folder_problem(tmp_path / "afile" / "x", flag="--out")
    assert "cannot write in /proc" in out_folder_problem(tmp_path.root / __import__("pathlib").Path("proc/x/y"),
                                                         flag="--out")
    assert list(tmp_path.glob(".report-write-test-*")) == []


def test_report_flags_follow_the_config_blocks_rules(run):
    assert report_problems(folders=[run], out=None) == []
    (band,) = report_problems(folders=[run], out=None, tie_band=-1.0)
    assert band == "--tie-band -1.0 must be ≥ 0 (fix: --tie-band 0.02)"
    assert "fix: --bandwidth-tbs" in report_problems(folders=[run], out=None, bandwidth_tbs=0.0)[0]


@pytest.mark.parametrize("text, reason", [
    (b"a: [1\n", "not valid YAML"),
    (b"   \n", "it is empty"),
    (b"\xff\xfe\x00", "it is not text"),
    (b"just a string\n", "it holds a str"),
    (b"model: {}\nengine: {}\n", "it lacks sweep, execution, run"),
])
def test_a_damaged_saved_config_is_refused_with_its_path_and_the_fix(text, reason, run):
    (run / "config.yaml").write_bytes(text)
    assert unreadable_reason(run / "config.yaml").startswith(reason)
    with pytest.raises(RunFolderConfigUnreadable) as info:
        load_saved_config(run)
    message = str(info.value)
    assert str(run / "config.yaml") in message and "fix: run=<new name>" in message and "run=run1-2" in message


def test_a_whole_saved_config_reads_as_written(run):
    (run / "config.yaml").write_text("model: {}\nengine: {}\nsweep: {name: s}\nexecution: {}\nrun: run1\n"
                                     "output_root: ${oc.env:HOME}\n")
    assert load_saved_config(run)["output_root"] == "${oc.env:HOME}"  # unresolved, as before


def test_one_rule_for_a_draft_count():
    mtp = SPEC_METHODS["mtp"]
    assert mtp.accepts(1) and mtp.accepts(8) and not mtp.accepts(9) and not mtp.accepts(0)
    assert not mtp.accepts(True) and not mtp.accepts(2.0)
