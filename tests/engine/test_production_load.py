"""Production-shaped load on one real engine (the trained tiny model, MTP k=1, prefix caching on), checked
through its Parquet files: Poisson arrivals.

One sweep runs every workload here on one engine, with short outputs, so the file adds one engine load.
"""
import pytest

from runner.measurement.arrivals import gaps
from runner.sinks.parquet import read_frame

from tests.support.cli import run_cli
from tests.support.ks import exponential_cdf, ks_pvalue, ks_statistic

pytestmark = pytest.mark.engine

RATE = 20.0  # req/s of the Poisson decode
POISSON_REQUESTS = 80


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("load")
    run_cli(
        "run=load", "sweep.name=load", "tracking=none", "report=false", "workload=[decode]",
        "sweep.grid.spec_method=[mtp]", "sweep.grid.num_speculative_tokens=[1]",
        "sweep.grid.enable_prefix_caching=[true]", "sweep.grid.max_model_len=[2048]", "sweep.grid.concurrency=[1]",
        "workload.decode.input_len=32", "workload.decode.output_len=8",
        "+workload.decode.arrival=poisson", f"+workload.decode.request_rate={RATE}",
        f"+workload.decode.num_requests={POISSON_REQUESTS}",
        output_root=out,
    )
    run_dir = out / "load" / "load"
    trials = read_frame(run_dir, "trials")
    requests = read_frame(run_dir, "requests").merge(trials[["trial_id", "workload"]], on="trial_id")
    return trials, requests


def test_every_trial_ran(sweep):
    trials, _ = sweep
    assert (trials.status == "ok").all(), trials[trials.status != "ok"][["workload", "failure_reason"]]


def test_poisson_send_gaps_pass_a_ks_test_against_the_set_rate(sweep):
    trials, requests = sweep
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
