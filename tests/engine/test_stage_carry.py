"""One load per engine per command: an adaptive study's later stage runs on the engines its first stage loaded
(real CPU engines, the rate search on two engines). A latency target no rate meets makes the second stage (the low
rate and one between) certain; short requests and one repeat keep it to two loads, checked through the run's
timeline (phases.parquet), its trial rows and its report."""
from __future__ import annotations

import json

import pytest

from runner.sinks.parquet import read_frame
from tests.support.cli import run_cli

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("stage_carry")
    proc = run_cli(
        "run=carry", "sweep.name=carry", "tracking=none", "sweep.adaptive=rate_search",
        "sweep.rate_search.max_stages=2", "sweep.grid.spec_method=[off]", "sweep.grid.concurrency=[1]",
        "sweep.grid.max_model_len=[256]", "sweep.grid.enable_prefix_caching=[true,false]",
        "workload.decode.input_len=32", "workload.decode.output_len=8", "workload.decode.arrival=poisson",
        "workload.decode.request_rate=inf", "workload.decode.num_requests=24", "slo.ttft=0.01",
        output_root=out)
    run_dir = out / "carry" / "carry"
    return (proc.stdout, read_frame(run_dir, "phases"), read_frame(run_dir, "trials"),
            (run_dir / "report.md").read_text())


def test_the_second_stage_loads_nothing_new(study):
    stdout, phases, trials, _ = study
    assert "stage 'rates-1'" in stdout  # no rate meets 0.01 ms: the low rate and one between come next
    assert (trials.status == "ok").all()
    engines = set(trials.engine_id)
    assert len(engines) == 2 and len(trials) > len(engines)  # saturation, then rates on the same two engines
    starts = phases[phases.phase == "start"]
    assert sorted(starts.engine_id) == sorted(engines)  # one `start` span per engine over both stages
    assert "loads: 0 for 2 engines (2 loaded by an earlier stage, woken instead)" in stdout


def test_searched_rates_are_capped_probes_and_the_report_counts_loads(study):
    stdout, _, trials, report = study
    below = trials[trials.offered_rate_req_s < float("inf")]
    assert len(below) and all(json.loads(p)["max_duration_s"] == 15 for p in below.workload_params_json)
    assert "rate probes below saturation: at most 15 s of arrivals each" in stdout
    assert "engine loads (2 for 2 engines;" in report
    assert "Probes below saturation sent for at most 15 s" in report
