"""Public files as published, on one real engine (the trained tiny model, MTP k=1): a window of the Azure LLM
inference trace replayed on its clock with its one over-long request clipped (counted per trial), and a seeded
sample of Spec-Bench's questions stratified by task, reported by Spec-Bench's own tasks.

One sweep runs both on one engine, with short outputs, so the file adds one engine load.
"""
from pathlib import Path

import pytest

from runner.traffic.traces import Selection, read_trace
from runner.sinks.parquet import read_frame

from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
AZURE = PUBLIC / "azure_llm_conv_2023_199.csv"
SPEC_BENCH = PUBLIC / "spec_bench_question.jsonl"
MAX_LEN = 4096


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("public")
    run_cli(
        "run=public", "sweep.name=public", "tracking=none", "workload=[trace,prompt_set]",
        "sweep.grid.spec_method=[mtp]", "sweep.grid.num_speculative_tokens=[1]",
        "sweep.grid.enable_prefix_caching=[true]", f"sweep.grid.max_model_len=[{MAX_LEN}]",
        "sweep.grid.concurrency=[2]",
        f"workload.trace.trace_file={AZURE}", "workload.trace.trace_format=azure", "workload.trace.start_s=4",
        "workload.trace.end_s=15", "workload.trace.over_length=clip",
        f"workload.prompt_set.prompt_file={SPEC_BENCH}", "workload.prompt_set.prompt_format=spec_bench",
        "workload.prompt_set.num_sessions=12", "workload.prompt_set.max_turns=1", "workload.prompt_set.output_len=16",
        output_root=out,
    )
    run_dir = out / "public" / "public"
    trials = read_frame(run_dir, "trials")
    requests = read_frame(run_dir, "requests").merge(trials[["trial_id", "workload"]], on="trial_id")
    return trials, requests


def test_the_azure_window_replays_on_its_clock_with_the_over_long_request_clipped(sweep):
    trials, requests = sweep
    assert (trials.status == "ok").all(), trials[trials.status != "ok"][["workload", "failure_reason"]]
    window = Selection(start_s=4, end_s=15).apply(read_trace(str(AZURE), "azure"))
    rows = requests[requests.workload == "trace"].sort_values("session")
    assert len(rows) == len(window) == 23
    assert list(rows.prompt_tokens) == [min(r.input_length, MAX_LEN - r.output_length) for r in window]
    assert list(rows.output_tokens) == [r.output_length for r in window]
    scheduled = rows.start_offset_s - rows.start_offset_s.iloc[0]
    assert list(scheduled) == pytest.approx([(r.timestamp_ms - window[0].timestamp_ms) / 1000 for r in window],
                                            abs=1e-6)
    row = trials[trials.workload == "trace"].iloc[0]
    assert (row.over_length_clipped, row.over_length_skipped, row.source_skipped) == (1, 0, 0)


def test_spec_bench_sample_covers_every_task_and_is_reported_by_task(sweep):
    trials, requests = sweep
    rows = requests[requests.workload == "prompt_set"]
    # 12 of 60 questions, 10 per task: 2 per task.
    assert rows.groupby("category").size().to_dict() == {t: 2 for t in ("math_reasoning", "mt_bench", "qa", "rag",
                                                                        "summarization", "translation")}
    assert trials[trials.workload == "prompt_set"].iloc[0].source_skipped == 0
