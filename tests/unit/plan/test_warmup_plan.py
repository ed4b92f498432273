"""Which unmeasured runs an engine makes before a trial, by warm-up mode (the actor's logic, a fake engine)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from runner.config.execution import Warmup
from runner.execution.actor import EngineActor
from runner.measurement.workloads.decode import DecodeParams
from runner.plan.grid import Trial


def engine(mode: Warmup):
    runs: list[tuple[int, int]] = []

    async def unmeasured(trial, workload, params, *, concurrency):
        runs.append((concurrency, params.input_len))

    fake = SimpleNamespace(warmup=mode, warm_shapes=set(), warm_points=set(), warm_batches=set(),
                           warmup_output_cap=64, _unmeasured=unmeasured)
    return fake, runs


def warm(fake, concurrency: int, input_len: int = 1024) -> float | None:
    params = DecodeParams(input_len=input_len)
    trial = Trial(trial_id="t", engine_id="e", workload="decode", params=params,
                  point={"input_len": input_len}, concurrency=concurrency)
    return asyncio.run(EngineActor._warm_up(fake, trial=trial, workload=None, params=params))


def test_light_runs_each_point_once_at_one_session_then_a_short_pass_per_new_concurrency():
    fake, runs = engine(Warmup.LIGHT)
    warm(fake, 8)
    warm(fake, 8)  # the same shape: warm
    warm(fake, 1)  # the point ran at one session already
    warm(fake, 16)
    assert runs == [(1, 1024), (8, 128), (16, 128)]


def test_full_runs_each_shape_whole_and_a_later_mode_warms_what_it_has_not_covered():
    fake, runs = engine(Warmup.FULL)
    warm(fake, 8)
    assert runs == [(8, 1024)] and warm(fake, 8) == 0.0
    fake.warmup = Warmup.LIGHT  # a pooled engine adopted by a command asking light: full covered this point
    warm(fake, 8)
    assert runs == [(8, 1024)]
    fake.warmup = Warmup.FULL
    warm(fake, 4)
    fake.warmup = Warmup.LIGHT
    warm(fake, 2, input_len=2048)
    fake.warmup = Warmup.FULL  # light's runs are not a full copy: full warms the shape again
    warm(fake, 2, input_len=2048)
    assert runs == [(8, 1024), (4, 1024), (1, 2048), (2, 128), (2, 2048)]


def test_off_runs_nothing():
    fake, runs = engine(Warmup.OFF)
    assert warm(fake, 8) is None and runs == []
