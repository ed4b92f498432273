"""What differs between CPU and CUDA lanes, as data: the driver asks the policy, never the device's name."""
from __future__ import annotations

from dataclasses import dataclass

from runner.config.execution import Residency, Warmup
from runner.plan.grid import EngineConfig

# Actors sharing one device slot's Ray resources: residents need room beside each other.
RESIDENT_ACTORS_PER_SLOT = 16
# Without residents: the engine running and the next one's actor, started ahead.
NON_RESIDENT_ACTORS_PER_SLOT = 2


@dataclass(frozen=True, kw_only=True)
class DevicePolicy:
    name: str  # "cpu" | "cuda": the engine rows' device_kind
    gpus_per_tp_rank: bool  # a TP group takes that many device units (GPUs), else one slot per engine
    residents_sleep: bool  # an engine kept between turns sleeps (sleep mode), else stays loaded and idle
    preloads_beside: bool  # a lane's next engines load beside the current one while it loads
    spare_during_trials: bool  # the next actor starts during trials (else during the load)
    quiet_trials: bool  # no teardown nor import runs beside a measured trial (they take its cores)
    frees_before_load: bool  # a retired engine's teardown ends before a wake or a load (it holds device memory)
    keeps_finished_idle: bool  # an engine done for the sweep stays loaded until the lane ends (teardown costs cores)
    spare_needs_share: bool  # a spare actor takes a fraction of the lane's GPU: none without residents
    host_limits_asleep: bool  # asleep engines keep their weights in host RAM: those must fit
    uses_placement_group: bool  # one Ray bundle per lane, so lanes never share a GPU
    binds_cores: bool  # each lane's engines get their own cores (VLLM_CPU_OMP_THREADS_BIND)
    auto_warmup: Warmup  # execution.warmup=auto: the lightest mode whose first trials held against later rounds

    def warmup(self, asked: Warmup) -> Warmup:
        return self.auto_warmup if asked is Warmup.AUTO else asked

    def units_needed(self, engine: EngineConfig) -> int:
        """Device units one engine occupies: its TP GPUs on cuda, one slot on CPU."""
        return max(1, int(engine.settings.tensor_parallel_size)) if self.gpus_per_tp_rank else 1

    def may_stay_resident(self, engine: EngineConfig, resident: Residency) -> bool:
        """Whether this engine may stay loaded between its turns (before the memory plan). An idle CPU engine
        blocks on its input queue and takes no core; Ray shares only a fraction of one GPU."""
        if resident is Residency.OFF:
            return False
        return self.units_needed(engine) == 1 if self.residents_sleep else True

    def actor_resources(self, *, width: int, share: int, engines_per_gpu: int = 1) -> dict:
        """Ray options of one engine actor; several live on one slot, the scheduler keeps one busy at a time.
        `engines_per_gpu`: the slot is that share of one GPU (cluster.engines_per_gpu)."""
        if not self.gpus_per_tp_rank:
            return {"num_cpus": 0}  # the slot's cores are handed out by VLLM_CPU_OMP_THREADS_BIND; idle holds none
        if width > 1:  # Ray has no fraction of several GPUs: a TP group's actors take the whole group
            return {"num_gpus": width, "num_cpus": 0}
        return {"num_gpus": round(1.0 / (share * max(1, engines_per_gpu)), 4), "num_cpus": 0}


CPU = DevicePolicy(name="cpu", gpus_per_tp_rank=False, residents_sleep=False, preloads_beside=True,
                   spare_during_trials=False, quiet_trials=True, frees_before_load=False, keeps_finished_idle=True,
                   spare_needs_share=False, host_limits_asleep=False, uses_placement_group=False, binds_cores=True,
                   auto_warmup=Warmup.FULL)
# On CPU a load's first round runs faster than later ones with either warm-up, so the first-trial check cannot
# choose there and `auto` keeps the full copy; on the H200 the light warm-up's first trials held (docs/benchmarks.md).
# The next actor's imports beside a trial slow it on CUDA as well (docs/benchmarks.md: round 0 against the same
# trials on warm pooled engines), so there too the spare starts during the load and trials run quiet.
CUDA = DevicePolicy(name="cuda", gpus_per_tp_rank=True, residents_sleep=True, preloads_beside=False,
                    spare_during_trials=False, quiet_trials=True, frees_before_load=True, keeps_finished_idle=False,
                    spare_needs_share=True, host_limits_asleep=True, uses_placement_group=True, binds_cores=False,
                    auto_warmup=Warmup.LIGHT)
POLICIES = {p.name: p for p in (CPU, CUDA)}


def policy_for(device: str) -> DevicePolicy:
    return POLICIES[device]


def lane_share(resident: bool) -> int:
    """How many actors share one device slot's Ray resources."""
    return RESIDENT_ACTORS_PER_SLOT if resident else NON_RESIDENT_ACTORS_PER_SLOT
