"""Draft counts as vLLM deploys them, on real CPU engines (the trained embedded model), one sweep run once:
MTP at k = 1, 2, 3 and a schedule arm (k = 3 at batch size 1, k = 1 from 2 up), concurrency 1 and 4, 3 repeats,
prompts from the local corpus (seeded token prompts make this model decode the same loop in every repeat, and an
interval over repeats of one loop has no width).

- the schedule engine follows its schedule: draft tokens per draft is 3 alone and about 1 with 4 sessions;
- AL(1) and AL(2) predicted from the k = 3 engine's per-position counters fall inside the intervals measured at
  k = 1 and k = 2 (t intervals over the repeats, per concurrency);
- every trial records the engine's real batch size;
- one engine (MTP at k = 3) ran every arm, its draft count set between trials (runner.plan.draft_hosts).
"""
from __future__ import annotations

import pytest

from runner.numerics.spec_predict import predict_acceptance
from runner.numerics.step_cost import predict_speeds
from runner.sinks.parquet import read_frame, read_rows
from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

SCHEDULE = [[1, 1, 3], [2, 8, 1]]
ARMS = ("[{spec_method:mtp,num_speculative_tokens:1},{spec_method:mtp,num_speculative_tokens:2},"
        "{spec_method:mtp,num_speculative_tokens:3},"
        "{spec_method:mtp,num_speculative_tokens_per_batch_size:[[1,1,3],[2,8,1]]}]")


@pytest.fixture(scope="module")
def schedule_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("draft_schedule")
    run_cli("run=sched", "sweep.name=sched", "tracking=none", f"sweep.arms={ARMS}", "sweep.grid.concurrency=[1,4]",
            "sweep.grid.max_model_len=[256]", "sweep.repeats=3", "workload.decode.input_len=64",
            "workload.decode.output_len=96", "+workload.decode.prompt_source=corpus", output_root=out)
    return out / "sched" / "sched"


def test_all_engines_ran_and_the_schedule_is_on_its_rows(schedule_sweep):
    engines = read_frame(schedule_sweep, "engines")
    assert (engines.status == "ok").all() and len(engines) == 1  # every k and the schedule on the k = 3 engine
    assert engines.num_speculative_tokens.tolist() == [3]
    trials = read_frame(schedule_sweep, "trials")
    assert len(trials) == 24 and (trials.status == "ok").all()
    assert (trials.engine_num_speculative_tokens == 3).all()
    scheduled = trials[trials.spec_schedule.notna()]
    assert len(scheduled) == 6 and set(scheduled.spec_schedule) == {"[[1,1,3],[2,8,1]]"}
    assert (scheduled.num_speculative_tokens == 3).all()
    assert engines.added_engine_args_json.isna().all()  # vLLM 0.32 needs nothing added for a schedule


def test_the_schedule_engine_drafts_by_batch_size(schedule_sweep):
    trials = read_frame(schedule_sweep, "trials")
    scheduled = trials[trials.spec_schedule.notna()]
    per_draft = (scheduled.spec_num_draft_tokens / scheduled.spec_num_drafts).groupby(scheduled.concurrency)
    alone, four = per_draft.mean()[1], per_draft.mean()[4]
    assert alone == pytest.approx(3.0)  # batch size 1 at every step: k = 3
    assert four < 1.5  # batch size 2-4 at almost every step: k = 1 (prefill steps of fewer requests aside)
    # A static k = 3 engine drafts 3 per draft at both concurrencies.
    static = trials[(trials.num_speculative_tokens == 3) & trials.spec_schedule.isna()]
    assert (static.spec_num_draft_tokens == 3 * static.spec_num_drafts).all()


def test_smaller_k_acceptance_predicted_from_the_k3_engine(schedule_sweep):
    predictions = [p for p in predict_acceptance(read_rows(schedule_sweep, "trials")) if p.source_k == 3]
    assert {(p.k, p.coordinates["concurrency"]) for p in predictions} == {(1, 1), (2, 1), (1, 4), (2, 4)}
    for p in predictions:
        assert p.n_predicted == 3 and p.n_measured == 3
        assert p.inside, (f"AL({p.k}) at c={p.coordinates['concurrency']}: predicted {p.predicted.point:.3f}, "
                          f"measured {p.measured.point:.3f} [{p.measured.lo:.3f}-{p.measured.hi:.3f}]")


def test_speeds_predicted_for_every_k_from_the_measured_points(schedule_sweep):
    speeds = [p for p in predict_speeds(read_rows(schedule_sweep, "trials")) if p.method == "mtp"]
    assert {(p.k, p.coordinates["concurrency"]) for p in speeds} == {(k, c) for k in (1, 2, 3) for c in (1, 4)}
    for p in speeds:
        assert p.n == 3 and p.tok_s_per_session.point > 0 and p.step_s.point > 0
        assert p.batch_size == pytest.approx(p.coordinates["concurrency"], rel=0.3)


def test_trials_record_the_batch_size_per_step(schedule_sweep):
    trials = read_frame(schedule_sweep, "trials")
    assert (trials.engine_steps > 0).all()
    assert (trials.batch_size_max == trials.concurrency).all()
