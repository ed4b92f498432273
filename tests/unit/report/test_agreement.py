"""A later folder's figures against the first folder's at the same points, from hand-made frames."""
from __future__ import annotations

import pandas as pd
import pytest

from runner.report.agreement import agreement_line, agreement_rows, binomial_range, binomial_two_sided


def _frames(values: dict[str, list[list[float]]]):
    """values: source -> one list of decode tok/s samples per point (points e-0, e-1, ...)."""
    trials, samples = [], []
    for source, points in values.items():
        for p, figures in enumerate(points):
            for r, v in enumerate(figures):
                trial_id = f"{source}-{p}-{r}"
                trials.append({"source": source, "trial_id": trial_id, "engine_id": f"e-{p}", "workload": "decode",
                               "workload_params_json": "{}", "concurrency": 1, "status": "ok"})
                samples.append({"source": source, "trial_id": trial_id, "value": v})
    return pd.DataFrame(trials), pd.DataFrame(samples)


def test_a_shifted_run_is_caught_by_the_sign_test_and_an_equal_one_passes():
    reference = [[100.0 + p, 104.0 + p, 96.0 + p] for p in range(10)]
    trials, samples = _frames({"a": reference, "b": [[100.0 + p + (1 if p % 2 else -1)] for p in range(10)],
                               "c": [[115.0 + p] for p in range(10)]})
    rows = agreement_rows(trials, samples, ["a", "b", "c"])
    same, shifted = rows[rows.source == "b"], rows[rows.source == "c"]
    assert len(same) == len(shifted) == 10 and same.n_reference.eq(3).all()
    assert shifted.ratio.iloc[0] == pytest.approx(115 / 100)  # decode: higher is better
    assert same.inside.sum() == 10 and shifted.inside.sum() == 0
    assert same.p_inside.iloc[0] == pytest.approx(0.5)
    line_same, line_shifted = agreement_line(same), agreement_line(shifted)
    assert "10 within 10%" in line_same and "no shift" in line_same and "more than equal distributions" in line_same
    assert "better at 10, worse at 0" in line_shifted and "the later run better" in line_shifted
    assert "0 of 10 figures inside" in line_shifted and "they differ" in line_shifted


def test_nothing_to_compare_with_one_folder_or_no_shared_point():
    trials, samples = _frames({"a": [[1.0, 2.0]]})
    assert agreement_rows(trials, samples, ["a"]).empty and agreement_line(agreement_rows(trials, samples, ["a"])) == ""
    trials2, samples2 = _frames({"b": [[1.0]]})
    trials2["engine_id"] = "e-other"
    both_t, both_s = pd.concat([trials, trials2]), pd.concat([samples, samples2])
    assert agreement_rows(both_t, both_s, ["a", "b"]).empty


def test_binomial_helpers():
    assert binomial_range(32, 0.5) == (10, 22)
    assert binomial_two_sided(16, 32) == pytest.approx(1.0)
    assert binomial_two_sided(0, 10) == pytest.approx(2 / 1024)
