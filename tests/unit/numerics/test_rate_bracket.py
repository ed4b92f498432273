"""The saturation ladder: the first rates below saturation, from the throughput it measured (pure numerics)."""
from __future__ import annotations

import math

import pytest

from runner.numerics.rate_bracket import (BracketState, RatePoint, bracket, ceil_rate, rate_within,
                                             saturation_ladder)
from runner.slo import Metric, Slo, Target

SLO = Slo(targets=(Target(metric=Metric.TTFT, ms=500.0),))


def _point(rate: float, ms: float, *, x: float = math.nan) -> RatePoint:
    return RatePoint(offered=rate, x=rate if math.isnan(x) else x, samples={SLO.targets[0].name: (ms,)})


def test_ceil_rate_rounds_up_to_three_significant_digits():
    assert (ceil_rate(20.14), ceil_rate(20.0), ceil_rate(99.96), ceil_rate(0.12345)) == (20.2, 20.0, 100.0, 0.124)


@pytest.mark.parametrize("high", [22.0, 25.8, 23.47, 150.0, 0.433, 1234.0])
@pytest.mark.parametrize("precision", [0.1, 0.05, 0.3])
def test_a_rate_within_precision_closes_the_bracket_and_is_the_lowest_that_does(high, precision):
    rate = rate_within(high, precision=precision)
    assert high - rate <= precision * rate  # the bracket's own test (BracketState.PRECISE)
    step = 10.0 ** (math.floor(math.log10(rate)) - 2)
    assert high - (rate - step) > precision * (rate - step)  # one step lower would not


def test_the_ladder_starts_halfway_into_the_precision_band_under_saturation():
    assert saturation_ladder(27.1, precision=0.1) == [25.8, 23.5]
    assert saturation_ladder(23.4, precision=0.1) == [22.3, 20.3]
    assert saturation_ladder(300.0, precision=0.1, count=3) == [286.0, 260.0, 237.0]  # rates_per_stage more rungs
    assert saturation_ladder(math.nan, precision=0.1) == [] and saturation_ladder(math.inf, precision=0.1) == []


@pytest.mark.parametrize("saturation", [27.1, 23.4, 25.75, 20.37, 0.5, 172.0])
def test_a_rung_that_meets_closes_the_bracket_at_once(saturation):
    """The top rung meeting below saturation, or (the top one missed) the next one meeting: within precision."""
    top, second = saturation_ladder(saturation, precision=0.1)
    sat = _point(math.inf, 9000.0, x=saturation)
    assert bracket([_point(top, 300.0), sat], SLO, precision=0.1).state == BracketState.PRECISE
    b = bracket([_point(second, 300.0), _point(top, 700.0), sat], SLO, precision=0.1)
    assert b.state == BracketState.PRECISE and (b.low.x, b.high.x) == (second, top)
