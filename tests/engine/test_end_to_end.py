"""A real sweep: vLLM's CPU build inside Ray actors, checked through its Parquet files."""
import pytest

from runner.sinks.parquet import read_frame

pytestmark = pytest.mark.engine


def test_engines_table_has_capacity(small_sweep):
    run_dir, _ = small_sweep
    engines = read_frame(run_dir, "engines")
    assert len(engines) == 2
    assert (engines.status == "ok").all()
    assert (engines.kv_capacity_tokens > 0).all()
    assert (engines.load_s > 0).all()
    assert (engines.engine_start == "forkserver").all()  # execution.engine_start=auto on CPU
    assert set(engines.vllm_version) == {__import__("vllm").__version__}


def test_mtp_arm_has_drafts_and_acceptance_and_off_has_none(small_sweep):
    run_dir, _ = small_sweep
    trials = read_frame(run_dir, "trials")
    assert len(trials) == 4 and (trials.status == "ok").all()
    mtp = trials[trials.spec_method == "mtp"]
    off = trials[trials.spec_method == "off"]
    assert (mtp.spec_num_drafts > 0).all()
    assert mtp.spec_acceptance_rate.notna().all()
    assert (mtp.spec_mean_acceptance_length >= 1).all()
    assert all(len(p) == 2 for p in mtp.spec_acceptance_per_position)
    assert off.spec_num_drafts.fillna(0).eq(0).all()
    assert off.spec_acceptance_rate.isna().all()


def test_trials_record_the_engines_real_batch_size(small_sweep):
    run_dir, _ = small_sweep
    trials = read_frame(run_dir, "trials")
    assert (trials.engine_steps > 0).all()
    # Every session decodes at once: the step carries `concurrency` requests, never more.
    assert (trials.batch_size_max == trials.concurrency).all()
    assert (trials.batch_size_p50 == trials.concurrency).all()
    assert (trials.batch_size_mean <= trials.concurrency).all()


def test_requests_carry_their_own_acceptance_where_vllm_gives_it(small_sweep):
    run_dir, _ = small_sweep
    engines = read_frame(run_dir, "engines").set_index("spec_method")
    requests = read_frame(run_dir, "requests")
    trials = read_frame(run_dir, "trials")
    requests = requests.merge(trials[["trial_id", "spec_method"]], on="trial_id")
    assert engines.loc["mtp", "per_request_spec_metrics"] == "summary"  # vLLM 0.32 (the CPU build)
    assert engines.loc["off", "per_request_spec_metrics"].startswith("none")
    mtp = requests[requests.spec_method == "mtp"]
    assert mtp.spec_acceptance_rate.notna().all() and (mtp.spec_num_draft_tokens > 0).all()
    # Per-request figures add up to the trial's counters.
    per_trial = mtp.groupby("trial_id").spec_num_accepted_tokens.sum()
    assert (per_trial == trials.set_index("trial_id").loc[per_trial.index, "spec_num_accepted_tokens"]).all()
    assert requests[requests.spec_method == "off"].spec_acceptance_rate.isna().all()


def test_requests_have_timings(small_sweep):
    run_dir, _ = small_sweep
    requests = read_frame(run_dir, "requests")
    trials = read_frame(run_dir, "trials")
    assert len(requests) == int(trials.concurrency.sum())
    assert (requests.ttft_s > 0).all()
    assert (requests.output_tokens == 24).all()
    assert (requests.e2e_s >= requests.ttft_s).all()


def test_cli_prints_results_folder_and_summary(small_sweep):
    run_dir, proc = small_sweep
    assert f"results: {run_dir}" in proc.stdout
    assert "total time:" in proc.stdout
    assert (run_dir / "config.yaml").exists()
    assert any((run_dir / "logs").glob("e-*.log"))
