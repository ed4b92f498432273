"""The actor's side of a shared engine's draft count (runner.execution.drafts): one call per change, checked, and
reset to the engine's own; the row's settings and per-position figures are the trial's k. A recording host stands
in for the engine (the engine test runs the real one: tests/engine/test_live_drafts_engine.py)."""
from __future__ import annotations

import asyncio

import pytest

from runner.config.sections import run_config
from runner.execution.drafts import DraftNotSet, DraftSetter, draft_columns, ran_settings
from runner.plan.draft_hosts import LiveDrafts, fold
from runner.plan.grid import build_plan
from runner.vllm.draft_count import OWN


class Host:
    def __init__(self, engine_k=3, takes=True):
        self.calls, self.engine_k, self.takes = [], engine_k, takes

    async def set_draft(self, ranges):
        self.calls.append(ranges)
        if ranges in (None, OWN):
            return {"engine_k": self.engine_k, "ks": [self.engine_k], "lookup": False}
        k = min(r[2] for r in ranges) if self.takes else self.engine_k
        return {"engine_k": self.engine_k, "ks": [min(k, self.engine_k)], "lookup": True}


def _folded():
    grid = {"spec_method": ["mtp"], "num_speculative_tokens": [1, 3], "concurrency": [1, 2]}
    plan = build_plan(run_config(sweep_name="s", model="m", grid=grid, workloads={"decode": {}}))
    folded = fold(plan, live=LiveDrafts(on=True))
    (engine,) = folded.engines
    return engine, folded.trials


def test_one_call_per_change_and_back_to_the_engines_own():
    engine, trials = _folded()
    k1 = [t for t in trials if t.draft]
    k3 = [t for t in trials if not t.draft]
    host, setter = Host(), DraftSetter()

    async def run():
        for t in (k3[0], k1[0], k1[1], k3[1]):
            await setter.apply(host, t)
        await setter.reset(host)

    asyncio.run(run())
    assert host.calls == [[[1, 1 << 30, 1]], OWN]  # the engine's own k needs no call after a load; reset: none due


def test_a_draft_count_the_engine_did_not_take_fails_the_trial():
    _, trials = _folded()
    with pytest.raises(DraftNotSet):
        asyncio.run(DraftSetter().apply(Host(takes=False), next(t for t in trials if t.draft)))


def test_the_rows_carry_the_trials_k_and_the_engines():
    engine, trials = _folded()
    t = next(t for t in trials if t.draft)
    assert ran_settings(engine, t).num_speculative_tokens == 1 and engine.settings.num_speculative_tokens == 3
    assert draft_columns(engine, t) == {"engine_num_speculative_tokens": 3, "draft_set_live": True}
