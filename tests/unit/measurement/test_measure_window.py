"""Each workload brackets exactly its measured requests, with every prompt built before the window opens.

Pure logic: a fake engine records each request and when the window opens and closes.
"""
from __future__ import annotations

import asyncio

import pytest

from runner.vllm.outputs import request_spec_figures
from runner.measurement.latency import Timeline
from runner.measurement.workloads import workload_class
from runner.measurement.workloads.base import RequestResult, TrialContext
from tests.support.fake_engine import StandInEngine


class FakeEngine(StandInEngine):
    def __init__(self):
        self.log: list[str] = []
        self.clock = 0.0

    async def stream(self, *, prompt_token_ids, max_tokens, session=0, turn=0, phase="measured", ignore_eos=True,
                     seed=0, scheduled_at=None):
        self.log.append(f"send:{phase}")
        await asyncio.sleep(0)
        t = Timeline(sent_at=self.clock)
        t.add_chunk(at=self.clock + 0.01, tokens=1)
        t.add_chunk(at=self.clock + 0.02, tokens=max_tokens - 1)
        self.clock += 0.03
        self.log.append(f"done:{phase}")
        return RequestResult(timeline=t, prompt_tokens=len(prompt_token_ids),
                             output_token_ids=list(range(max_tokens)), session=session, turn=turn, phase=phase)

    async def generate_batch(self, *, prompts, max_tokens, sessions, phase="measured", ignore_eos=True, seed=0, scheduled_at=None):
        return [await self.stream(prompt_token_ids=p, max_tokens=max_tokens, session=s, phase=phase)
                for p, s in zip(prompts, sessions)]


class RecordingWindow:
    def __init__(self, engine: FakeEngine):
        self.engine = engine

    async def begin(self):
        self.engine.log.append("begin")

    async def end(self):
        self.engine.log.append("end")


def run(workload: str, concurrency: int = 2, **params):
    engine = FakeEngine()
    cls = workload_class(workload)
    ctx = TrialContext(engine=engine, concurrency=concurrency, repeat=0, params=cls.parse_params(params),
                       window=RecordingWindow(engine))
    results = asyncio.run(cls().run(ctx))
    return engine.log, results


def inside(log: list[str]) -> list[str]:
    assert log.count("begin") == 1 and log.count("end") == 1, log
    return log[log.index("begin") + 1:log.index("end")]


def outside(log: list[str]) -> list[str]:
    return log[:log.index("begin")] + log[log.index("end") + 1:]


def test_second_request_window_holds_the_repeats_alone():
    log, _ = run("second_request", input_len=64, output_len=4)
    assert set(inside(log)) == {"send:repeat", "done:repeat"}
    assert set(outside(log)) == {"send:cold", "done:cold"}


def test_fixed_task_warmup_runs_stay_outside():
    log, _ = run("fixed_task", concurrency=1, input_len=32, output_len=4, warmup=2, runs=3)
    assert inside(log).count("send:measured") == 3
    assert outside(log).count("send:warmup") == 2


def test_shared_prefix_warm_prefix_stays_outside():
    log, _ = run("shared_prefix", prefix_len=64, suffix_len=8, output_len=4, warm_prefix=True)
    assert outside(log) == ["send:warmup", "done:warmup"]
    assert inside(log).count("send:measured") == 2


def test_long_context_window_holds_the_first_requests_and_repeats_follow():
    log, _ = run("long_context", context_len=256, output_len=4)
    assert set(inside(log)) == {"send:first", "done:first"}
    assert outside(log).count("send:repeat") == 2 and log.index("end") < log.index("send:repeat")


@pytest.mark.parametrize("workload,params", [
    ("decode", {"input_len": 32, "output_len": 4, "requests_per_session": 2}),
    ("multi_turn", {"context_len": 64, "turns": 3, "turn_tokens": 16, "output_len": 4}),
])
def test_fully_measured_workloads_open_the_window_before_the_first_send(workload, params):
    log, results = run(workload, **params)
    assert log[0] == "begin" and log[-1] == "end"
    assert len(inside(log)) == 2 * len(results)


def test_multi_turn_appends_the_answer_and_the_next_user_turn():
    _, results = run("multi_turn", concurrency=1, context_len=64, turns=3, turn_tokens=16, output_len=4)
    assert [r.prompt_tokens for r in results] == [64, 64 + 4 + 16, 64 + 2 * (4 + 16)]


def test_per_request_acceptance_uses_vllms_definitions():
    from vllm.v1.metrics.stats import RequestSpecDecodeMetrics

    spec = RequestSpecDecodeMetrics.new(num_spec_tokens=3)
    for accepted in (3, 1, 0, 2):  # four verify steps of 3 drafts each
        spec.observe(num_draft_tokens=3, num_accepted=accepted)
    got = request_spec_figures(spec)
    assert got["spec_num_steps"] == 4 and got["spec_num_draft_tokens"] == 12 and got["spec_num_accepted_tokens"] == 6
    assert got["spec_acceptance_rate"] == pytest.approx(6 / 12)
    assert got["spec_mean_acceptance_length"] == pytest.approx(1 + 6 / 4)
    assert got["spec_mean_acceptance_length"] == pytest.approx(spec.to_dict()["mean_acceptance_length"])
    assert got["spec_accepted_per_position"] == [3, 2, 1]  # steps accepting ≥ 1, ≥ 2, ≥ 3 drafts
    assert request_spec_figures(None) == {}


def test_a_window_edge_waits_until_vllm_has_counted_every_finished_request(monkeypatch):
    """The counter snapshot at a window's edge is taken once vLLM's count of finished requests reaches the host's
    own (it lands a moment after the last token); a count that never arrives costs at most COUNTER_SETTLE_S."""
    from runner.execution import isolation
    from runner.measurement import counters

    counted = {"n": 0.0}
    reads = []

    def snapshot():
        reads.append(counted["n"])
        counted["n"] += 1  # vLLM's output handler counts one more request between two reads
        return counters.CounterSnapshot(scalars={counters.FINISHED: reads[-1]})

    monkeypatch.setattr(counters, "snapshot", snapshot)
    window = isolation.CounterWindow(finished=lambda: 3)
    asyncio.run(window.begin())
    assert reads == [0, 1, 2, 3] and counters.finished_requests(window.before) == 3

    reads.clear()
    counted["n"] = 10.0  # already counted (the usual case): one read, no wait
    asyncio.run(window.end())
    assert reads == [10] and window.after.scalars[counters.FINISHED] == 10

    monkeypatch.setattr(isolation, "COUNTER_SETTLE_S", 0.05)
    monkeypatch.setattr(counters, "snapshot", lambda: counters.CounterSnapshot())  # no such counter
    never = isolation.CounterWindow(finished=lambda: 1)
    asyncio.run(never.begin())
    assert never.before is not None and counters.finished_requests(never.before) is None
