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


def _seeds(wrapped, keys) -> list:
    async def send():
        for session, turn in keys:
            await wrapped.stream(prompt_token_ids=[1], max_tokens=4, session=session, turn=turn)

    asyncio.run(send())
    return [c["seed"] for c in wrapped._engine.calls]


def test_greedy_requests_get_a_seed_each_distinct_across_requests_and_repeats():
    # vLLM's synthetic acceptance draws from the request's seed and position: one seed for all accepted alike.
    params = workload_class("decode").parse_params({"input_len": 8, "output_len": 4})
    assert sampling_of(params) == GREEDY
    keys = [(s, 0) for s in range(64)]
    first = _seeds(sampled(_Recorder(), params, base_seed=params.seed * 1_000_003 + 0), keys)
    again = _seeds(sampled(_Recorder(), params, base_seed=params.seed * 1_000_003 + 0), keys)
    repeat = _seeds(sampled(_Recorder(), params, base_seed=params.seed * 1_000_003 + 1), keys)
    assert len(set(first)) == 64 and first == again
    assert not set(first) & set(repeat)


def test_a_workloads_own_seed_is_kept():
    engine = _Recorder()
    wrapped = sampled(engine, workload_class("decode").parse_params({"input_len": 8, "output_len": 4}), base_seed=1)
    asyncio.run(wrapped.stream(prompt_token_ids=[1], max_tokens=4, seed=6000))
    assert engine.calls[0]["seed"] == 6000 and engine.calls[0]["sampling"] == GREEDY


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


def test_each_trials_wrapper_reads_the_one_corpus_stream_tokenized_once_per_process():
    """A workload sees a fresh sampled wrapper every trial; the corpus is tokenized once for the tokenizer behind
    it, not once per trial (that was 0.4 s of every corpus trial on two cores), and the prompts are the same."""
    from runner.measurement.prompts import PromptMaker
    from runner.measurement.sampling import GREEDY, SampledEngine
    from tests.support.fake_engine import StandInEngine

    class Counting(StandInEngine):
        calls = 0

        def encode_text(self, text):
            Counting.calls += 1
            return super().encode_text(text)

    host = Counting()
    first = PromptMaker(source="corpus", engine=SampledEngine(host, GREEDY, base_seed=1)).tokens(length=64, seed=5)
    calls = Counting.calls
    again = PromptMaker(source="corpus", engine=SampledEngine(host, GREEDY, base_seed=2)).tokens(length=64, seed=5)
    assert again == first and Counting.calls == calls
