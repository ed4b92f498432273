"""The one-sample Kolmogorov–Smirnov test (scipy is not in the stack): the statistic and its asymptotic p-value."""
from __future__ import annotations

import math
from typing import Callable, Sequence


def ks_statistic(samples: Sequence[float], cdf: Callable[[float], float]) -> float:
    """D = sup |F_n(x) − F(x)| of the samples' empirical distribution against `cdf`."""
    data = sorted(samples)
    n = len(data)
    return max(max((i + 1) / n - cdf(x), cdf(x) - i / n) for i, x in enumerate(data))


def ks_pvalue(d: float, n: int) -> float:
    """P(D ≥ d) under the null: Kolmogorov's limit law with Stephens' small-sample correction
    (Numerical Recipes, `probks`)."""
    root = math.sqrt(n)
    lam = (root + 0.12 + 0.11 / root) * d
    if lam < 1e-3:
        return 1.0
    total = sum(2 * (-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return min(1.0, max(0.0, total))


def exponential_cdf(rate: float) -> Callable[[float], float]:
    return lambda x: 1.0 - math.exp(-rate * x) if x > 0 else 0.0
