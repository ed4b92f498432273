"""One engine runs every draft count (runner.plan.draft_hosts, runner.vllm.draft_count), on real CPU engines with
the trained embedded model's own acceptance and greedy decoding: the same trials (same ids, same prompts) run once
with a load per k and once on the largest-k engine with its draft count set between trials. The second run loads
one MTP engine instead of two; its rows say which k ran and on which engine; and each trial's outputs and accepted
draft tokens are identical to the static engine's (the draft count is the scheduler's per-step lookup, nothing
else changes on CPU)."""
from __future__ import annotations

import pytest

from runner.sinks.parquet import read_frame
from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

GRID = ("sweep.grid.spec_method=[mtp]", "sweep.grid.num_speculative_tokens=[1,3]", "sweep.grid.concurrency=[1,2]",
        "sweep.grid.max_model_len=[256]", "workload.decode.input_len=48", "workload.decode.output_len=48",
        "+workload.decode.prompt_source=corpus", "tracking=none", "report=false")


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    out = tmp_path_factory.mktemp("live_drafts")
    runs = {}
    for mode in ("off", "on"):
        run_cli(f"run={mode}", "sweep.name=live", *GRID, f"execution.live_draft_count={mode}", output_root=out)
        runs[mode] = {name: read_frame(out / "live" / mode, name) for name in ("engines", "trials", "requests")}
    return runs


def test_the_largest_k_engine_is_the_only_mtp_load(both):
    assert len(both["off"]["engines"]) == 2 and len(both["on"]["engines"]) == 1
    (engine,) = both["on"]["engines"].to_dict("records")
    assert engine["num_speculative_tokens"] == 3 and engine["status"] == "ok"


def test_each_row_records_the_k_that_ran_and_the_engine_that_ran_it(both):
    trials = both["on"]["trials"]
    engine_id = both["on"]["engines"].engine_id.iloc[0]
    assert (trials.status == "ok").all() and (trials.engine_id == engine_id).all()
    assert sorted(trials.num_speculative_tokens) == [1, 1, 3, 3]
    assert (trials.engine_num_speculative_tokens == 3).all()
    assert list(trials.draft_set_live) == list(trials.num_speculative_tokens == 1)
    k1 = trials[trials.num_speculative_tokens == 1]
    assert (k1.spec_num_draft_tokens == k1.spec_num_drafts).all()  # one draft token per step: k = 1 ran
    assert all(len(p) == 1 for p in k1.spec_acceptance_per_position)


def test_outputs_and_accepted_counts_match_the_static_engines(both):
    off = both["off"]["trials"].set_index("trial_id")
    on = both["on"]["trials"].set_index("trial_id")
    assert sorted(off.index) == sorted(on.index)  # the same trials, by id
    for trial_id in off.index:
        a, b = off.loc[trial_id], on.loc[trial_id]
        assert a.output_hash == b.output_hash, trial_id
        assert (a.spec_num_drafts, a.spec_num_accepted_tokens) == (b.spec_num_drafts, b.spec_num_accepted_tokens)
        assert list(a.spec_acceptance_per_position) == pytest.approx(list(b.spec_acceptance_per_position))
