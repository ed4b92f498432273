"""The actor's side of a shared engine's draft count (runner.plan.draft_hosts): set before each trial, checked, and
what the trial's rows record (the k or schedule that ran, the engine's k). Actor code."""
from __future__ import annotations

from typing import Optional

from runner.plan.grid import EngineConfig, Trial
from runner.schema import EngineSettings
from runner.vllm.draft_count import OWN


class DraftNotSet(RuntimeError):
    """The engine did not take the trial's draft count: the trial fails rather than run at the engine's k."""


class DraftSetter:
    """What the engine core drafts now, and the calls that change it (one per change, none between trials of the
    same k). A fresh engine drafts its own k (OWN)."""

    def __init__(self):
        self.current = OWN

    @staticmethod
    def wanted(trial: Trial):
        return trial.draft.ranges() if trial.draft is not None else OWN

    async def apply(self, host, trial: Trial) -> None:
        want = self.wanted(trial)
        if want == self.current:
            return
        answer = await host.set_draft(want)
        expected = _expected_ks(trial)
        if expected is not None and list(answer.get("ks") or []) != expected:
            raise DraftNotSet(f"asked for {trial.draft.label}, the engine drafts {answer}")
        self.current = want

    async def reset(self, host) -> None:
        """Back to the engine's own draft count (a kept engine parked or claimed)."""
        if self.current != OWN and host is not None:
            await host.set_draft(OWN)
            self.current = OWN


def _expected_ks(trial: Trial) -> Optional[list[int]]:
    draft = trial.draft
    if draft is None or draft.schedule:
        return None  # the engine's own lookup, or a schedule's (vLLM's builder checked it)
    return [min(draft.k, draft.engine_k)]


def ran_settings(engine: EngineConfig, trial: Trial) -> EngineSettings:
    """The settings a trial's rows carry: its engine's, with the k (or schedule) the trial ran."""
    return engine.settings if trial.draft is None else trial.draft.settings_on(engine.settings)


def draft_columns(engine: EngineConfig, trial: Trial) -> dict:
    """The trial row's record of the engine that ran it: its k, and whether the trial's k was set on it."""
    return {"engine_num_speculative_tokens": engine.settings.num_speculative_tokens,
            "draft_set_live": trial.draft is not None}


def trimmed(result, trial: Trial):
    """Per-position acceptance cut to the trial's k: vLLM counts positions up to the engine's k (zeros past the
    trial's), and a row's positions are the k it drafted."""
    draft = trial.draft
    if draft is None or draft.schedule or draft.k >= draft.engine_k:
        return result
    row = result.trial
    if row.spec_acceptance_per_position:
        row.spec_acceptance_per_position = list(row.spec_acceptance_per_position)[:draft.k]
    for request in result.requests:
        if request.spec_accepted_per_position:
            request.spec_accepted_per_position = list(request.spec_accepted_per_position)[:draft.k]
    return result
