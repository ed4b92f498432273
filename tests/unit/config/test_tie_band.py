"""One tie band: the report's default, the race's and the shipped config's are the same number."""
from __future__ import annotations

from runner.config.sections import SweepSection
from runner.config.store import load_config
from runner.numerics.stats import TIE_BAND
from runner.config.report import parse_settings


def test_every_default_tie_band_is_the_one_constant():
    config = load_config(["sweep=quick"])
    assert config.report.tie_band == TIE_BAND and parse_settings(None).tie_band == TIE_BAND
    assert config.sweep.race_tie_band == TIE_BAND
    assert SweepSection.__dataclass_fields__["race_tie_band"].default == TIE_BAND
