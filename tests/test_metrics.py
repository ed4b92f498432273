import pytest

from runner.measurement.counters import CounterSnapshot, delta_metrics
from runner.measurement.metrics import (Slo, Timeline, decode_rate, e2e, goodput, inter_token_latencies,
                                        percentile, tpot, trial_latency_summary, ttft)


def timeline(sent, chunks):
    t = Timeline(sent_at=sent)
    for at, n in chunks:
        t.add_chunk(at=at, tokens=n)
    return t


def test_ttft_e2e_tpot_on_a_hand_made_timeline():
    t = timeline(10.0, [(10.5, 1), (10.7, 1), (10.9, 1), (11.1, 1)])
    assert ttft(t) == pytest.approx(0.5)
    assert e2e(t) == pytest.approx(1.1)
    assert tpot(t) == pytest.approx(0.2)
    assert decode_rate(t) == pytest.approx(5.0)


def test_a_chunk_of_k_tokens_counts_as_k_inter_token_latencies():
    # Speculative decoding: 3 tokens arrive together 0.3 s after the first.
    t = timeline(0.0, [(0.1, 1), (0.4, 3)])
    assert inter_token_latencies(t) == pytest.approx([0.1, 0.1, 0.1])
    assert tpot(t) == pytest.approx(0.3 / 3)


def test_tpot_is_undefined_for_one_token():
    assert tpot(timeline(0.0, [(0.1, 1)])) is None


def test_empty_chunks_are_ignored():
    t = timeline(0.0, [(0.1, 0), (0.2, 2)])
    assert t.chunk_sizes == [2]
    assert ttft(t) == pytest.approx(0.2)


def test_percentile_matches_linear_interpolation():
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert percentile([], 50) is None


def test_goodput_counts_requests_meeting_every_slo():
    fast = timeline(0.0, [(0.05, 1), (0.15, 1)])
    slow = timeline(0.0, [(0.5, 1), (0.6, 1)])
    rate, share = goodput([fast, slow], slo=Slo(ttft_ms=100), duration_s=2.0)
    assert rate == pytest.approx(0.5)
    assert share == pytest.approx(0.5)
    assert goodput([fast], slo=Slo(), duration_s=1.0) == (None, None)


def test_trial_summary_aggregate_throughput():
    ts = [timeline(0.0, [(0.1, 1), (1.1, 9)]), timeline(0.0, [(0.2, 1), (1.2, 9)])]
    s = trial_latency_summary(ts, duration_s=2.0)
    assert s["output_tokens_total"] == 20
    assert s["decode_tok_s_aggregate"] == pytest.approx(10.0)
    assert s["decode_tok_s_per_session"] == pytest.approx(9.0)
    assert s["mean_chunk_tokens"] == pytest.approx(9.0)


def test_counter_deltas_use_vllm_definitions():
    before = CounterSnapshot(scalars={"vllm:spec_decode_num_drafts": 10, "vllm:spec_decode_num_draft_tokens": 30,
                                      "vllm:spec_decode_num_accepted_tokens": 15, "vllm:prefix_cache_queries": 100,
                                      "vllm:prefix_cache_hits": 0},
                             vectors={"vllm:spec_decode_num_accepted_tokens_per_pos": [8, 5, 2]})
    after = CounterSnapshot(scalars={"vllm:spec_decode_num_drafts": 20, "vllm:spec_decode_num_draft_tokens": 60,
                                     "vllm:spec_decode_num_accepted_tokens": 27, "vllm:prefix_cache_queries": 200,
                                     "vllm:prefix_cache_hits": 50},
                            vectors={"vllm:spec_decode_num_accepted_tokens_per_pos": [16, 9, 4]})
    d = delta_metrics(before, after)
    assert d["spec_num_drafts"] == 10
    assert d["spec_acceptance_rate"] == pytest.approx(12 / 30)
    assert d["spec_mean_acceptance_length"] == pytest.approx(1 + 12 / 10)
    assert d["spec_acceptance_per_position"] == pytest.approx([0.8, 0.4, 0.2])
    assert d["prefix_cache_hit_rate"] == pytest.approx(0.5)


def test_no_drafts_means_no_acceptance_figures():
    d = delta_metrics(CounterSnapshot(), CounterSnapshot(scalars={"vllm:spec_decode_num_drafts": 0}))
    assert d["spec_acceptance_rate"] is None
    assert d["spec_acceptance_per_position"] == []
