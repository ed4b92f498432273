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
