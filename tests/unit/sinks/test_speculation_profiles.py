"""Acceptance profile files (speculation_profile.json, schema 1.0): what a run with the model's own acceptance
writes, per method, k, workload and category; what synthetic or dummy-weight runs do not write; and a file read
back as the rates a synthetic engine is forced to, with a warning where its model is not the run's."""
from __future__ import annotations

import json

import pytest

from runner.config.acceptance import AcceptanceProfile, ProfileKind
from runner.config.checks import ConfigError
from runner.config.sections import run_config
from runner.config.profile_file import read_profile
from runner.plan.grid import build_plan
from runner.plan.spec_variants import profile_warnings, speculative_config
from runner.sinks.speculation_profiles import acceptance_length_rates, build_profiles, write_profiles
from tests.support.results import Sweep

MT_BENCH = {"prompt_file": "/data/mt_bench_question.jsonl", "prompt_format": "mt_bench", "output_len": 48}


def _trial(trial_id, k, per_position, drafts, accepted, **extra):
    return {"trial_id": trial_id, "status": "ok", "spec_method": "mtp", "num_speculative_tokens": k,
            "workload": "prompt_set", "workload_params_json": json.dumps(MT_BENCH, sort_keys=True),
            "spec_num_drafts": drafts, "spec_acceptance_per_position": per_position,
            "spec_num_accepted_tokens": accepted, "concurrency": 4, "run_id": "r", "prompt_rendering": "chat_template",
            **extra}


def _request(trial_id, category, accepted, steps):
    return {"trial_id": trial_id, "phase": "measured", "category": category, "spec_num_steps": steps,
            "spec_accepted_per_position": accepted}


def test_a_profile_per_method_k_and_workload_with_categories_and_provenance():
    trials = [_trial("a", 2, [0.8, 0.5], 100, 130), _trial("b", 2, [0.6, 0.3], 300, 270, repeat=1),
              _trial("c", 1, [0.7], 200, 140),
              _trial("s", 2, [0.9, 0.9], 100, 180, spec_acceptance_profile="[0.9,0.9]"),  # synthetic: left out
              {**_trial("off", 0, [], None, None), "spec_method": "off"}]
    requests = [_request("a", "coding", [9, 6], 10), _request("b", "coding", [1, 0], 10),
                _request("a", "writing", [5, 1], 10), {**_request("a", "math", [9, 9], 10), "phase": "warmup"}]
    files = dict(build_profiles(trials=trials, requests=requests, model={"name": "tiny-mtp"}, vllm_version="0.32.0"))
    assert sorted(files) == ["mtp_k1_prompt_set.json", "mtp_k2_prompt_set.json"]
    k2 = files["mtp_k2_prompt_set.json"]
    assert k2["schema_version"] == "1.0" and k2["measured"] is True and k2["num_speculative_tokens"] == 2
    assert k2["marginal_accept_rates"] == pytest.approx([0.65, 0.35])  # drafts-weighted: (80+180)/400, (50+90)/400
    assert k2["conditional_accept_rates"] == pytest.approx([0.65, 0.35 / 0.65], abs=1e-6)
    assert k2["mean_accept_length"] == pytest.approx(2.0)
    assert k2["validation"]["mean_consistency"]["passed"]  # vLLM's counter: 1 + 400/400
    assert k2["accept_length_by_k"] == {"1": 1.7, "2": 2.0}
    assert k2["per_category"]["coding"]["marginal_accept_rates"] == pytest.approx([0.5, 0.3])
    assert k2["per_category"]["writing"]["requests"] == 1 and "math" not in k2["per_category"]
    conditions = k2["measurement_conditions"]
    assert conditions["dataset"] == "mt_bench_question.jsonl" and conditions["vllm_version"] == "0.32.0"
    assert conditions["chat_template"] == "auto" and conditions["prompt_rendering"] == "chat_template"
    assert conditions["sampling"]["temperature"] == 0.0 and conditions["prompt_set"]["format"] == "mt_bench"
    assert k2["target_model"] == {"name": "tiny-mtp"}


def test_vllms_length_rule_is_the_least_variance_schedule_not_a_measured_shape():
    assert acceptance_length_rates(2.5, 3) == [1.0, 0.5, 0.0]
    assert acceptance_length_rates(1.0, 2) == [0.0, 0.0]


def _run(tmp_path, *, load_format="auto", profile=None):
    sweep = Sweep(load_format=load_format)
    sweep.engine("mtp:2")
    sweep.trial("mtp:2", tok_s=10.0, spec_num_drafts=100, spec_acceptance_per_position=[0.8, 0.5],
                spec_num_accepted_tokens=130, spec_acceptance_profile=profile)
    run_dir = sweep.write(tmp_path / "run")
    (run_dir / "config.yaml").write_text(f"model:\n  name: tiny-mtp\n  load_format: {load_format}\n")
    return run_dir


def test_a_real_run_writes_profiles_and_dummy_or_synthetic_runs_write_none(tmp_path):
    written = write_profiles(_run(tmp_path / "real"))
    assert [p.name for p in written.paths] == ["mtp_k2_decode.json"]
    assert read_profile(str(written.paths[0])).rates == (0.8, 0.5)
    dummy = write_profiles(_run(tmp_path / "dummy", load_format="dummy"))
    assert not dummy.paths and "load_format=dummy" in dummy.reason
    synthetic = write_profiles(_run(tmp_path / "synthetic", profile="[0.8,0.5]"))
    assert not synthetic.paths and "own acceptance" in synthetic.reason


def _write(path, **fields):
    profile = {"schema_version": "1.0", "measured": True, "method": "mtp", "num_speculative_tokens": 3,
               "marginal_accept_rates": [0.8, 0.6, 0.4], "target_model": {"name": "tiny-mtp"}, **fields}
    path.write_text(json.dumps(profile))
    return str(path)


def _config(profile, model="mimo-7b-dummy"):
    return run_config(sweep_name="v", model=model, workloads={"decode": {"input_len": 32, "output_len": 16}},
                      grid={"spec_method": ["off", "mtp"], "num_speculative_tokens": [1, 3], "max_model_len": [512],
                            "spec_acceptance_profile": [profile]})


def test_a_profile_file_forces_its_marginal_rates_and_warns_on_another_model(tmp_path):
    path = _write(tmp_path / "mtp_k3_prompt_set.json")
    assert AcceptanceProfile.parse(path).kind is ProfileKind.MEASURED
    config = _config(f"measured:{path}")
    engines = build_plan(config).engines
    forced = {e.settings.num_speculative_tokens: speculative_config(e.settings, {}).get("synthetic_acceptance_rates")
              for e in engines if e.settings.spec_method == "mtp"}
    assert forced == {1: [0.8], 3: [0.8, 0.6, 0.4]}
    (warning,) = profile_warnings(config)
    assert "measured on model 'tiny-mtp', not this run's 'mimo-7b-dummy'" in warning
    assert profile_warnings(_config(path, model="tiny-mtp")) == []


@pytest.mark.parametrize("fields, rule", [
    ({"schema_version": "2.0"}, "schema 1.x"), ({"measured": False}, "placeholder"),
    ({"marginal_accept_rates": [1.5]}, r"\[0, 1\]"), ({"method": "eagle3"}, "measured for 'eagle3', not 'mtp'"),
])
def test_a_bad_profile_file_is_refused_with_the_fix(tmp_path, fields, rule):
    path = _write(tmp_path / "p.json", **fields)
    with pytest.raises(ConfigError, match=rule) as info:
        build_plan(_config(f"measured:{path}"))
    assert "fix:" in str(info.value)
