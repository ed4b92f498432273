"""vLLM's engine-argument rules checked when the first engine needs them, not before Ray starts.

A first use of an installed vLLM reads its rules by importing it (seconds on CPU, ~17 s on a fresh GPU machine);
everything else is validated at once, and this check runs before the first engine loads or the first trial runs:
still before any engine starts, with Ray's start and the first actor's imports beside it.
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import Future

from runner.config.sections import RunConfig


@dataclasses.dataclass(kw_only=True)
class DeferredEngineArgCheck:
    config: RunConfig
    pending: Future  # of the EngineArgSpec (runner.plan.engine_args.begin_spec)
    done: bool = False

    def __call__(self) -> None:
        """Raises ConfigError, naming the fix, where the config breaks vLLM's rules; once."""
        if self.done:
            return
        self.done = True
        from runner.plan.validate import validate

        import sys

        from runner.plan.engine_args import installed_vllm_version, unread_notice

        try:
            rules = self.pending.result()
        except Exception as exc:  # as load_spec does: the arguments go unchecked, and the log says so
            print(unread_notice(installed_vllm_version(), f"{type(exc).__name__}: {exc}"), file=sys.stderr, flush=True)
            rules = None
        validate(self.config, known_engine_args=rules)
