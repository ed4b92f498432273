"""One config per run folder (runner.config.resume): which keys count as a change, like with like (presets
applied, workload keys declared since, schema fields added since); and the config a job saves is the one it ran
(the command line's value where the preset sets the same key)."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from runner.config.resume import RESUMABLE, RunFolderConfigChanged, check_same_config, config_changes
from runner.config.workload_keys import DECLARED_OUTSIDE_IDS, without_declared_defaults


def config(**over) -> dict:
    base = {"run": "r1", "output_root": "outputs", "dry_run": False,
            "sweep": {"name": "s", "grid": {"concurrency": [1, 4]}, "question": None},
            "workload": {"decode": {"input_len": 128}}, "engine": {"args": {"max_num_seqs": 8}},
            "execution": {"warmup": "auto", "deadline_s": None}, "tracking": {"mode": "offline"},
            "report": {"enabled": True, "slo": {"ttft_p99_ms": None}}, "cluster": {"address": None}}
    merged = OmegaConf.merge(base, over)
    return OmegaConf.to_container(merged)


def keys(old, new) -> list[str]:
    return [c.key for c in config_changes(old, new)]


def test_what_is_measured_is_compared():
    assert keys(config(), config(sweep={"grid": {"concurrency": [1, 8]}})) == ["sweep.grid.concurrency"]
    assert keys(config(), config(workload={"decode": {"input_len": 64}})) == ["workload.decode.input_len"]
    assert keys(config(), config(engine={"args": {"kv_cache_dtype": "fp8"}})) == ["engine.args.kv_cache_dtype"]
    assert keys(config(), config(execution={"warmup": "off"})) == ["execution.warmup"]
    assert keys(config(), config(report={"slo": {"ttft_p99_ms": 50}})) == ["report.slo.ttft_p99_ms"]


def test_more_axis_values_or_repeats_extend_the_run():
    grown = config(sweep={"grid": {"concurrency": [4, 1, 8]}, "repeats": 3}, workload={"decode": {"input_len": [128, 64]}})
    old = config(sweep={"repeats": 1})
    changes = config_changes(old, grown)
    assert {c.key for c in changes} == {"sweep.grid.concurrency", "sweep.repeats", "workload.decode.input_len"}
    assert all(c.extends for c in changes)
    assert check_same_config(run_dir="r", run="r1", old=old, new=grown) == changes
    shrunk = config_changes(config(sweep={"repeats": 3}), config(sweep={"repeats": 2, "grid": {"concurrency": [1]}}))
    assert [c.extends for c in shrunk] == [False, False]


def test_what_may_change_on_resume_is_not():
    new = config(run="r1", output_root="/abs/outputs", dry_run=True, tracking={"mode": "disabled"},
                 execution={"deadline_s": 600}, cluster={"address": "10.0.0.1:6379"}, report={"enabled": False},
                 sweep={"question": {"name": "q"}})
    assert keys(config(), new) == []
    assert "execution.deadline_s" in RESUMABLE and "tracking" in RESUMABLE


def test_a_key_one_side_lacks_is_a_change_only_where_it_means_something_else():
    old = config()
    old["execution"].pop("warmup")  # a field the schema added since: its default is what the old run ran
    assert keys(old, config(execution={"warmup": "auto"})) == []
    assert keys(old, config(execution={"warmup": "off"})) == ["execution.warmup"]
    assert keys(config(), config(engine={"args": {"enforce_eager": None}})) == []  # a null left out


def test_workload_keys_declared_since_are_no_change_at_their_declared_values():
    declared = DECLARED_OUTSIDE_IDS["decode"]
    assert keys(config(), config(workload={"decode": declared})) == []
    assert keys(config(), config(workload={"decode": {**declared, "arrival": "poisson"}})) == \
        ["workload.decode.arrival"]
    assert without_declared_defaults("decode", {"input_len": 1, **declared}) == {"input_len": 1}
    assert without_declared_defaults("prompt_set", {"arrival": "closed"}) == {"arrival": "closed"}


def test_the_refusal_names_the_keys_and_the_fix(tmp_path):
    with pytest.raises(RunFolderConfigChanged) as refused:
        check_same_config(run_dir=tmp_path, run="r1", old=config(),
                          new=config(sweep={"grid": {"concurrency": [1, 8]}}))
    text = str(refused.value)
    assert "sweep.grid.concurrency: [1, 4] → [1, 8]" in text and "fix: run=<new name>" in text and "run=r1-2" in text
    check_same_config(run_dir=tmp_path, run="r1", old=None, new=config(run="x"))  # no results: nothing to mix


def test_a_job_saves_the_command_lines_value_over_its_presets(tmp_path):
    """Hydra hands the job its config without Hydra's node; the preset still yields to the command line."""
    from hydra.core.hydra_config import HydraConfig

    from runner.config.presets import apply_preset
    from runner.config.store import compose

    cfg = compose([f"output_root={tmp_path}", "sweep=draft_count", "sweep.preset=cpu", "sweep.grid.concurrency=[2]"])
    HydraConfig.instance().set_config(cfg)
    try:
        job = cfg.copy()
        OmegaConf.set_struct(job, False)
        job.pop("hydra")  # as Hydra's run_job hands it to the task
        assert OmegaConf.to_container(apply_preset(job), resolve=True)["sweep"]["grid"]["concurrency"] == [2]
    finally:
        HydraConfig.instance().cfg = None
