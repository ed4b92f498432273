"""Energy per arm and point in the report: medians over repeats beside throughput, the cost table's J per output
token, "shared GPU" where engines shared one, and "not measured" with the trials' reason instead of 0."""
from __future__ import annotations

import math

import pytest

from runner.config.report import ReportSettings
from runner.report.build import analyse, render_markdown
from runner.report.energy import energy_table
from runner.report.load import load_results
from tests.support.results import Sweep

REASON = "not a CUDA device (NVML meters NVIDIA GPUs only)"


def _study() -> Sweep:
    s = Sweep()
    s.engine("off")
    s.engine("mtp:3")
    for r, j in enumerate((0.9, 1.0, 1.2)):  # off at c=1: 0.9, 1.0, 1.2 J per token
        s.trial("off", repeat=r, tok_s=100, decode_tok_s_aggregate=100, energy_j=64 * j, power_mean_w=300.0,
                energy_per_output_token_j=j, power_idle_w=70.0, energy_resolution_s=0.02, energy_source="counter",
                energy_gpus=1)
        s.trial("mtp:3", repeat=r, tok_s=150, decode_tok_s_aggregate=150, energy_unmeasured=REASON)
    return s


def test_energy_section_gives_median_j_per_token_and_says_why_an_arm_was_not_measured(tmp_path):
    a = analyse(load_results([_study().write(tmp_path / "e")]), settings=ReportSettings(gpu_hour_usd=3.6))

    table = energy_table(a.trials).set_index("arm")
    assert table.loc["off", "J per output token"] == pytest.approx(1.0)
    assert table.loc["off", "J per token range"] == "0.9–1.2"
    assert table.loc["off", "measured"] == "3/3" and table.loc["off", "GPUs"] == 1
    assert math.isnan(table.loc["mtp:3", "J per output token"])
    assert table.loc["mtp:3", "measured"] == f"not measured: {REASON}"
    cost = a.cost.set_index("arm")
    assert cost.loc["off", "J per output token"] == pytest.approx(1.0)
    assert math.isnan(cost.loc["mtp:3", "J per output token"])
    text = render_markdown(a, plot_files=[])
    assert "## Energy" in text and f"not measured: {REASON}" in text


def test_engines_sharing_a_gpu_are_marked_shared(tmp_path):
    s = Sweep()
    s.engine("off")
    s.trial("off", tok_s=100, energy_per_output_token_j=2.0, energy_j=128.0, engines_on_device=2)
    a = analyse(load_results([s.write(tmp_path / "s")]))

    assert energy_table(a.trials).iloc[0]["measured"] == "1/1 (shared GPU)"
