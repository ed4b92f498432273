"""Grid expansion: the typed config (runner.config.sections) in, engines and trials with stable ids out. Pure."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from runner.config.checks import ConfigError
from runner.config.sections import (ENGINE_AXES, TRIAL_AXES, ArmSection, ModelSection, RunConfig,  # noqa: F401
                                     SweepSection)
from runner.config.workload_keys import id_point
from runner.plan.vllm_args import Target, VllmArgs, vllm_args
from runner.schema import EngineSettings
from runner.spec_arm import SpecArm, spec_arms

if TYPE_CHECKING:
    from runner.measurement.workloads.base import WorkloadParams
    from runner.plan.trial_draft import TrialDraft


# What defines an engine, and so its id: named here, not derived from EngineSettings' fields, so that a new
# settings column never changes the ids of earlier runs (and never stops them from resuming).
ENGINE_IDENTITY = ("model", "spec_method", "num_speculative_tokens", "enable_prefix_caching",
                   "gpu_memory_utilization", "max_model_len", "tensor_parallel_size", "engine_args_json")


# Settings that join the identity only when set, so that engines without them keep their earlier ids.
OPTIONAL_IDENTITY = ("spec_schedule", "spec_acceptance_profile")


def engine_identity(settings: EngineSettings) -> dict:
    identity = {name: getattr(settings, name) for name in ENGINE_IDENTITY}
    identity.update({name: getattr(settings, name) for name in OPTIONAL_IDENTITY if getattr(settings, name)})
    return identity


def engine_id_of(settings: EngineSettings, *, spec_extra: dict, api: str = "async") -> str:
    """async engines hash without their api (their ids predate the offline API)."""
    key = {"settings": engine_identity(settings), "spec_extra": spec_extra}
    if api != "async":
        key["api"] = api
    return "e-" + stable_hash(key)


class PlanError(ConfigError):
    """A plan that must not start; the message names the override that fixes it."""


def stable_hash(obj, *, length: int = 12) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """One engine of the plan. The arguments passed through (engine.args and sweep.engine_axes) are kept twice, each
    for its own use: in settings.engine_args_json (the engine's id and its row) and within vllm_args (its start)."""

    engine_id: str
    settings: EngineSettings
    spec_extra: dict = field(default_factory=dict, hash=False, compare=False)
    # "async" (AsyncLLM) or "offline" (LLM): one engine per process, so the api is part of the identity.
    api: str = "async"
    # vLLM's complete arguments for this engine (runner.plan.vllm_args, the one builder); None: not a plan's engine.
    vllm_args: Optional[VllmArgs] = field(default=None, hash=False, compare=False)

    def for_start(self, *, sleep_mode: bool) -> "EngineConfig":
        """This engine as one start runs it: its arguments completed for the start (VllmArgs.for_start)."""
        if self.vllm_args is None:
            return self
        return dataclasses.replace(self, vllm_args=self.vllm_args.for_start(sleep_mode=sleep_mode))

    @property
    def sleep_mode(self) -> bool:
        """Started with vLLM's sleep mode (it may sleep between turns, or in its pool)."""
        return self.vllm_args is not None and self.vllm_args.sleep_mode


@dataclass(frozen=True, kw_only=True)
class Trial:
    trial_id: str
    engine_id: str
    workload: str
    # The point parsed once, by its workload's parameter class: the actor runs it as it comes.
    params: WorkloadParams = field(hash=False, compare=False)
    # The point as the sweep gave it (defaults left out): it keys the trial id and workload_params_json, so a
    # new default changes no earlier id.
    point: dict = field(default_factory=dict, hash=False, compare=False)
    concurrency: int = 1
    repeat: int = 0
    api: str = "async"
    # Set where the trial runs on its group's largest-k engine (runner.plan.draft_hosts): the k it drafts there.
    draft: Optional[TrialDraft] = field(default=None, hash=False, compare=False)

    @property
    def arm_engine_id(self) -> str:
        """The engine the grid planned for this trial's arm: the one that runs it, or the smaller-k engine it
        stands for where its draft count is set on a larger one (the race and converge compare arms by it)."""
        return self.draft.planned_engine_id if self.draft is not None else self.engine_id

    @property
    def params_json(self) -> str:
        return json.dumps(self.point, sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class Plan:
    sweep: str
    engines: list[EngineConfig]
    trials: list[Trial]

    def trials_of(self, engine_id: str) -> list[Trial]:
        return [t for t in self.trials if t.engine_id == engine_id]

    def engine(self, engine_id: str) -> EngineConfig:
        return next(e for e in self.engines if e.engine_id == engine_id)


def _as_list(value, *, axis: str) -> list:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise PlanError(f"grid axis {axis!r} has no values (fix: sweep.grid.{axis}=[...] with at least one value)")
    return values


def _refuse_duplicates(values: list, *, axis: str) -> None:
    seen = set()
    for v in values:
        key = json.dumps(v, sort_keys=True, default=str)
        if key in seen:
            raise PlanError(f"grid axis {axis!r} lists {v!r} twice (fix: sweep.grid.{axis} with distinct values)")
        seen.add(key)


SCALAR_AXES = tuple(a for a in ENGINE_AXES if a not in ("spec_method", "num_speculative_tokens",
                                                        "spec_acceptance_profile"))


@dataclass(frozen=True, kw_only=True)
class _ArmPoint:
    """One explicit arm (index) or the grid (None): its spec arms, profiles, schedule and other axes' values."""

    index: int | None
    spec_arms: list[SpecArm]
    profiles: list
    schedule: object  # a DraftSchedule or None
    scalars: dict[str, list]


def _arm_points(sweep: SweepSection, *, max_num_seqs: int, dummy_weights: bool = False,
                cuda: bool = False) -> list[_ArmPoint]:
    """Per explicit arm, or once for the grid; an `auto` profile resolved for the weights and device."""
    from runner.config.acceptance import resolve_auto
    from runner.plan.spec_variants import arm_schedule, parse_profile

    grid = sweep.grid
    arms: list[ArmSection | None] = list(sweep.arms) if sweep.arms else [None]
    points = []
    for i, arm in enumerate(arms):
        named = arm.axes() if arm is not None else {}
        schedule = arm_schedule(arm, index=i, max_num_seqs=max_num_seqs)
        methods = [named["spec_method"]] if "spec_method" in named else grid.values("spec_method")
        ks = [named["num_speculative_tokens"]] if "num_speculative_tokens" in named else grid.values(
            "num_speculative_tokens")
        if schedule is not None:
            ks = [schedule.max_k]
        scalars = {}
        for axis in SCALAR_AXES:
            values = [named[axis]] if axis in named else _as_list(grid.values(axis), axis=axis)
            _refuse_duplicates(values, axis=axis)
            scalars[axis] = values
        profiles = ([named["spec_acceptance_profile"]] if "spec_acceptance_profile" in named
                    else _as_list(grid.values("spec_acceptance_profile"), axis="spec_acceptance_profile"))
        _refuse_duplicates(profiles, axis="spec_acceptance_profile")
        where = "sweep.grid" if arm is None else f"sweep.arms[{i}]"
        _refuse_duplicates(_as_list(methods, axis="spec_method"), axis="spec_method")
        _refuse_duplicates(_as_list(ks, axis="num_speculative_tokens"), axis="num_speculative_tokens")
        points.append(_ArmPoint(index=None if arm is None else i, spec_arms=spec_arms(methods=methods, ks=ks),
                                profiles=[parse_profile(resolve_auto(p, dummy_weights=dummy_weights, cuda=cuda),
                                                        where=where) for p in profiles], schedule=schedule,
                                scalars=scalars))
    return points


def expand_engines(*, model: ModelSection, sweep: SweepSection, engine_args: dict, spec_extra: dict,
                   target: Target, tensor_parallel_size: int = 1) -> list[EngineConfig]:
    """Spec arms × acceptance profiles × the other engine axes × sweep.engine_axes, per explicit arm (sweep.arms)
    or for the grid; spec off takes no profile (it appears once)."""
    from runner.plan.spec_variants import DEFAULT_MAX_NUM_SEQS, engine_profile

    extra_axes = {name: _as_list(v, axis=f"engine_axes.{name}") for name, v in (sweep.engine_axes or {}).items()}
    engines: list[EngineConfig] = []
    first_arm: dict[str, int] = {}
    resolved: dict = {}  # measured profiles read once per (run folder, method)
    for point in _arm_points(sweep, max_num_seqs=int(engine_args.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS),
                             dummy_weights=model.load_format == "dummy", cuda=target.cuda):
        index, scalars = point.index, point.scalars
        where = "sweep.grid" if index is None else f"sweep.arms[{index}]"
        seen: set[str] = set()
        for arm, profile, values, extras in itertools.product(point.spec_arms, point.profiles,
                                                              itertools.product(*scalars.values()),
                                                              itertools.product(*extra_axes.values())):
            args = dict(engine_args)
            args.update(dict(zip(extra_axes, extras)))
            profile = engine_profile(profile, arm=arm, where=where, resolved=resolved)
            settings = EngineSettings(model=model.name, spec_method=arm.method, num_speculative_tokens=arm.k,
                                      tensor_parallel_size=tensor_parallel_size,
                                      engine_args_json=json.dumps(args, sort_keys=True, default=str),
                                      spec_schedule=point.schedule.json() if point.schedule and not arm.off else None,
                                      spec_acceptance_profile=profile.text(), **dict(zip(scalars, values)))
            method_extra = dict((spec_extra or {}).get(arm.method) or {})
            engine = EngineConfig(engine_id=engine_id_of(settings, spec_extra=method_extra), settings=settings,
                                  spec_extra=method_extra,
                                  vllm_args=vllm_args(settings=settings, engine_args=args, spec_extra=method_extra,
                                                      model=model, target=target))
            if engine.engine_id in seen:  # spec off under several profiles: one engine
                continue
            seen.add(engine.engine_id)
            if index is not None:
                if engine.engine_id in first_arm:
                    raise PlanError(f"sweep.arms[{index}] and sweep.arms[{first_arm[engine.engine_id]}] give the "
                                    f"same engine (fix: remove one of them)")
                first_arm[engine.engine_id] = index
            engines.append(engine)
    return engines


def expand_workload_points(*, name: str, params: dict) -> list[dict]:
    """A workload's params, with list values as axes (except keys known to hold lists)."""
    params = dict(params)
    params.pop("name", None)
    axes = {k: v for k, v in params.items() if isinstance(v, (list, tuple)) and not k.endswith("_list")}
    for axis, values in axes.items():
        _as_list(values, axis=f"{name}.{axis}")
        _refuse_duplicates(list(values), axis=f"workload.{name}.{axis}")
    fixed = {k: v for k, v in params.items() if k not in axes}
    points = []
    for combo in itertools.product(*axes.values()):
        point = dict(fixed)
        point.update(dict(zip(axes, combo)))
        points.append(point)
    return points


def expand_trials(*, engines: list[EngineConfig], workloads: dict[str, dict], concurrency: list[int],
                  repeats: int = 1) -> list[Trial]:
    concurrency = _as_list(concurrency, axis="concurrency")
    _refuse_duplicates(concurrency, axis="concurrency")
    points = {name: _parsed_points(name, raw, concurrency=concurrency, repeats=repeats)
              for name, raw in workloads.items()}  # parsed once, for every engine of their api
    trials: list[Trial] = []
    seen: dict[str, Trial] = {}
    for engine in engines:
        for wname, (api, repeats_here, parsed) in points.items():
            if api != engine.api:
                continue
            for point, params, levels in parsed:
                for c, r in itertools.product(levels, range(repeats_here)):
                    key = {"engine": engine.engine_id, "workload": wname, "params": id_point(wname, point),
                           "concurrency": int(c), "repeat": r, "api": api}
                    trial_id = "t-" + stable_hash(key)
                    if trial_id in seen:
                        raise PlanError(f"duplicate trial {key} (fix: remove the repeated value from the sweep)")
                    trial = Trial(trial_id=trial_id, engine_id=engine.engine_id, workload=wname, params=params,
                                  point=point, concurrency=int(c), repeat=r, api=api)
                    seen[trial_id] = trial
                    trials.append(trial)
    return trials


def _parsed_points(name: str, raw: dict, *, concurrency: list, repeats: int):
    """A workload's api, repeats, and each point as given, parsed, with its concurrency levels."""
    raw = dict(raw)
    api = raw.pop("api", "async")
    levels = _as_list(raw.pop("concurrency", concurrency), axis=f"workload.{name}.concurrency")
    repeats_here = int(raw.pop("repeats", repeats))
    parsed = []
    for point in expand_workload_points(name=name, params=raw):
        params = parse_point(name, point)
        parsed.append((point, params, point_levels(params, levels)))
    return api, repeats_here, parsed


def parse_point(workload: str, point: dict) -> WorkloadParams:
    """A workload point in its workload's parameter class (the registry's), or a PlanError naming the fix."""
    from runner.measurement.workloads import workload_class

    try:
        return workload_class(workload).parse_params(point)
    except (TypeError, ValueError) as exc:
        raise PlanError(str(exc)) from None


def point_levels(params: WorkloadParams, levels: list) -> list[int]:
    """The concurrency levels of one workload point: the grid's, or an open-loop point's own cap (its
    max_concurrency, 0 for none) once, whatever the grid's concurrency axis says."""
    return list(dict.fromkeys(int(params.trial_concurrency(int(c))) for c in levels))


def with_api(engine: EngineConfig, api: str) -> EngineConfig:
    """The same engine settings under another API; async engines keep their ids."""
    if api == engine.api:
        return engine
    engine_id = engine_id_of(engine.settings, spec_extra=engine.spec_extra, api=api)
    return dataclasses.replace(engine, engine_id=engine_id, api=api)


def workload_apis(workloads: dict[str, dict]) -> list[str]:
    """The APIs the workloads ask for, async first (each gets its own engines)."""
    apis = {str((w or {}).get("api", "async")) for w in workloads.values()}
    return sorted(apis, key=lambda a: (a != "async", a))


def build_plan(config: RunConfig) -> Plan:
    """The plan of a typed config (validated by runner.plan.validate first)."""
    engines = expand_engines(model=config.model, sweep=config.sweep, engine_args=dict(config.engine.args),
                             spec_extra=config.spec, target=Target.of(config.engine.device),
                             tensor_parallel_size=config.engine.tensor_parallel_size)
    workloads = config.workload
    if not workloads:
        raise PlanError("the sweep names no workload (fix: workload=[decode])")
    engines = [with_api(e, api) for api in workload_apis(workloads) for e in engines]
    trials = expand_trials(engines=engines, workloads=workloads, concurrency=config.sweep.grid.concurrency,
                           repeats=config.sweep.repeats)
    return Plan(sweep=config.sweep.name, engines=engines, trials=trials)
