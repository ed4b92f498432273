"""Acceptance predicted for every k from hand-made counters."""
from __future__ import annotations

import math

import pytest

from runner.numerics.spec_predict import (acceptance_lengths, lengths_from_rates, pooled_rates,
                                             predict_acceptance)
from runner.numerics.stats import mean_interval


def test_lengths_from_counters():
    # 100 drafts: 80 accepted at position 0, 60 at 1 (0 and 1 both accepted), 30 at 2.
    assert acceptance_lengths(drafts=100, accepted_per_position=[80, 60, 30]) == pytest.approx([1.8, 2.4, 2.7])
    assert acceptance_lengths(drafts=0, accepted_per_position=[0, 0]) == []
    assert lengths_from_rates([0.5]) == [1.5]


def _row(method="mtp", k=3, rates=(0.8, 0.6, 0.3), repeat=0, drafts=100, **extra):
    row = {"status": "ok", "model": "m", "spec_method": method, "num_speculative_tokens": k, "workload": "decode",
           "workload_params_json": "{}", "concurrency": 1, "repeat": repeat, "spec_num_drafts": drafts,
           "spec_acceptance_per_position": list(rates), "spec_mean_acceptance_length": 1 + sum(rates),
           "spec_schedule": None, "spec_acceptance_profile": None}
    row.update(extra)
    return row


def test_every_smaller_k_predicted_with_an_interval_over_repeats():
    trials = [_row(rates=(0.8, 0.6, 0.3), repeat=0), _row(rates=(0.82, 0.62, 0.31), repeat=1),
              _row(rates=(0.78, 0.58, 0.29), repeat=2)]
    trials += [_row(k=1, rates=(r,), repeat=i) for i, r in enumerate((0.79, 0.81, 0.80))]
    predictions = {(p.source_k, p.k): p for p in predict_acceptance(trials)}
    assert set(predictions) == {(3, 1), (3, 2)}  # k=1 engines predict nothing smaller
    one, two = predictions[(3, 1)], predictions[(3, 2)]
    assert one.predicted.point == pytest.approx(1.8) and two.predicted.point == pytest.approx(2.4)
    assert one.predicted.lo < 1.8 < one.predicted.hi and one.n_predicted == 3
    assert one.measured.point == pytest.approx(1.8) and one.n_measured == 3 and one.inside
    assert two.measured is None and two.inside is None  # nothing measured at k=2


def test_ngram_schedules_and_failed_trials_are_not_predicted():
    trials = [_row(method="ngram"), _row(spec_schedule="[[1,1,3],[2,8,1]]"), _row(status="failed"),
              _row(method="off", k=0, rates=(), drafts=None)]
    assert predict_acceptance(trials) == []


def test_groups_do_not_mix():
    trials = [_row(concurrency=1, repeat=0), _row(concurrency=4, repeat=0, rates=(0.5, 0.2, 0.1)),
              _row(k=1, concurrency=4, rates=(0.5,))]
    by_c = {p.coordinates["concurrency"]: p for p in predict_acceptance(trials) if p.k == 1}
    assert by_c[1].measured is None and by_c[4].measured.point == pytest.approx(1.5)
    assert by_c[4].predicted.point == pytest.approx(1.5)


def test_one_repeat_has_no_bounds():
    interval = mean_interval([2.0])
    assert interval.point == 2.0 and math.isnan(interval.lo)
    p = predict_acceptance([_row(), _row(k=1, rates=(0.8,))])[0]
    assert p.inside is None


def test_pooled_rates_weigh_by_drafts_and_never_increase():
    trials = [_row(k=2, rates=(0.8, 0.5), drafts=100), _row(k=3, rates=(0.6, 0.55, 0.2), drafts=300),
              _row(method="eagle", rates=(0.1, 0.1, 0.1))]
    rates = pooled_rates(trials, method="mtp")
    assert rates[0] == pytest.approx((80 + 180) / 400)
    assert rates[1] == pytest.approx((50 + 165) / 400)
    assert rates[2] == pytest.approx(0.2)
    # Position 1 pools only the k=2 engine's drafts (0.3), position 0 mostly the k=1 engine's (0.2).
    rising = pooled_rates([_row(k=2, rates=(0.3, 0.3), drafts=1000), _row(k=1, rates=(0.2,), drafts=10000)],
                          method="mtp")
    assert rising[0] == pytest.approx(2300 / 11000) and rising[1] == rising[0]
