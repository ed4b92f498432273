"""Hand-made plans and settings for the driver's pure tests."""
from __future__ import annotations

import dataclasses

from runner.config.sections import run_config
from runner.measurement.workloads.decode import DecodeParams
from runner.plan.grid import EngineConfig, Plan, Trial
from runner.schema import EngineSettings
from runner.scheduling.settings import Capacity, ExecutionSettings
from runner.slo import Slo


def rounds_plan(engines: int, trials: int, repeats: int) -> Plan:
    es = [EngineConfig(engine_id=f"e{i}", settings=EngineSettings(model="m")) for i in range(engines)]
    ts = [Trial(trial_id=f"t{i}-{j}-r{r}", engine_id=f"e{i}", workload="decode", params=DecodeParams(),
                concurrency=j, repeat=r)
          for i in range(engines) for r in range(repeats) for j in range(trials)]
    return Plan(sweep="s", engines=es, trials=ts)


def tp_plan(*, tps_and_trials) -> Plan:
    engines, trials = [], []
    for i, (tp, n) in enumerate(tps_and_trials):
        engine = EngineConfig(engine_id=f"e{i}", settings=EngineSettings(model="m", tensor_parallel_size=tp))
        engines.append(engine)
        trials += [Trial(trial_id=f"t{i}-{j}", engine_id=engine.engine_id, workload="decode",
                         params=DecodeParams())
                   for j in range(n)]
    return Plan(sweep="s", engines=engines, trials=trials)


def settings(*, device: str = "cpu", units: int = 1, parallel: int = 1, slo: Slo = Slo(),
             **execution) -> ExecutionSettings:
    """The settings a run of the default config would build, on `units` device units."""
    config = run_config(sweep_name="s", model="m", grid={"spec_method": ["off"]}, workloads={"decode": {}})
    config.slo = slo
    config.engine = dataclasses.replace(config.engine, device=device)
    config.execution = dataclasses.replace(config.execution, **execution)  # checked and typed again
    return ExecutionSettings.of(config, capacity=Capacity(device_units=units, max_parallel_engines=parallel))
