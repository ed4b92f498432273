"""Production-shaped load on one real engine (the trained tiny model, MTP k=1, prefix caching on), checked
through its Parquet files and report: Poisson arrivals, a Mooncake-format trace replayed on its clock, and a
three-category MT-Bench-format prompt set with per-category acceptance re-weighted to a mix.

One sweep runs every workload here on one engine, with short outputs, so the file adds one engine load.
"""
from pathlib import Path

import pytest

from runner.measurement.arrivals import gaps
from runner.traffic.traces import read_trace
from runner.sinks.parquet import read_frame

from tests.support.cli import run_cli
from tests.support.ks import exponential_cdf, ks_pvalue, ks_statistic

pytestmark = pytest.mark.engine

RATE = 20.0  # req/s of the Poisson decode
POISSON_REQUESTS = 80
TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "load" / "mooncake_200.jsonl"
BLOCK = 128  # the CPU build's KV block size; the trace's hash blocks are set to it
QUESTIONS = TRACE.with_name("questions_3cat.jsonl")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("load")
    run_cli(
        "run=load", "sweep.name=load", "tracking=none", "workload=[decode,trace,prompt_set]",
        "sweep.grid.spec_method=[mtp]", "sweep.grid.num_speculative_tokens=[1]",
        "sweep.grid.enable_prefix_caching=[true]", "sweep.grid.max_model_len=[2048]", "sweep.grid.concurrency=[1]",
        "workload.decode.input_len=32", "workload.decode.output_len=8",
        "workload.decode.arrival=poisson", f"workload.decode.request_rate={RATE}",
        f"workload.decode.num_requests={POISSON_REQUESTS}",
        f"workload.trace.trace_file={TRACE}", f"workload.trace.block_tokens={BLOCK}",
        f"workload.prompt_set.prompt_file={QUESTIONS}", "workload.prompt_set.prompt_format=mt_bench",
        "workload.prompt_set.output_len=32", "workload.prompt_set.mix={code:1,prose:1,counting:2}",
        output_root=out,
    )
    run_dir = out / "load" / "load"
    trials = read_frame(run_dir, "trials")
    requests = read_frame(run_dir, "requests").merge(trials[["trial_id", "workload"]], on="trial_id")
    return trials, requests, run_dir


def test_every_trial_ran(sweep):
    trials, _, _ = sweep
    assert (trials.status == "ok").all(), trials[trials.status != "ok"][["workload", "failure_reason"]]


def test_poisson_send_gaps_pass_a_ks_test_against_the_set_rate(sweep):
    trials, requests, _ = sweep
    decode = requests[requests.workload == "decode"]
    assert len(decode) == POISSON_REQUESTS and decode.send_lag_s.notna().all()
    sent = decode.start_offset_s + decode.send_lag_s  # the recorded actual sends
    g = gaps(list(sent))
    p = ks_pvalue(ks_statistic(g, exponential_cdf(RATE)), len(g))
    assert p > 0.01, f"KS p={p:.4f} against the exponential at {RATE} req/s"
    row = trials[trials.workload == "decode"].iloc[0]
    assert row.arrival == "poisson" and row.offered_rate_req_s == RATE and row.concurrency == 0
    assert row.send_lag_p99_s is not None and row.client_behind in (True, False)
    # TTFT counts from the scheduled send: never shorter than the engine's own time to first token.
    assert (decode.ttft_s >= decode.engine_ttft_s.fillna(0) - 1e-3).all()


def cacheable(earlier, request) -> int:
    """Tokens of `request` a prefix cache can hold from `earlier` requests: their common prefix (hash blocks,
    cut at either prompt's end) in whole KV blocks, the prompt's last token always computed."""
    best = 0
    for e in earlier:
        n = 0
        while n < min(len(e.hash_ids), len(request.hash_ids)) and e.hash_ids[n] == request.hash_ids[n]:
            n += 1
        best = max(best, min(n * BLOCK, e.input_length, request.input_length - 1))
    return best // BLOCK * BLOCK


def test_trace_replays_every_request_with_its_lengths_on_its_clock(sweep):
    trials, requests, _ = sweep
    trace = read_trace(str(TRACE))
    rows = requests[requests.workload == "trace"].sort_values("session")
    assert len(rows) == len(trace) == 200
    assert list(rows.prompt_tokens) == [r.input_length for r in trace]
    assert list(rows.output_tokens) == [r.output_length for r in trace]
    scheduled = rows.start_offset_s - rows.start_offset_s.iloc[0]
    expected = [(r.timestamp_ms - trace[0].timestamp_ms) / 1000 for r in trace]
    assert list(scheduled) == pytest.approx(expected, abs=1e-6)
    row = trials[trials.workload == "trace"].iloc[0]
    assert row.arrival == "trace" and row.offered_rate_req_s == pytest.approx(199 / expected[-1], rel=1e-6)


def test_trace_requests_hit_the_prefix_cache_where_their_hash_ids_say(sweep):
    _, requests, _ = sweep
    trace = read_trace(str(TRACE))
    rows = requests[requests.workload == "trace"].sort_values("session").reset_index(drop=True)
    finished = rows.start_offset_s + rows.e2e_s
    hits = 0
    for i, r in enumerate(trace):
        cached = int(rows.cached_tokens[i])
        sent_before = [trace[j] for j in range(i) if rows.start_offset_s[j] <= rows.start_offset_s[i]]
        done_before = [trace[j] for j in range(i) if finished[j] <= rows.start_offset_s[i]]
        # Never more than the trace shares with what was sent before, nothing where it shares nothing; MTP gives
        # up the last matched block (EAGLE-style drafters), so a finished prefix hits all but at most one block.
        assert cached <= cacheable(sent_before, r), (i, r)
        if cacheable(done_before, r) >= 2 * BLOCK:
            assert cached >= cacheable(done_before, r) - BLOCK, (i, r, cached)
            hits += 1
    assert hits > 50


def test_prompt_set_requests_keep_their_category_and_carry_per_position_acceptance(sweep):
    _, requests, _ = sweep
    rows = requests[requests.workload == "prompt_set"]
    assert len(rows) == 24  # 12 questions × 2 turns
    assert rows.groupby("category").size().to_dict() == {"code": 8, "counting": 8, "prose": 8}
    assert (rows.spec_num_steps > 0).all()
    assert all(len(p) == 1 and 0 <= p[0] <= s for p, s in zip(rows.spec_accepted_per_position, rows.spec_num_steps))
    # Rendered as chat requests with the embedded model's template, nothing clipped.
    assert set(rows.prompt_rendering) == {"chat_template"} and (rows.prompt_clipped_tokens == 0).all()


def test_report_gives_acceptance_per_category_and_under_the_mix(sweep):
    from runner.report.build import write_report

    _, _, run_dir = sweep
    report = write_report(run_dirs=[run_dir], out_dir=run_dir / "again")
    text = report.path.read_text()
    assert "## Per prompt category" in text
    from runner.report.categories import category_figures, read_category_requests

    a = report.analysis
    table = category_figures(a.trials, read_category_requests(a.results.run_dirs, a.results.sources))
    table = table.set_index("category")
    lengths = table["mean acceptance length"]
    assert set(table.index) == {"code", "prose", "counting", "mix (code 25%, counting 50%, prose 25%)"}
    assert lengths.notna().all() and (lengths >= 1).all()
    categories = lengths.drop("mix (code 25%, counting 50%, prose 25%)")
    assert categories.min() <= lengths["mix (code 25%, counting 50%, prose 25%)"] <= categories.max()
    print(table[["requests", "decode tok/s per session", "mean acceptance length", "acceptance per position"]])
