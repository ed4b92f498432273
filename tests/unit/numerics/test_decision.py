"""One decision per point (runner.numerics.decision), and every answer the report gives read from it: the
verdict, the best draft count, the recommendation and the Answer table never disagree (pure: hand-made Parquet)."""
from __future__ import annotations

import numpy as np
import pytest

from runner.numerics.decision import Candidate, DecisionKind, decide, one_for_all
from runner.report.build import analyse
from runner.report.load import load_results

from tests.support.results import Sweep

ARMS = ("off", "mtp:1", "mtp:2", "mtp:3")


def test_the_simplest_tied_arm_is_chosen_not_the_leader():
    d = decide([Candidate(arm="off", values=(100, 104, 96)), Candidate(arm="mtp:2", values=(103, 106, 99), k=2),
                Candidate(arm="mtp:1", values=(101, 105, 97), k=1)], higher_is_better=True)
    assert d.kind is DecisionKind.TIE and d.leader == "mtp:2"
    assert d.tied == ("off", "mtp:1", "mtp:2") and d.choice == "off"


def test_a_clear_win_is_the_only_arm_tied_for_first():
    d = decide([Candidate(arm="off", values=(100, 100.5, 99.5)), Candidate(arm="mtp:2", values=(110, 110.5, 109.5),
                                                                           k=2)], higher_is_better=True)
    assert d.kind is DecisionKind.WINNER and d.choice == "mtp:2" and d.tied == ("mtp:2",)
    assert 1.02 < d.margin.lo <= 1.10 <= d.margin.hi


def test_too_few_repeats_and_the_capacity_wall_choose_nothing():
    few = decide([Candidate(arm="off", values=(1.0, 1.1)), Candidate(arm="mtp:1", values=(2.0, 2.1), k=1)],
                 higher_is_better=True)
    assert few.kind is DecisionKind.TOO_FEW and few.choice is None and few.leader == "mtp:1"
    wall = decide([Candidate(arm="off", values=(1, 1, 1))], higher_is_better=True, walled=True)
    assert wall.kind is DecisionKind.CAPACITY and wall.choice is None
    assert decide([], higher_is_better=True).kind is DecisionKind.NO_RESULT


def test_one_setting_for_all_is_the_arm_tied_for_first_most_often():
    tie = decide([Candidate(arm="off", values=(100, 104, 96)), Candidate(arm="mtp:2", values=(103, 106, 99), k=2)],
                 higher_is_better=True)
    win = decide([Candidate(arm="off", values=(100, 100.5, 99.5)), Candidate(arm="mtp:2", values=(110, 110.5, 109.5),
                                                                             k=2)], higher_is_better=True)
    simplicity = {"off": (False, 0, 0), "mtp:2": (True, 2, 1)}
    assert one_for_all([tie, tie, win], simplicity) == "mtp:2"  # tied at 3 of 3 points, off at 2
    assert one_for_all([tie, tie], simplicity) == "off"  # equal counts: the simpler arm


def test_the_demo_case_runner_up_everywhere_leader_nowhere(tmp_path):
    """The fresh-clone demo that recommended mtp:2: the runner-up at both points, the leader at neither, every
    arm within noise. Each answer must name the simplest tied arm, spec off."""
    s = Sweep()
    for arm in ARMS:
        s.engine(arm)
    values = {1: {"off": [229, 187, 214], "mtp:1": [240, 180, 220], "mtp:2": [236, 200, 233],
                  "mtp:3": [250, 190, 236]},
              4: {"off": [230, 190, 212], "mtp:1": [248, 170, 215], "mtp:2": [240, 195, 226],
                  "mtp:3": [200, 245, 238]}}
    for c, arms in values.items():
        for arm, vs in arms.items():
            for r, v in enumerate(vs):
                s.trial(arm, concurrency=c, repeat=r, tok_s=float(v))
    a = analyse(load_results([s.write(tmp_path / "demo")]))
    assert set(a.outcomes.runner_up) == {"mtp:2"} and "mtp:2" not in set(a.outcomes.leader)
    assert list(a.outcomes.choice) == ["off", "off"]
    assert a.recommendation["workloads"]["decode"]["choice"] == "off"
    assert set(a.draft_choices.best_k) == {0}
    assert a.answer.iloc[0].deploy == "off"
    assert "no k changes" in a.draft_lines[0]


def _random_sweep(rng: np.random.Generator) -> Sweep:
    s = Sweep()
    for arm in ARMS:
        s.engine(arm)
    for c in (1, 4, 16):
        base = rng.uniform(50, 150)
        effect = {arm: rng.choice([0.0, 0.0, 0.01, 0.1, 0.3, -0.2]) for arm in ARMS}
        spread = rng.choice([0.005, 0.05, 0.2])
        for arm in ARMS:
            repeats = int(rng.choice([1, 2, 3, 3, 4, 5]))
            for r in range(repeats):
                value = base * (1 + effect[arm]) * (1 + rng.normal(0, spread))
                s.trial(arm, concurrency=c, repeat=r, tok_s=float(max(value, 1.0)))
    return s


@pytest.mark.parametrize("seed", range(12))
def test_verdict_best_k_and_recommendation_never_disagree(tmp_path, seed):
    a = analyse(load_results([_random_sweep(np.random.default_rng(seed)).write(tmp_path / f"s{seed}")]))
    entry = a.recommendation["workloads"]["decode"]
    k_of = {"off": 0, "mtp:1": 1, "mtp:2": 2, "mtp:3": 3}
    for row in a.outcomes.to_dict("records"):
        decision = row["decision"]
        choice = decision.choice
        if choice is not None:
            assert choice in decision.tied
            assert choice == min(decision.tied, key=lambda arm: k_of[arm])  # the simplest tied arm
        best = a.draft_choices[a.draft_choices.concurrency == row["concurrency"]].iloc[0].best_k
        assert (best is None or np.isnan(best)) if choice is None else best == k_of[choice]
        per_load = {p["arm"]: p["points"] for p in entry["choice_per_load"]}
        assert f"c={row['concurrency']}" in per_load.get(choice, per_load.get(f"no choice ({row['kind']})", []))
    verdict_points: dict[str, int] = {}
    for choice, points in zip(a.verdict.choice, a.verdict.points):
        verdict_points[choice] = verdict_points.get(choice, 0) + int(points.split("/")[0])
    outcome_points: dict[str, int] = {}
    for choice in a.outcomes.choice:
        key = choice if isinstance(choice, str) else "–"
        outcome_points[key] = outcome_points.get(key, 0) + 1
    assert verdict_points == outcome_points
    one = entry["choice"]
    if one is not None:
        counts = {arm: sum(arm in d.tied for d in a.outcomes.decision if d.choice is not None) for arm in k_of}
        assert counts[one] == max(counts.values())
        assert a.draft_summary.iloc[0]["single k"].split()[0] == str(k_of[one])


def test_the_answer_states_the_question_even_where_a_third_arm_leads(tmp_path):
    import yaml

    s = Sweep()
    for arm in ("off", "mtp:2", "ngram:3"):
        s.engine(arm)
    speeds = {"off": [100, 101, 99], "mtp:2": [150, 151, 149], "ngram:3": [300, 301, 299]}
    for arm, values in speeds.items():
        for r, v in enumerate(values):
            s.trial(arm, repeat=r, tok_s=float(v))
    run = s.write(tmp_path / "q")
    (run / "config.yaml").write_text(yaml.safe_dump({"sweep": {"question": {
        "name": "MTP or not?", "a": {"spec_method": "mtp"}, "b": {"spec_method": "off"}}}}))
    a = analyse(load_results([run]))
    row = a.answer.iloc[0]
    assert row.deploy == "ngram:3"
    assert row["by how much"].startswith("mtp:2 1.50× [") and "over off" in row["by how much"]
    assert "deployed arm ngram:3: 2.00× over mtp:2" in row["by how much"]
    # A question whose sides name no measured arm is dropped (the plan warned before the sweep started).
    (run / "config.yaml").write_text(yaml.safe_dump({"sweep": {"question": {
        "a": {"spec_method": "eagle"}, "b": {"spec_method": "off"}}}}))
    assert analyse(load_results([run])).answer.iloc[0]["by how much"].startswith("2.00× over mtp:2")
