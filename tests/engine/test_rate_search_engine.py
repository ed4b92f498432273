"""The highest sustainable rate searched end to end on real CPU engines (the trained tiny model, spec off, prefix
caching on and off: two engines), run once: Poisson decode, saturation first, then the first rate under its
measured throughput planned from its rows (two stages), checked through the run's timeline (phases.parquet), its
trial rows and its report. A latency target no rate meets makes the second stage certain; short requests and one
repeat keep it to one load per engine: the later stage runs on the engines its first stage loaded (one load per
engine per command).
"""
from __future__ import annotations

import json
import math

import pytest

from runner.numerics.rate_bracket import saturation_ladder
from runner.sinks.parquet import read_frame
from tests.support.cli import run_cli

pytestmark = pytest.mark.engine

TARGET_MS = 0.01  # TTFT p99: met by no rate, so the rates below saturation (the second stage) always come
MAX_STAGES = 2  # saturation, then rates planned from its rows: the narrowing is unit-tested


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    out = tmp_path_factory.mktemp("rate_search")
    proc = run_cli(
        "run=rates", "sweep.name=rates", "tracking=none", "sweep.adaptive=rate_search",
        f"sweep.rate_search.max_stages={MAX_STAGES}", "sweep.grid.spec_method=[off]", "sweep.grid.concurrency=[1]",
        "sweep.grid.max_model_len=[256]", "sweep.grid.enable_prefix_caching=[true,false]",
        "workload.decode.input_len=32", "workload.decode.output_len=8", "workload.decode.arrival=poisson",
        "workload.decode.request_rate=inf", "workload.decode.num_requests=24", f"slo.ttft={TARGET_MS}",
        output_root=out)
    run_dir = out / "rates" / "rates"
    return (proc.stdout, read_frame(run_dir, "phases"), read_frame(run_dir, "trials"),
            (run_dir / "report.md").read_text())


def test_saturation_first_then_rates_below_it_from_its_throughput(search):
    stdout, _, trials, _ = search
    assert (trials.status == "ok").all() and trials.trial_id.is_unique
    assert trials.goodput_req_s.notna().all()  # the actor counts goodput against the same slo the search targets
    assert "stage 'saturation'" in stdout and "stage 'rates-1'" in stdout
    assert stdout.count("stage '") <= MAX_STAGES
    for _, line in trials.groupby("engine_id"):  # each engine's own line
        saturation = line[line.offered_rate_req_s == math.inf]
        assert len(saturation) == 1
        below = set(line.offered_rate_req_s[line.offered_rate_req_s < math.inf])
        # The first rate below saturation is the ladder's top rung under the throughput it measured.
        assert below == {saturation_ladder(float(saturation.request_throughput_req_s.iloc[0]), precision=0.1)[0]}
    # Every probe's verdict and interval are in its row; one stopped early covers only the requests it sent.
    assert set(trials.probe_verdict) <= {"met", "missed", "undecided"} and trials.probe_verdict.notna().all()
    probes = trials[trials.offered_rate_req_s < math.inf]
    assert (probes.num_requests <= probes.probe_planned_requests).all()
    stopped = probes[probes.num_requests < probes.probe_planned_requests]
    assert stopped.probe_stop.str.startswith("stopped after").all()


def test_the_report_gives_the_highest_rate_within_the_target(search):
    _, _, _, report = search
    assert "## Against offered rate" in report or "Against offered rate" in report
    assert f"highest rate within the SLO (TTFT p99 ≤ {TARGET_MS:g} ms)" in report


def test_the_second_stage_loads_nothing_new(search):
    stdout, phases, trials, _ = search
    engines = set(trials.engine_id)
    assert len(engines) == 2 and len(trials) > len(engines)  # saturation, then rates on the same two engines
    starts = phases[phases.phase == "start"]
    assert sorted(starts.engine_id) == sorted(engines)  # one `start` span per engine over both stages
    assert "loads: 0 for 2 engines (2 loaded by an earlier stage, woken instead)" in stdout


def test_searched_rates_are_capped_probes_and_the_report_counts_loads(search):
    stdout, _, trials, report = search
    below = trials[trials.offered_rate_req_s < float("inf")]
    assert len(below) and all(json.loads(p)["max_duration_s"] == 15 for p in below.workload_params_json)
    assert "rate probes below saturation: at most 15 s of arrivals each" in stdout
    assert "engine loads (2 for 2 engines;" in report
    assert "Probes below saturation sent for at most 15 s" in report
