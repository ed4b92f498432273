"""Per-category acceptance and decode speed, and the figures re-weighted to a mix, from hand-made rows."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from runner.report.categories import category_figures, weighted_median

MIX = json.dumps({"mix": {"code": 3, "prose": 1}, "prompt_format": "mt_bench"}, sort_keys=True)


def frames(params=MIX):
    trials = pd.DataFrame([{"source": "s", "trial_id": t, "status": "ok", "workload": "prompt_set",
                            "workload_params_json": params, "concurrency": 1, "arm": "mtp:2", "arm_order": 0}
                           for t in ("t0", "t1")])
    rows = []
    # code: 2 requests, 10 steps each, 2 drafts a step; 15 accepted (10 at position 0, 5 at position 1); TPOT 10 ms.
    for t in ("t0", "t1"):
        rows.append({"trial_id": t, "category": "code", "tpot_s": 0.010, "spec_num_steps": 10,
                     "spec_num_draft_tokens": 20, "spec_num_accepted_tokens": 15,
                     "spec_accepted_per_position": [10, 5]})
    # prose: 4 requests, 10 steps each; 5 accepted (4 at 0, 1 at 1); TPOT 30 ms.
    for i in range(4):
        rows.append({"trial_id": ("t0", "t1")[i % 2], "category": "prose", "tpot_s": 0.030, "spec_num_steps": 10,
                     "spec_num_draft_tokens": 20, "spec_num_accepted_tokens": 5,
                     "spec_accepted_per_position": [4, 1]})
    requests = pd.DataFrame(rows).assign(source="s", phase="measured", error=None)
    return trials, requests


def test_per_category_figures_pool_the_repeats():
    table = category_figures(*frames()).set_index("category")
    code, prose = table.loc["code"], table.loc["prose"]
    assert code.requests == 2 and code.share == pytest.approx(2 / 6)
    assert code["mean acceptance length"] == pytest.approx(1 + 30 / 20)
    assert code["acceptance rate"] == pytest.approx(30 / 40)
    assert code["acceptance per position"] == "1.00 / 0.50"
    assert prose["acceptance per position"] == "0.40 / 0.10"
    assert code["decode tok/s per session"] == pytest.approx(100.0)
    assert prose["decode tok/s per session"] == pytest.approx(1 / 0.03)
    assert code["mix weight"] == pytest.approx(0.75)


def test_the_mix_row_reweights_categories_to_the_mix_not_to_their_counts():
    table = category_figures(*frames()).set_index("category")
    mix = table.loc["mix (code 75%, prose 25%)"]
    # Per-request means: code 15 accepted / 10 steps, prose 5 / 10; weighted 3:1.
    assert mix["mean acceptance length"] == pytest.approx(1 + (0.75 * 15 + 0.25 * 5) / 10)
    assert mix["acceptance per position"] == f"{0.75 * 1.0 + 0.25 * 0.4:.2f} / {0.75 * 0.5 + 0.25 * 0.1:.2f}"
    assert mix["decode tok/s per session"] == pytest.approx(100.0)  # 75 % of the weight at 10 ms: the median
    # As sampled (4 prose to 2 code) the pooled figure is prose's side.
    pooled = 1 + (2 * 15 + 4 * 5) / 60
    assert mix["mean acceptance length"] > pooled


def test_no_mix_no_mix_row_and_no_spec_counters_no_acceptance():
    trials, requests = frames(params=json.dumps({"prompt_format": "mt_bench"}))
    requests = requests.assign(spec_num_steps=None, spec_accepted_per_position=[[]] * len(requests))
    table = category_figures(trials, requests)
    assert list(table.category) == ["code", "prose"]
    assert table["mean acceptance length"].isna().all() and (table["acceptance per position"] == "–").all()


def test_weighted_median():
    import math

    import numpy as np

    assert weighted_median(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 5.0])) == 3.0
    assert weighted_median(np.array([3.0, 1.0, 2.0]), np.array([1.0, 1.0, 1.0])) == 2.0
    assert math.isnan(weighted_median(np.array([1.0, 2.0]), np.array([0.0, 0.0])))
