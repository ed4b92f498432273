"""The highest sustainable rate searched end to end on one real engine (the trained tiny model, spec off): Poisson
decode, saturation first, then a low rate and a rate between planned from its rows (two stages), checked through
the run's Parquet files and its report. Short requests and one repeat keep it to one engine's load per stage."""
from __future__ import annotations

import math

import pytest

from runner.numerics.rate_bracket import round_rate
from runner.sinks.parquet import read_frame
from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

TARGET_MS = 30  # TTFT p99: met at a low rate, missed when every request arrives at once
MAX_STAGES = 2  # saturation, then rates planned from its rows: the narrowing is unit-tested


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    out = tmp_path_factory.mktemp("rate_search")
    proc = run_cli(
        "run=rates", "sweep.name=rates", "tracking=none", "sweep.adaptive=rate_search",
        f"sweep.rate_search.max_stages={MAX_STAGES}", "sweep.grid.spec_method=[off]", "sweep.grid.concurrency=[1]",
        "sweep.grid.max_model_len=[256]", "workload.decode.input_len=32", "workload.decode.output_len=8",
        "workload.decode.arrival=poisson", "workload.decode.request_rate=inf", "workload.decode.num_requests=24",
        f"slo.ttft={TARGET_MS}", output_root=out)
    run_dir = out / "rates" / "rates"
    return proc.stdout, read_frame(run_dir, "trials"), (run_dir / "report.md").read_text()


def test_saturation_first_then_rates_below_it_from_its_throughput(search):
    stdout, trials, _ = search
    assert (trials.status == "ok").all() and trials.trial_id.is_unique
    assert trials.goodput_req_s.notna().all()  # the actor counts goodput against the same slo the search targets
    assert "stage 'saturation'" in stdout
    saturation = trials[trials.offered_rate_req_s == math.inf]
    assert len(saturation) == 1
    below = set(trials.offered_rate_req_s[trials.offered_rate_req_s < math.inf])
    if float(saturation.ttft_p99_s.iloc[0]) * 1000 <= TARGET_MS:
        assert not below  # saturation meets the target: nothing above it to find
        return
    assert "stage 'rates-1'" in stdout
    # The low rate is a tenth of the throughput saturation measured.
    assert round_rate(0.1 * float(saturation.request_throughput_req_s.iloc[0])) in below
    assert stdout.count("stage '") <= MAX_STAGES
    # Every probe's verdict and interval are in its row; one stopped early covers only the requests it sent.
    assert set(trials.probe_verdict) <= {"met", "missed", "undecided"} and trials.probe_verdict.notna().all()
    probes = trials[trials.offered_rate_req_s < math.inf]
    assert (probes.num_requests <= probes.probe_planned_requests).all()
    stopped = probes[probes.num_requests < probes.probe_planned_requests]
    assert stopped.probe_stop.str.startswith("stopped after").all()


def test_the_report_gives_the_highest_rate_within_the_target(search):
    _, _, report = search
    assert "## Against offered rate" in report or "Against offered rate" in report
    assert f"highest rate within the SLO (TTFT p99 ≤ {TARGET_MS} ms)" in report
