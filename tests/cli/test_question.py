"""sweep.question through the real CLI (dry runs): the demo's question names its arms; arms that replace them
get a warning before the sweep starts, never a refusal."""
from __future__ import annotations

WARNING = "names no engine of this sweep"


def test_the_demo_question_names_its_arms(tmp_path, warm_cli):
    proc = warm_cli("sweep=demo", "dry_run=true", "tracking=none", output_root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert WARNING not in proc.stderr


def test_replaced_arms_warn_that_the_question_cannot_be_stated(tmp_path, warm_cli):
    proc = warm_cli("sweep=demo", "dry_run=true", "tracking=none",
                   "sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]", output_root=tmp_path)
    assert proc.returncode == 0
    assert f"sweep.question.a={{spec_method:mtp,enable_prefix_caching:false}} {WARNING}" in proc.stderr
    assert "sweep.question=null" in proc.stderr
