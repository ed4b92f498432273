"""Which engines a question's side names (sweep.question): one matching rule for the plan's check and the
report's Answer. Pure."""
from __future__ import annotations

import math
from typing import Any, Mapping


def matches(settings: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    """Every axis the selector names has that value in the engine's settings (k is not asked of spec off)."""
    method = str(settings.get("spec_method") or "off")
    for axis, wanted in selector.items():
        have = settings.get(axis)
        if axis == "spec_method":
            have, wanted = method, "off" if wanted in (False, None) else str(wanted)
        elif axis == "num_speculative_tokens" and method == "off":
            continue
        elif axis == "enable_prefix_caching":
            have, wanted = bool(have), bool(wanted)
        elif isinstance(wanted, (int, float)) and have is not None and not (isinstance(have, float)
                                                                            and math.isnan(have)):
            have, wanted = float(have), float(wanted)
        if have != wanted:
            return False
    return True


def question_problems(question, engine_settings: list[Mapping[str, Any]]) -> list[str]:
    """A warning per side that names no planned engine (the sweep still runs: other overrides may have replaced
    the arms the question was written for), with the fix."""
    if question is None:
        return []
    problems = []
    for side in ("a", "b"):
        axes = getattr(question, side).axes()
        if not any(matches(s, axes) for s in engine_settings):
            shown = ",".join(f"{k}:{str(v).lower() if isinstance(v, bool) else v}" for k, v in axes.items())
            problems.append(f"warning: sweep.question.{side}={{{shown}}} names no engine of this sweep, so the "
                            f"Answer cannot state the question (fix: name the axes of one of sweep.arms / "
                            f"sweep.grid, or sweep.question=null)")
    return problems
