"""What the CLI would say about a set of overrides, through the functions it calls (no process, no engine)."""
from __future__ import annotations

from runner.command.sweep import make_plan
from runner.config.checks import ConfigError
from runner.config.store import load_config


def plan_error(overrides: list[str]) -> str:
    """What the CLI would print for these overrides ('' when the plan is valid): composed once, typed once."""
    try:
        make_plan(load_config(["tracking=none", *overrides]))
    except ConfigError as exc:
        return str(exc)
    return ""
