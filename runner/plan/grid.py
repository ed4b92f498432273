"""Grid expansion: a resolved config in, trials with stable ids out. Pure."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field

from runner.schema import EngineSettings

# Grid axes that configure the engine (one engine load each).
ENGINE_AXES = ("spec_method", "num_speculative_tokens", "enable_prefix_caching",
               "gpu_memory_utilization", "max_model_len")
# Grid axes that vary the load driven through one engine.
TRIAL_AXES = ("concurrency",)


# What defines an engine, and so its id: named here, not derived from EngineSettings' fields, so that a new
# settings column never changes the ids of earlier runs (and never stops them from resuming).
ENGINE_IDENTITY = ("model", "spec_method", "num_speculative_tokens", "enable_prefix_caching",
                   "gpu_memory_utilization", "max_model_len", "tensor_parallel_size", "engine_args_json")


def engine_identity(settings: EngineSettings) -> dict:
    return {name: getattr(settings, name) for name in ENGINE_IDENTITY}


def engine_id_of(settings: EngineSettings, *, spec_extra: dict, api: str = "async") -> str:
    """async engines hash without their api (their ids predate the offline API)."""
    key = {"settings": engine_identity(settings), "spec_extra": spec_extra}
    if api != "async":
        key["api"] = api
    return "e-" + stable_hash(key)


class PlanError(ValueError):
    """A plan that must not start; the message names the override that fixes it."""


def stable_hash(obj, *, length: int = 12) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    engine_id: str
    settings: EngineSettings
    # Resolved engine arguments for vLLM, except the model path (resolved at run time).
    engine_args: dict = field(hash=False, compare=False)
    spec_extra: dict = field(default_factory=dict, hash=False, compare=False)
    # "async" (AsyncLLM) or "offline" (LLM): one engine per process, so the api is part of the identity.
    api: str = "async"


@dataclass(frozen=True, kw_only=True)
class Trial:
    trial_id: str
    engine_id: str
    workload: str
    params: dict = field(hash=False, compare=False)
    concurrency: int = 1
    repeat: int = 0
    api: str = "async"

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True)


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


def spec_arms(*, methods: list[str], ks: list[int]) -> list[tuple[str, int]]:
    """Method × k, where `off` takes no k (so it appears once)."""
    arms: list[tuple[str, int]] = []
    for method in methods:
        for k in ([0] if method == "off" else ks):
            if (method, k) not in arms:
                arms.append((method, int(k)))
    return arms


def normalize_arms(arms) -> list[dict]:
    """Explicit engine arms (`sweep.arms`): each a dict of engine-axis values that replace the grid's
    values of those axes; axes an arm does not name keep the grid's values (still a product)."""
    if arms is None:
        return []
    if not isinstance(arms, (list, tuple)):
        raise PlanError(f"sweep.arms must be a list of dicts, got {arms!r} (fix: sweep.arms=[{{spec_method: 'off'}}])")
    out = []
    for i, arm in enumerate(arms):
        if not isinstance(arm, dict) or not arm:
            raise PlanError(f"sweep.arms[{i}] must be a non-empty dict of engine axes, got {arm!r} "
                            f"(fix: sweep.arms=[{{spec_method: 'off', enable_prefix_caching: true}}])")
        unknown = sorted(set(arm) - set(ENGINE_AXES))
        if unknown:
            raise PlanError(f"sweep.arms[{i}] names {unknown[0]!r}, not an engine axis; valid: "
                            f"{', '.join(ENGINE_AXES)} (fix: remove it from sweep.arms[{i}])")
        arm = dict(arm)
        if "spec_method" in arm and (arm["spec_method"] is False or arm["spec_method"] is None):
            arm["spec_method"] = "off"  # YAML reads a bare `off` as false
        for name, value in arm.items():
            if isinstance(value, (list, tuple, dict)):
                raise PlanError(f"sweep.arms[{i}].{name} must be one value, got {value!r} "
                                f"(fix: one arm per value)")
        out.append(arm)
    return out


def expand_engines(*, model: str, grid: dict, engine_args: dict, engine_axes: dict,
                   spec_extra: dict, tensor_parallel_size: int = 1, arms=None) -> list[EngineConfig]:
    arms = normalize_arms(arms)
    if not arms:
        return _expand_grid(model=model, grid=grid, engine_args=engine_args, engine_axes=engine_axes,
                            spec_extra=spec_extra, tensor_parallel_size=tensor_parallel_size)
    engines: list[EngineConfig] = []
    first_arm: dict[str, int] = {}
    for i, arm in enumerate(arms):
        arm_grid = {**grid, **{name: [value] for name, value in arm.items()}}
        for engine in _expand_grid(model=model, grid=arm_grid, engine_args=engine_args, engine_axes=engine_axes,
                                   spec_extra=spec_extra, tensor_parallel_size=tensor_parallel_size):
            if engine.engine_id in first_arm:
                raise PlanError(f"sweep.arms[{i}] and sweep.arms[{first_arm[engine.engine_id]}] give the same "
                                f"engine (fix: remove one of them)")
            first_arm[engine.engine_id] = i
            engines.append(engine)
    return engines


def _expand_grid(*, model: str, grid: dict, engine_args: dict, engine_axes: dict,
                 spec_extra: dict, tensor_parallel_size: int = 1) -> list[EngineConfig]:
    axes = {name: _as_list(grid[name], axis=name) for name in ENGINE_AXES if name in grid}
    for name, values in axes.items():
        _refuse_duplicates(values, axis=name)
    extra_axes = {name: _as_list(v, axis=f"engine_axes.{name}") for name, v in (engine_axes or {}).items()}
    arms = spec_arms(methods=axes.pop("spec_method", ["off"]), ks=axes.pop("num_speculative_tokens", [1]))
    scalar_names = list(axes)
    engines: list[EngineConfig] = []
    for (method, k), scalars, extras in itertools.product(
        arms,
        itertools.product(*axes.values()),
        itertools.product(*extra_axes.values()),
    ):
        settings_kwargs = dict(zip(scalar_names, scalars))
        args = dict(engine_args)
        args.update(dict(zip(extra_axes, extras)))
        settings = EngineSettings(
            model=model,
            spec_method=method,
            num_speculative_tokens=k,
            tensor_parallel_size=tensor_parallel_size,
            engine_args_json=json.dumps(args, sort_keys=True, default=str),
            **settings_kwargs,
        )
        method_extra = dict((spec_extra or {}).get(method) or {})
        engine_id = engine_id_of(settings, spec_extra=method_extra)
        engines.append(EngineConfig(engine_id=engine_id, settings=settings, engine_args=args,
                                    spec_extra=method_extra))
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
    trials: list[Trial] = []
    seen: dict[str, Trial] = {}
    for engine in engines:
        for wname, wparams in workloads.items():
            wparams = dict(wparams)
            api = wparams.pop("api", "async")
            if api != engine.api:
                continue
            levels = _as_list(wparams.pop("concurrency", concurrency), axis=f"workload.{wname}.concurrency")
            repeats_here = int(wparams.pop("repeats", repeats))
            for point in expand_workload_points(name=wname, params=wparams):
                for c, r in itertools.product(levels, range(repeats_here)):
                    key = {"engine": engine.engine_id, "workload": wname, "params": point,
                           "concurrency": int(c), "repeat": r, "api": api}
                    trial_id = "t-" + stable_hash(key)
                    if trial_id in seen:
                        raise PlanError(f"duplicate trial {key} (fix: remove the repeated value from the sweep)")
                    trial = Trial(trial_id=trial_id, engine_id=engine.engine_id, workload=wname,
                                  params=point, concurrency=int(c), repeat=r, api=api)
                    seen[trial_id] = trial
                    trials.append(trial)
    return trials


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


def build_plan(*, sweep_name: str, model: str, grid: dict, workloads: dict[str, dict],
               engine_args: dict, engine_axes: dict | None = None, spec_extra: dict | None = None,
               repeats: int = 1, tensor_parallel_size: int = 1, arms=None) -> Plan:
    engines = expand_engines(model=model, grid=grid, engine_args=engine_args, engine_axes=engine_axes or {},
                             spec_extra=spec_extra or {}, tensor_parallel_size=tensor_parallel_size, arms=arms)
    if not workloads:
        raise PlanError("the sweep names no workload (fix: sweep.workloads=[decode])")
    engines = [with_api(e, api) for api in workload_apis(workloads) for e in engines]
    trials = expand_trials(engines=engines, workloads=workloads, concurrency=grid.get("concurrency", [1]),
                           repeats=repeats)
    return Plan(sweep=sweep_name, engines=engines, trials=trials)
