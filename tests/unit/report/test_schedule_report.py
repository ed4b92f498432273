"""The draft count as vLLM deploys it, in the report: a schedule from the decision module's best k per measured
batch size (pure: hand-made Parquet)."""
from __future__ import annotations

from runner.report.build import analyse
from runner.report.load import load_results

from tests.support.results import Sweep


def test_the_best_k_per_batch_size_becomes_vllms_schedule(tmp_path):
    s = Sweep()
    for arm in ("off", "mtp:1", "mtp:3"):
        s.engine(arm)
    # (concurrency, requests per step): speeds per arm, 3 tight repeats each.
    loads = {(1, 1.0): {"off": 100, "mtp:1": 150, "mtp:3": 250},
             (16, 14.2): {"off": 80, "mtp:1": 120, "mtp:3": 90},
             (64, 50.0): {"off": 60, "mtp:1": 40, "mtp:3": 30}}
    for (c, batch), speeds in loads.items():
        for arm, speed in speeds.items():
            for r, jitter in enumerate((-0.5, 0.0, 0.5)):
                s.trial(arm, concurrency=c, repeat=r, tok_s=speed + jitter, batch_size_mean=batch)
    a = analyse(load_results([s.write(tmp_path / "sched")]))
    (entry,) = a.schedules
    assert [x["best_k"] for x in entry["loads"]] == [3, 1, 0]
    # Keyed on requests per step (14, 50), not on sessions (16, 64); k = 0 where speculation loses.
    assert entry["schedule"].as_list() == [[1, 13, 3], [14, 49, 1], [50, 256, 0]]
    assert entry["speculative_config"]["num_speculative_tokens"] == 3
    assert entry["check"] == "accepted by vLLM's validator"
    (rec,) = a.recommendation["draft_schedule"]["decode"]
    assert rec["num_speculative_tokens_per_batch_size"] == [[1, 13, 3], [14, 49, 1], [50, 256, 0]]
    assert rec["vllm_serve_flag"].startswith("--speculative-config '{")


def test_acceptance_profiles_are_points_and_spec_off_is_compared_at_each(tmp_path):
    s = Sweep()
    s.engine("off")
    for arm in ("mtp:1", "mtp:2"):
        s.engine(arm)
    profiles = {"[0.9,0.8]": {"mtp:1": 150, "mtp:2": 200}, "[0.3,0.1]": {"mtp:1": 90, "mtp:2": 70}}
    for r in range(3):
        s.trial("off", repeat=r, tok_s=100 + r * 0.1)
    for i, (profile, speeds) in enumerate(profiles.items()):
        for arm, speed in speeds.items():
            for r in range(3):
                # The profile sits on the trial as the runner records it (repeat numbers kept apart per profile).
                s.trial(arm, repeat=3 * i + r, tok_s=speed + r * 0.1, spec_acceptance_profile=profile)
    a = analyse(load_results([s.write(tmp_path / "profiles")]))
    assert set(a.points.arm) == {"off", "mtp:1", "mtp:2"}  # no profile in the labels
    assert set(a.outcomes.choice) == {"mtp:2", "off"}  # k=2 at high acceptance, off at low: never mixed
    assert len(a.draft_summary) == 1  # one family: the profile is a point, not a family


def test_predict_then_validate_shows_every_k_predicted_measured_and_why_skipped(monkeypatch):
    import pandas as pd

    from runner.config.store import load_config
    from runner.plan.stages import adaptive_study
    from runner.report.schedule_report import predicted_vs_measured, spot_check_lines
    from tests.unit.plan import test_schedule_study as study_rows

    cheap = {(0, 1): 0.010, (3, 1): 0.011, (0, 2): 0.010, (3, 2): 0.0115, (0, 4): 0.010, (3, 4): 0.012,
             (2, 4): 0.0118}  # k = 2 measured a little slower than its interpolated step (0.01133)
    monkeypatch.setattr(study_rows, "STEP_S", cheap)
    config = load_config(["tracking=none", "sweep=draft_schedule", "sweep.preset=cpu"])
    study = adaptive_study("predict_schedule")
    rows = study_rows._rows(study.stage(0, config=config, rows=[]))
    rows += study_rows._rows(study.stage(1, config=config, rows=rows))
    table = predicted_vs_measured(pd.DataFrame(rows))
    assert len(table) == 3 * 4  # three loads × k = 0..3
    at = {(r["concurrency"], r["k"]): r for r in table.to_dict("records")}
    assert at[(1, 1)]["why"].startswith("skipped: predicted") and at[(1, 1)]["measured"] == "–"
    assert at[(1, 0)]["why"].startswith("spec off") and at[(4, 3)]["why"].startswith("measured first")
    check = at[(4, 2)]
    assert check["why"].startswith("spot check") and check["measured"].endswith("(n=3)")
    # Measured 2.4 / 0.0118 against predicted 2.4 / 0.011333: about 4 % slower than predicted.
    assert check["prediction error"] == "-4.0%"
    (line,) = spot_check_lines(table)
    assert "k = 2 at c=4" in line and "-4.0%" in line
