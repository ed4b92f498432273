"""The reference workloads on real engines (prefix caching on vs off), checked through their Parquet files.

One sweep runs every async workload on two engines; a second, one-engine sweep runs
decode through the offline API with prompts from a JSONL file.
"""
import json

import pytest

from runner.sinks.parquet import read_frame

from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

BLOCK = 128  # the CPU build's KV block size; only full blocks are cached
WORKLOADS = "[decode,shared_prefix,second_request,multi_turn,long_context,fixed_task]"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("workloads")
    run_cli(
        "run=wl", "sweep.name=workloads", "tracking=none", "report=false", f"workload={WORKLOADS}",
        "sweep.grid.spec_method=[off]", "sweep.grid.enable_prefix_caching=[true,false]",
        "sweep.grid.max_model_len=[2048]", "sweep.grid.concurrency=[2]",
        "workload.decode.input_len=64", "workload.decode.output_len=16",
        "workload.shared_prefix.prefix_len=512", "workload.shared_prefix.suffix_len=64",
        "workload.shared_prefix.output_len=8", "workload.shared_prefix.warm_prefix=true",
        "workload.second_request.input_len=400", "workload.second_request.output_len=8",
        "workload.multi_turn.context_len=300", "workload.multi_turn.turn_tokens=100",
        "workload.multi_turn.output_len=8", "workload.multi_turn.turns=3",
        "workload.long_context.output_len=8",
        "workload.fixed_task.input_len=200", "workload.fixed_task.output_len=32", "+workload.fixed_task.repeats=2",
        output_root=out,
    )
    run_dir = out / "workloads" / "wl"
    trials = read_frame(run_dir, "trials")
    requests = read_frame(run_dir, "requests")
    requests = requests.merge(trials[["trial_id", "workload", "enable_prefix_caching", "repeat"]], on="trial_id")
    return trials, requests


def of(requests, workload, caching):
    return requests[(requests.workload == workload) & (requests.enable_prefix_caching == caching)]


def test_every_workload_ran_on_both_engines(sweep):
    trials, _ = sweep
    assert (trials.status == "ok").all(), trials[trials.status != "ok"][["workload", "failure_reason"]]
    assert set(trials.workload) == set(WORKLOADS.strip("[]").split(","))
    assert set(trials.enable_prefix_caching) == {True, False}


def test_multi_turn_hits_the_cache_from_turn_two_only_with_caching(sweep):
    _, requests = sweep
    on, off = of(requests, "multi_turn", True), of(requests, "multi_turn", False)
    assert sorted(on.turn.unique()) == [0, 1, 2]
    assert (on[on.turn == 0].cached_tokens == 0).all()
    assert (on[on.turn >= 1].cached_tokens >= 2 * BLOCK).all()
    assert (off.cached_tokens == 0).all()
    # The history grows by the answer and the new turn's tokens, in the embedded model's ChatML: turn 0 wraps its
    # 300 tokens in "<|im_start|>user\n" … "<|im_end|>\n<|im_start|>assistant\n" (11 tokens), each later turn
    # adds "<|im_end|>\n<|im_start|>user\n" … (13 with the new header).
    first = on[(on.session == 0)].sort_values("turn")
    assert list(first.prompt_tokens) == [311, 311 + 8 + 113, 311 + 2 * (8 + 113)]


def test_multi_turn_sessions_are_chats_in_the_models_template(sweep):
    trials, requests = sweep
    multi = requests[requests.workload == "multi_turn"]
    assert set(multi.prompt_rendering) == {"chat_template"}
    assert set(requests[requests.workload == "decode"].prompt_rendering) == {"raw"}
    assert set(trials[trials.workload == "multi_turn"].prompt_rendering) == {"chat_template"}
    # ChatML around the 300 tokens: <|im_start|> "user" "\n" … <|im_end|> "\n" <|im_start|> "assistant" "\n".
    first = multi[multi.turn == 0].prompt_tokens
    assert (first > 300).all() and (first < 300 + 16).all()


def test_second_request_repeat_has_cached_tokens(sweep):
    _, requests = sweep
    on = of(requests, "second_request", True)
    assert (on[on.phase == "cold"].cached_tokens == 0).all()
    # The cold request fills the cache and gives the cold TTFT; the repeat decodes the trial's output_len.
    assert (on[on.phase == "cold"].output_tokens == 1).all() and (on[on.phase == "repeat"].output_tokens == 8).all()
    assert (on[on.phase == "repeat"].cached_tokens == 3 * BLOCK).all()
    assert (of(requests, "second_request", False).cached_tokens == 0).all()


def test_shared_prefix_sessions_reuse_the_warmed_prefix(sweep):
    _, requests = sweep
    on = of(requests, "shared_prefix", True)
    measured = on[on.phase == "measured"]
    assert len(measured) == 2 and (measured.cached_tokens >= 512 - BLOCK).all()
    assert (of(requests, "shared_prefix", False).cached_tokens == 0).all()


def test_long_context_fills_the_model_and_repeat_reuses_the_prefix(sweep):
    _, requests = sweep
    on = of(requests, "long_context", True)
    first, repeat = on[on.phase == "first"].iloc[0], on[on.phase == "repeat"].iloc[0]
    assert 1800 < first.prompt_tokens + first.output_tokens <= 2048
    assert first.cached_tokens == 0
    assert repeat.cached_tokens >= first.prompt_tokens - 2 * BLOCK


def test_fixed_task_stores_measured_runs_with_identical_outputs(sweep):
    trials, requests = sweep
    for caching in (True, False):
        ft = of(requests, "fixed_task", caching)
        for _, trial in ft.groupby("trial_id"):
            assert list(trial.sort_values("turn").phase) == ["warmup", "measured", "measured", "measured"]
            measured = trial[trial.phase == "measured"]
            assert (measured.output_tokens == 32).all()
            assert all(len(ids) == 32 for ids in measured.output_token_ids)
            assert measured.output_hash.nunique() == 1  # temperature 0, fixed seed
    rows = trials[trials.workload == "fixed_task"]
    assert (rows.num_requests == 3).all()
    assert rows.output_hash.notna().all()


def test_prefix_cache_is_reset_between_trials(sweep):
    # fixed_task's prompt is the same in both repeats: the second trial's warm-up is cold only after a reset.
    _, requests = sweep
    ft = of(requests, "fixed_task", True)
    warmups = ft[ft.phase == "warmup"]
    assert sorted(warmups.repeat) == [0, 1]
    assert (warmups.cached_tokens == 0).all()
    assert (ft[ft.phase == "measured"].cached_tokens > 0).all()


MEASURED_PHASES = {"second_request": {"repeat"}, "long_context": {"first"}, "fixed_task": {"measured"},
                   "shared_prefix": {"measured"}, "decode": {"measured"}, "multi_turn": {"measured"}}


def test_counters_cover_the_measured_requests_only(sweep):
    # vLLM counts each new request's prompt tokens as queries and its cache hits as hits; a trial's
    # counter deltas must equal the sums over that trial's own measured requests: no bleed from the trial
    # before, and no cold phase, warm-up prefix or warm-up run inside.
    trials, requests = sweep
    measured = requests[[phase in MEASURED_PHASES[w] for w, phase in zip(requests.workload, requests.phase)]]
    sums = measured.groupby("trial_id").agg(prompt=("prompt_tokens", "sum"), cached=("cached_tokens", "sum"))
    merged = trials[trials.enable_prefix_caching].set_index("trial_id").join(sums)
    assert len(merged) == 7
    assert (merged.prefix_cache_queries == merged.prompt).all(), merged[["workload", "prefix_cache_queries", "prompt"]]
    assert (merged.prefix_cache_hits == merged.cached).all(), merged[["workload", "prefix_cache_hits", "cached"]]
    assert merged.prefix_cache_hit_rate.notna().all()


def test_second_request_reports_the_repeats_hit_rate_and_span(sweep):
    trials, _ = sweep
    rows = trials[trials.workload == "second_request"].set_index("enable_prefix_caching")
    assert rows.loc[True, "prefix_cache_hit_rate"] == pytest.approx(3 * BLOCK / 400)
    assert not rows.loc[False, "prefix_cache_hits"] > 0  # no cache: vLLM counts no hits (or no queries at all)
    # Throughput divides by the repeats' own span, not by the whole trial with its cold phase.
    assert (rows.duration_s < rows.wall_s).all()


def test_each_new_shape_is_warmed_up_once_per_engine(sweep):
    trials, _ = sweep
    first = trials[trials.repeat == 0]
    assert (first.warmup_s > 0).all(), first[["workload", "warmup_s"]]
    # Round 1 runs on the engine that stayed loaded (CPU engines are resident): its shape is already warm, which the
    # row says with 0 (a reloaded engine would warm it again; null means warm-up off).
    again = trials[(trials.workload == "fixed_task") & (trials.repeat == 1)]
    assert len(again) == 2 and again.warmup_s.notna().all()


def test_trials_record_gc_pauses_and_output_variety(sweep):
    trials, _ = sweep
    assert trials.gc_pauses.notna().all() and (trials.gc_pause_total_ms >= 0).all()
    assert ((trials.distinct_token_share > 0) & (trials.distinct_token_share <= 1)).all()


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    out = tmp_path_factory.mktemp("offline")
    prompts = out / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"def f{i}(x):\n    return x * {i}\n"}) for i in range(50)))
    run_cli(
        "run=off", "sweep.name=offline", "tracking=none", "report=false", "workload=[decode]",
        "sweep.grid.spec_method=[off]", "sweep.grid.max_model_len=[512]", "sweep.grid.concurrency=[4]",
        "workload.decode.api=offline", "workload.decode.input_len=48", "workload.decode.output_len=16",
        "++workload.decode.prompt_source=jsonl", f"++workload.decode.prompt_file={prompts}",
        output_root=out,
    )
    run_dir = out / "offline" / "off"
    return (read_frame(run_dir, "engines"), read_frame(run_dir, "trials"),
            read_frame(run_dir, "requests"))


def test_offline_api_runs_a_batch_on_its_own_engine(offline):
    engines, trials, requests = offline
    assert list(engines.api) == ["offline"] and (engines.status == "ok").all()
    assert (engines.kv_capacity_tokens > 0).all()
    assert list(trials.api) == ["offline"] and (trials.status == "ok").all()
    assert trials.decode_tok_s_aggregate.iloc[0] > 0
    assert len(requests) == 4
    assert (requests.output_tokens == 16).all() and (requests.prompt_tokens == 48).all()
    assert (requests.ttft_s > 0).all() and (requests.e2e_s >= requests.ttft_s).all()
    assert trials.prefix_cache_queries.iloc[0] == 4 * 48
