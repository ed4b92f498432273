import pytest

from runner.measurement.counters import CounterSnapshot, delta_metrics
from runner.measurement.latency import (Timeline, chunk_gaps, decode_rate, distinct_token_share, e2e, goodput,
                                        measured_span, per_token_latencies, percentile, tpot, trial_latency_summary,
                                        ttft)
from runner.slo import Metric, Slo, Target


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


def test_itl_is_one_gap_per_chunk_and_the_per_token_split_is_kept_apart():
    # Speculative decoding: 3 tokens arrive together 0.3 s after the first.
    t = timeline(0.0, [(0.1, 1), (0.4, 3)])
    assert chunk_gaps(t) == pytest.approx([0.3])
    assert per_token_latencies(t) == pytest.approx([0.1, 0.1, 0.1])
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
    rate, share = goodput([fast, slow], slo=Slo(targets=(Target(metric=Metric.TTFT, ms=100),)), duration_s=2.0)
    assert rate == pytest.approx(0.5)
    assert share == pytest.approx(0.5)
    assert goodput([fast], slo=Slo(), duration_s=1.0) == (None, None)


def test_trial_summary_aggregate_throughput_over_the_measured_span():
    ts = [timeline(0.0, [(0.1, 1), (1.1, 9)]), timeline(0.5, [(0.7, 1), (2.0, 9)])]
    s = trial_latency_summary(ts)
    assert s["duration_s"] == pytest.approx(2.0)  # first send 0.0 → last token 2.0
    assert s["output_tokens_total"] == 20
    assert s["decode_tok_s_aggregate"] == pytest.approx(10.0)
    assert s["chunk_tokens_mean"] == pytest.approx(9.0)
    assert s["chunk_tokens_p50"] == pytest.approx(9.0)


def test_per_session_rate_is_one_over_median_tpot_and_the_mean_is_named_apart():
    # TPOTs 0.1, 0.1, 0.4 s: 1/median = 10 tok/s, mean of 1/TPOT = (10 + 10 + 2.5) / 3 = 7.5.
    ts = [timeline(0.0, [(0.0, 1), (0.1, 1)]), timeline(0.0, [(0.0, 1), (0.1, 1)]),
          timeline(0.0, [(0.0, 1), (0.4, 1)])]
    s = trial_latency_summary(ts)
    assert s["decode_tok_s_per_session"] == pytest.approx(10.0)
    assert s["decode_tok_s_per_session_mean"] == pytest.approx(7.5)


def test_measured_span_starts_at_the_first_send():
    assert measured_span([timeline(1.0, [(1.5, 1)]), timeline(2.0, [(4.0, 3)])]) == pytest.approx(3.0)
    assert measured_span([]) is None


def test_distinct_token_share_names_looping_outputs():
    assert distinct_token_share([[1, 2, 3, 4], [5, 5, 5, 5]]) == pytest.approx((1.0 + 0.25) / 2)
    assert distinct_token_share([[]]) is None


def _vllm_request_outputs(timelines):
    """The same streams as vLLM's own benchmark client records them (benchmarks/lib/endpoint_request_func.py):
    ttft at the first chunk, one ITL per later chunk, latency at the last chunk."""
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    outs = []
    for t in timelines:
        out = RequestFuncOutput(success=True, output_tokens=t.output_tokens, prompt_len=8)
        recent = t.sent_at
        for i, at in enumerate(t.chunk_times):
            if i == 0:
                out.ttft = at - t.sent_at
            else:
                out.itl.append(at - recent)
            recent = at
        out.latency = recent - t.sent_at
        outs.append(out)
    return outs


def test_columns_match_vllm_bench_serve_on_a_speculative_stream():
    """vLLM's own calculate_metrics on the same synthetic MTP-like streams (chunks of 1–4 tokens)."""
    import random

    from vllm.benchmarks.serve import calculate_metrics

    rng = random.Random(7)
    ts = []
    for r in range(6):
        t, at = Timeline(sent_at=0.01 * r), 0.05 + 0.01 * r
        t.add_chunk(at=at, tokens=1)
        for _ in range(20):
            at += rng.uniform(0.005, 0.05)
            t.add_chunk(at=at, tokens=rng.randint(1, 4))
        ts.append(t)
    ours = trial_latency_summary(ts)
    metrics, _ = calculate_metrics(input_requests=[], outputs=_vllm_request_outputs(ts), dur_s=ours["duration_s"],
                                   tokenizer=None, selected_percentiles=[50, 90, 99], goodput_config_dict={})
    pct = lambda pairs: dict(pairs)  # noqa: E731
    assert ours["ttft_mean_s"] * 1000 == pytest.approx(metrics.mean_ttft_ms)
    assert ours["ttft_p99_s"] * 1000 == pytest.approx(pct(metrics.percentiles_ttft_ms)[99])
    assert ours["tpot_p50_s"] * 1000 == pytest.approx(metrics.median_tpot_ms)
    assert ours["tpot_p99_s"] * 1000 == pytest.approx(pct(metrics.percentiles_tpot_ms)[99])
    assert ours["itl_mean_s"] * 1000 == pytest.approx(metrics.mean_itl_ms)
    assert ours["itl_p50_s"] * 1000 == pytest.approx(metrics.median_itl_ms)
    assert ours["itl_p99_s"] * 1000 == pytest.approx(pct(metrics.percentiles_itl_ms)[99])
    assert ours["e2e_p90_s"] * 1000 == pytest.approx(pct(metrics.percentiles_e2el_ms)[90])
    assert ours["decode_tok_s_aggregate"] == pytest.approx(metrics.output_throughput)
    # The per-token split is a different figure, and named apart: below vLLM's ITL when chunks carry > 1 token.
    assert ours["itl_token_p99_s"] < ours["itl_p99_s"]


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
