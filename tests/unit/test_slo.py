"""One SLO (runner.slo): the `slo` block's keys, the older report.slo / execution.slo read with a warning, and the
one value the actor's goodput, the rate search and the report all take from the config."""
from __future__ import annotations

import pytest

from runner.config.checks import ConfigError
from runner.config.store import load_config
from runner.measurement.latency import Timeline, goodput
from runner.scheduling.settings import Capacity, ExecutionSettings
from runner.slo import Metric, Slo, SloError, Target, config_slo, old_execution_slo, old_report_slo, slo_of

TTFT_500 = Slo(targets=(Target(metric=Metric.TTFT, ms=500.0),))


def test_the_blocks_keys_are_vllms_goodput_names_at_one_percentile():
    slo = slo_of({"ttft": 500, "tpot": 50, "e2el": None, "percentile": 90})
    assert [(t.metric, t.ms, t.percentile) for t in slo.targets] == [(Metric.TTFT, 500, 90), (Metric.TPOT, 50, 90)]
    assert slo.limits == {"p90_ttft_ms": 500, "p90_tpot_ms": 50}  # vLLM's names of the figures
    assert slo.column("p90_tpot_ms") == "tpot_p90_s" and slo.text() == "TTFT p90 ≤ 500 ms, TPOT p90 ≤ 50 ms"
    assert Target(metric=Metric.E2EL, ms=1).column == "e2e_p99_s"  # the trial's own column name
    assert not slo_of({}) and not slo_of(None)


@pytest.mark.parametrize("raw, fix", [
    ({"ttft_ms": 5}, "fix: slo.ttft=500"),
    ({"ttft": 0}, "fix: slo.ttft=500"),
    ({"ttft": "fast"}, "fix: slo.ttft=500"),
    ({"ttft": 5, "percentile": 95}, "fix: slo.percentile=99"),
    ({"ttft": 5, "percentile": 0}, "fix: slo.percentile=99"),  # 0 is not taken for the default p99
    ({"percentile": True}, "fix: slo.percentile=99"),
])
def test_a_bad_target_names_its_fix(raw, fix):
    with pytest.raises(SloError, match=fix):
        slo_of(raw)


def test_older_keys_are_read_with_a_warning_naming_the_new_one(capsys):
    old = old_report_slo({"ttft_p99_ms": None, "tpot_p50_ms": 30})
    assert old.targets == (Target(metric=Metric.TPOT, ms=30.0, percentile=50),)
    assert old_execution_slo({"e2e_ms": 900}).targets == (Target(metric=Metric.E2EL, ms=900.0),)
    assert capsys.readouterr().err.splitlines() == [
        "warning: report.slo.tpot_p50_ms is deprecated and read for one release only: use slo.tpot=30 "
        "slo.percentile=50",
        "warning: execution.slo.e2e_ms is deprecated and read for one release only: use slo.e2el=900"]


def test_the_new_block_wins_per_metric_over_the_older_ones():
    slo = config_slo({"slo": {"ttft": 100}, "report": {"slo": {"ttft_p50_ms": 7, "tpot_p99_ms": 40}},
                      "execution": {"slo": {"tpot_ms": 1, "e2e_ms": 900}}})
    assert slo.limits == {"p99_ttft_ms": 100, "p99_tpot_ms": 40, "p99_e2el_ms": 900}


def test_a_persisted_config_without_targets_has_none_and_warns_of_nothing(capsys):
    null_blocks = {"report": {"slo": {"ttft_p99_ms": None}}, "execution": {"slo": {"ttft_ms": None}}}
    assert not config_slo(null_blocks) and not config_slo({"report": True})
    assert not capsys.readouterr().err


def test_goodput_counts_a_request_within_each_metrics_tightest_target():
    def request(ttft_s, last_s, tokens=3):
        t = Timeline(sent_at=0.0)
        t.add_chunk(at=ttft_s, tokens=1)
        t.add_chunk(at=last_s, tokens=tokens - 1)
        return t

    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=100), Target(metric=Metric.TTFT, ms=60, percentile=50),
                       Target(metric=Metric.E2EL, ms=500)))
    rate, share = goodput([request(0.05, 0.2), request(0.08, 0.2), request(0.05, 0.9)], slo=slo, duration_s=1.0)
    assert (rate, share) == pytest.approx((1.0, 1 / 3))  # 80 ms misses the p50 target's 60; 900 ms misses e2el


def _config(*overrides):
    return load_config(["tracking=none", "sweep=rate_search", "sweep.preset=null", *overrides])


def test_the_config_gives_one_slo_to_the_actor_the_report_and_the_rate_search():
    config = _config("slo.ttft=500")
    assert config.slo == TTFT_500 and config.report.slo == TTFT_500
    settings = ExecutionSettings.of(config, capacity=Capacity(device_units=1, max_parallel_engines=1))
    assert settings.slo == TTFT_500


def test_a_sweep_file_sets_the_slo_and_the_command_line_wins():
    assert _config("sweep.preset=cpu").slo.limits == {"p99_ttft_ms": 50}  # sweeps/rate_search.yaml's CPU preset
    assert _config("sweep.preset=cpu", "slo.ttft=70").slo.limits == {"p99_ttft_ms": 70}


@pytest.mark.parametrize("override", ["report.slo.ttft_p99_ms=500", "execution.slo.ttft_ms=500"])
def test_the_older_overrides_still_compose_with_a_warning(override, capsys):
    config = _config(override)
    assert config.slo == TTFT_500 and config.report.slo == TTFT_500
    err = capsys.readouterr().err
    assert f"warning: {override.partition('=')[0]} is deprecated" in err and "use slo.ttft=500" in err


def test_a_bad_target_is_refused_before_start_naming_the_override():
    with pytest.raises(ConfigError, match="fix: slo.percentile=99"):
        _config("slo.ttft=500", "slo.percentile=42")
