"""An engine stand-in for pure tests of workloads' request timing: no process, no model."""
from __future__ import annotations

import asyncio
import time

from runner.measurement.latency import Timeline
from runner.measurement.workloads.base import RequestResult


class StandInEngine:
    """What every stand-in engine answers alike: sizes, a character tokenizer without a chat template, a cache reset."""

    max_model_len = 4096
    vocab_size = 1000
    first_token_id = 0

    async def reset_prefix_cache(self):
        return True

    def encode_text(self, text):
        return [ord(c) % 1000 for c in text]

    def chat_renderer(self, mode):
        return char_renderer(mode)


class SlowEngine(StandInEngine):
    """Each request takes `service_s`; records the scheduled and actual send of each."""

    def __init__(self, service_s: float = 0.05):
        self.service_s = service_s
        self.in_flight = 0
        self.peak = 0

    async def stream(self, *, prompt_token_ids, max_tokens, session=0, turn=0, phase="measured", ignore_eos=True,
                     seed=0, scheduled_at=None, on_first_token=None):
        sent = time.perf_counter()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        t = Timeline(sent_at=sent if scheduled_at is None else scheduled_at)
        await asyncio.sleep(self.service_s)
        if on_first_token is not None:
            on_first_token(time.perf_counter())
        t.add_chunk(at=time.perf_counter(), tokens=max_tokens)
        self.in_flight -= 1
        return RequestResult(timeline=t, prompt_tokens=len(prompt_token_ids), output_token_ids=[1] * max_tokens,
                             session=session, turn=turn, phase=phase,
                             send_lag_s=None if scheduled_at is None else sent - scheduled_at)


def char_renderer(mode):
    """A renderer over a tokenizer without a chat template (every setting renders raw)."""
    from runner.traffic.chat import ChatRenderer

    return ChatRenderer(_CharTokenizer(), mode)


class _CharTokenizer:
    """A tokenizer without a chat template: one token per character."""

    chat_template = None

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 1000 for c in text]
