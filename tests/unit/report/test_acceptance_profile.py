"""Synthetic acceptance in the report (runner.report.acceptance_profile): measured against set per position, and
whether the repeats drew their own sequences (pure: hand-made Parquet through the report's own frames)."""
from __future__ import annotations

from runner.report.acceptance_profile import acceptance_profile_section, acceptance_profile_table
from runner.report.build import analyse
from runner.report.load import load_results

from tests.support.results import Sweep


def _sweep(tmp_path, *, accepted: list[int], measured: list[list[float]]):
    s = Sweep()
    s.engine("off")
    s.engine("mtp:2")
    for r in range(3):
        s.trial("off", concurrency=64, repeat=r, tok_s=100)
        s.trial("mtp:2", concurrency=64, repeat=r, tok_s=150, spec_acceptance_profile="[0.86,0.74,0.64]",
                spec_acceptance_per_position=measured[r], spec_num_accepted_tokens=accepted[r])
    return analyse(load_results([s.write(tmp_path / "profile")]))


def test_measured_per_position_against_the_first_k_set_rates(tmp_path):
    a = _sweep(tmp_path, accepted=[7010, 6950, 7102],
               measured=[[0.855, 0.741], [0.87, 0.73], [0.861, 0.745]])
    (row,) = acceptance_profile_table(a.trials).to_dict("records")  # the report's frames: profile in the point
    assert row["arm"] == "mtp:2" and row["k"] == 2 and row["c"] == 64
    assert row["set per position"] == "0.860 / 0.740"
    assert row["measured (median)"] == "0.861 / 0.741"
    assert row["largest gap to set"] <= 0.02 and row["within 0.02"] == "yes"
    assert row["repeats drew apart"] == "yes"
    assert "measured against set" in acceptance_profile_section(a.trials)


def test_replicated_draws_are_called_out(tmp_path):
    a = _sweep(tmp_path, accepted=[7000] * 3, measured=[[0.833, 0.686]] * 3)
    (row,) = acceptance_profile_table(a.results.trials).to_dict("records")  # raw rows: the engine's own column
    assert row["repeats drew apart"].startswith("**no")
    assert row["within 0.02"] == "no"


def test_no_profile_no_section(tmp_path):
    s = Sweep()
    s.engine("mtp:1")
    s.trial("mtp:1", tok_s=1, spec_acceptance_per_position=[0.5])
    a = analyse(load_results([s.write(tmp_path / "real")]))
    assert acceptance_profile_section(a.trials) == ""
