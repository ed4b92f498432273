"""The driver's settings come from the typed config once, enums kept."""
from __future__ import annotations

from runner.config.execution import EngineStart, Residency, Warmup
from runner.config.sections import RunConfig
from runner.scheduling.device import CUDA
from runner.scheduling.settings import ExecutionSettings, execution_env
from runner.slo import Metric, Slo, Target
from tests.unit.scheduling.plans import settings


def test_settings_keep_the_configs_enums_and_values():
    s = settings(device="cuda", units=8, parallel=2, resident="off", warmup="off", order_seed=7, deadline_s=60)
    assert s.resident is Residency.OFF and s.warmup is Warmup.OFF and s.engine_start is EngineStart.AUTO
    assert (s.device_units, s.max_parallel_engines, s.order_seed, s.deadline_s) == (8, 2, 7, 60)
    assert s.policy is CUDA
    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=200),))
    assert settings(slo=slo).slo == slo  # the actor's goodput targets: the config's one SLO


def test_auto_warmup_is_the_devices_own_and_a_chosen_mode_stays():
    assert settings(device="cuda", warmup="auto").warmup is Warmup.LIGHT
    assert settings(device="cpu", warmup="auto").warmup is Warmup.FULL
    assert settings(device="cuda", warmup="full").warmup is Warmup.FULL
    assert settings(device="cpu", warmup="light").warmup is Warmup.LIGHT
    assert Warmup.on_engine("auto") is Warmup.FULL and Warmup.on_engine("light") is Warmup.LIGHT


def test_every_setting_comes_from_the_config_none_has_a_default_of_its_own():
    assert all(f.default is f.default_factory for f in ExecutionSettings.__dataclass_fields__.values())
    assert "execution" in RunConfig.__dataclass_fields__


def test_actor_env_carries_node_switches_and_keeps_nvlink_multicast_off():
    from runner.config.sections import EngineSection

    env = execution_env(EngineSection(device="cpu", cpu_kvcache_space_gib=2),
                        environ={"PYTHONPATH": "/x", "HOME": "/h"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["PYTHONPATH"] == "/x"
    assert "HOME" not in env
