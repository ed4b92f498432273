"""The step-cost model: step time against k at one point, predicted speed = AL / step time, from hand-made trials."""
from __future__ import annotations

import pytest

from runner.numerics.step_cost import contenders, interpolate, predict_speeds


def _row(method="mtp", k=3, rates=(0.8, 0.6, 0.3), itl=0.016, repeat=0, concurrency=1, batch=None, **extra):
    row = {"status": "ok", "model": "m", "spec_method": method, "num_speculative_tokens": k, "workload": "decode",
           "workload_params_json": "{}", "concurrency": concurrency, "repeat": repeat, "itl_mean_s": itl,
           "spec_num_drafts": 100 if k else None, "spec_acceptance_per_position": list(rates),
           "spec_mean_acceptance_length": 1 + sum(rates) if k else None,
           "batch_size_mean": batch, "batch_size_p50": batch, "spec_schedule": None, "spec_acceptance_profile": None}
    row.update(extra)
    return row


def _by_k(predictions, method="mtp"):
    return {p.k: p for p in predictions if p.method == method}


def test_interpolation_between_measured_ks_only():
    points = {0: 10.0, 3: 16.0}
    assert interpolate(points, 1) == pytest.approx(12.0)
    assert interpolate(points, 3) == 16.0
    assert interpolate(points, 4) is None and interpolate({1: 1.0}, 0) is None


def test_smaller_k_predicted_from_the_largest_with_off_as_k0():
    trials = [_row(method="off", k=0, rates=(), itl=0.010), _row(k=3, itl=0.016)]
    by_k = _by_k(predict_speeds(trials))
    assert sorted(by_k) == [0, 1, 2, 3]
    assert by_k[0].tok_s_per_session.point == pytest.approx(100.0) and by_k[0].measured
    assert by_k[2].step_s.point == pytest.approx(0.014) and not by_k[2].measured
    assert by_k[2].acceptance_length.point == pytest.approx(2.4)
    assert by_k[2].tok_s_per_session.point == pytest.approx(2.4 / 0.014)
    assert by_k[3].tok_s_per_session.point == pytest.approx(2.7 / 0.016)


def test_aggregate_uses_the_engines_batch_and_repeats_give_an_interval():
    trials = []
    for r, jitter in enumerate((1.0, 1.05, 0.95)):
        trials += [_row(method="off", k=0, rates=(), itl=0.020 * jitter, repeat=r, concurrency=4, batch=4.0),
                   _row(k=1, rates=(0.8,), itl=0.024 * jitter, repeat=r, concurrency=4, batch=3.5)]
    by_k = _by_k(predict_speeds(trials))
    one = by_k[1]
    assert one.n == 3 and one.batch_size == pytest.approx(3.75)
    assert one.tok_s_aggregate.lo < one.tok_s_aggregate.point < one.tok_s_aggregate.hi
    assert one.tok_s_aggregate.point == pytest.approx(one.tok_s_per_session.point * 3.75, rel=0.01)


def test_ngram_only_where_it_ran_and_points_do_not_mix():
    trials = [_row(method="off", k=0, rates=(), itl=0.010), _row(method="ngram", k=3, rates=(0.2, 0.1, 0.05)),
              _row(k=2, rates=(0.8, 0.6), itl=0.02, concurrency=8)]
    ngram = _by_k(predict_speeds(trials), "ngram")
    assert sorted(ngram) == [0, 3]
    mtp = _by_k(predict_speeds(trials))
    assert sorted(mtp) == [2]  # c=8 has no off trial: nothing below k=2 to interpolate from


def test_contenders_are_the_best_and_those_whose_interval_reaches_it():
    trials = []
    for r, jitter in enumerate((1.0, 1.1, 0.9)):
        trials += [_row(method="off", k=0, rates=(), itl=0.010 * jitter, repeat=r),
                   _row(k=3, rates=(0.9, 0.1, 0.0), itl=0.030 * jitter, repeat=r)]
    by_k = _by_k(predict_speeds(trials))
    # AL(1)=1.9 at 0.0167 s beats off (1.0 at 0.010 s); k=3 (2.0 at 0.030 s) does not reach it.
    assert contenders(by_k.values())[0] == 1
    assert 3 not in contenders(by_k.values())


def test_predicted_best_k_per_batch_size_feeds_the_schedule():
    from runner.numerics.draft_schedule import build_schedule
    from runner.numerics.step_cost import predicted_best_k

    trials = []
    for r, jitter in enumerate((1.0, 1.01, 0.99)):
        # Alone: drafting is nearly free (k=3 wins); at 16 sessions each draft costs (off wins).
        trials += [_row(method="off", k=0, rates=(), itl=0.010 * jitter, repeat=r, batch=1.0),
                   _row(k=3, rates=(0.8, 0.6, 0.4), itl=0.011 * jitter, repeat=r, batch=1.0),
                   _row(method="off", k=0, rates=(), itl=0.010 * jitter, repeat=r, concurrency=16, batch=16.0),
                   _row(k=3, rates=(0.8, 0.6, 0.4), itl=0.040 * jitter, repeat=r, concurrency=16, batch=16.0)]
    best = predicted_best_k(predict_speeds(trials), method="mtp")
    assert best == {1: [3], 16: [0]}
    assert build_schedule(best, max_num_seqs=32).as_list() == [[1, 15, 3], [16, 32, 0]]
