"""Sampling per workload (runner.measurement.sampling): greedy by default, a seed per request when sampling."""
from __future__ import annotations

import asyncio

from runner.measurement.sampling import GREEDY, Sampling, sampled, sampling_of
from runner.measurement.workloads import workload_class


class _Recorder:
    max_model_len = 1024

    def __init__(self):
        self.calls = []

    async def stream(self, **kwargs):
        self.calls.append(kwargs)


def test_greedy_params_leave_the_engine_as_it_is():
    params = workload_class("decode").parse_params({"input_len": 8, "output_len": 4})
    engine = _Recorder()
    assert sampling_of(params) == GREEDY and sampled(engine, params, base_seed=1) is engine


def test_each_request_gets_its_own_reproducible_seed():
    params = workload_class("decode").parse_params({"input_len": 8, "output_len": 4, "temperature": 0.7,
                                                    "top_p": 0.9})
    engine = _Recorder()
    wrapped = sampled(engine, params, base_seed=7)
    assert wrapped.max_model_len == 1024  # everything else is the engine's

    async def send():
        for session, turn in ((0, 0), (1, 0), (0, 1), (0, 0)):
            await wrapped.stream(prompt_token_ids=[1], max_tokens=4, session=session, turn=turn)

    asyncio.run(send())
    seeds = [c["seed"] for c in engine.calls]
    assert len(set(seeds[:3])) == 3 and seeds[3] == seeds[0]
    assert engine.calls[0]["sampling"] == Sampling(temperature=0.7, top_p=0.9)
    assert not engine.calls[0]["sampling"].greedy


def test_a_penalty_keeps_greedy_decoding_greedy():
    params = workload_class("decode").parse_params({"input_len": 8, "output_len": 4, "presence_penalty": 1.0})
    sampling = sampling_of(params)
    assert sampling.greedy and not sampling.is_default
    assert sampling.params()["presence_penalty"] == 1.0


def test_out_of_range_sampling_is_refused_with_its_range():
    bad = workload_class("decode").parse_params({"input_len": 8, "output_len": 4, "temperature": -1, "top_p": 0,
                                                 "presence_penalty": 3})
    errors = " ".join(bad.validate())
    assert "temperature=-1" in errors and "top_p=0" in errors and "presence_penalty=3" in errors
