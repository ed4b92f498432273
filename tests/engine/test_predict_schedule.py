"""Predict, then validate, in one command (sweep.adaptive=predict_schedule) on real CPU engines (the trained
embedded model), run once: spec off and MTP k = 3 first, then only the k's the prediction names, then the
schedule derived from the measured best k per batch size (where one differs by load); run again it resumes to
nothing; an arm `auto:<that run>` takes the same schedule."""
from __future__ import annotations

import pytest

from runner.numerics.measured_best_k import measured_choices
from runner.numerics.step_cost import contenders, predict_speeds
from runner.sinks.parquet import read_frame, read_rows
from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

ARMS = ("[{spec_method:'off'},{spec_method:mtp,num_speculative_tokens:1},{spec_method:mtp,num_speculative_tokens:2},"
        "{spec_method:mtp,num_speculative_tokens:3},{spec_method:mtp,num_speculative_tokens_per_batch_size:auto}]")
OVERRIDES = ("run=ps", "sweep.name=ps", "tracking=none", "sweep.adaptive=predict_schedule", f"sweep.arms={ARMS}",
             "sweep.grid.concurrency=[1,4]", "sweep.grid.max_model_len=[256]", "sweep.repeats=3",
             "workload.decode.input_len=64", "workload.decode.output_len=64", "+workload.decode.prompt_source=corpus",
             "engine.args.max_num_seqs=8")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("predict_schedule")
    first = run_cli(*OVERRIDES, output_root=out)
    again = run_cli(*OVERRIDES, output_root=out)
    return out, out / "ps" / "ps", first, again


def _choices(rows):
    return measured_choices(rows, metric_column="decode_tok_s_per_session", higher_is_better=True)


def test_stages_ran_in_order_and_the_first_is_off_and_the_largest_k(study):
    _, run_dir, first, _ = study
    lines = [line for line in first.stdout.splitlines() if line.startswith("stage ")]
    assert [line.split("'")[1] for line in lines] == ["predict", "contenders", "schedule"], first.stdout[-3000:]
    assert lines[0].startswith("stage 'predict': 12 trials, 12 to run")
    trials = read_frame(run_dir, "trials")
    assert (trials.status == "ok").all()
    first_round = trials[trials.spec_schedule.isna() & trials.num_speculative_tokens.isin([0, 3])]
    assert len(first_round) == 12


def test_each_engine_loaded_once_over_the_three_stages(study):
    _, run_dir, _, _ = study
    starts = read_frame(run_dir, "phases").query("phase == 'start'")
    assert sorted(starts.engine_id) == sorted(set(read_frame(run_dir, "trials").engine_id))


def test_only_the_predicted_contenders_were_measured(study):
    _, run_dir, _, _ = study
    rows = read_rows(run_dir, "trials")
    predicted_from = [r for r in rows if not r.get("spec_schedule") and r["num_speculative_tokens"] in (0, 3)]
    wanted = set()
    groups: dict = {}
    for p in predict_speeds(predicted_from):
        groups.setdefault(p.coordinates["concurrency"], []).append(p)
    for concurrency, predictions in groups.items():
        wanted |= {(concurrency, k) for k in contenders(predictions, aggregate=False) if k in (1, 2)}
    ran = {(r["concurrency"], r["num_speculative_tokens"]) for r in rows
           if not r.get("spec_schedule") and r["num_speculative_tokens"] in (1, 2)}
    assert ran == wanted
    assert all(sum(1 for r in rows if (r["concurrency"], r["num_speculative_tokens"]) == pair
                   and not r.get("spec_schedule")) == 3 for pair in ran)


def test_the_schedule_arm_is_the_measured_best_k_per_batch_size(study):
    _, run_dir, _, _ = study
    rows = read_rows(run_dir, "trials")
    (family,) = _choices([r for r in rows if not r.get("spec_schedule")])
    schedule = family.schedule(max_num_seqs=8)
    scheduled = [r for r in rows if r.get("spec_schedule")]
    if schedule is None or len(schedule.ranges) == 1:  # one k everywhere: nothing new to validate
        assert not scheduled
    else:
        assert {r["spec_schedule"] for r in scheduled} == {schedule.json()}
        assert sorted(r["concurrency"] for r in scheduled) == [1, 1, 1, 4, 4, 4]


def test_run_again_it_resumes_to_nothing(study):
    _, _, first, again = study
    assert "nothing to do" in again.stdout, again.stdout[-2000:]
    assert [l for l in again.stdout.splitlines() if l.startswith("stage ")] == [
        line.replace(line.split(", ")[1].split(" (")[0], "0 to run") for line in first.stdout.splitlines()
        if line.startswith("stage ")]


def test_an_auto_arm_takes_the_schedule_of_an_earlier_run(study):
    out, run_dir, _, _ = study
    (family,) = _choices([r for r in read_rows(run_dir, "trials") if not r.get("spec_schedule")])
    schedule = family.schedule(max_num_seqs=8)
    proc = run_cli("run=auto", "sweep.name=auto", "tracking=none", "dry_run=true", "engine.args.max_num_seqs=8",
                   f"sweep.arms=[{{spec_method:mtp,num_speculative_tokens_per_batch_size:'auto:{run_dir}'}}]",
                   output_root=out, check=False)
    if schedule is None:
        assert proc.returncode == 2 and "spec off wins at every load" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"sched={schedule.label}" in proc.stdout
