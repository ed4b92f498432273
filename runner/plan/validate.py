"""Check the whole plan before any engine starts. Each message names the override that fixes it."""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Optional

from runner.plan.grid import ENGINE_AXES, TRIAL_AXES, PlanError
from runner.plan.spec_methods import SPEC_METHODS

GRID_AXES = set(ENGINE_AXES) | set(TRIAL_AXES)


def _values(grid: dict, axis: str) -> list:
    v = grid.get(axis)
    return list(v) if isinstance(v, (list, tuple)) else ([] if v is None else [v])


def check_grid(grid: dict) -> list[str]:
    errors = []
    for axis in grid:
        if axis not in GRID_AXES:
            errors.append(f"unknown grid axis {axis!r}; valid: {', '.join(sorted(GRID_AXES))} "
                          f"(fix: remove sweep.grid.{axis}, or put engine arguments under sweep.engine_axes.{axis})")
    for axis in GRID_AXES & set(grid):
        if not _values(grid, axis):
            errors.append(f"grid axis {axis!r} has no values (fix: sweep.grid.{axis}=[...] with at least one value)")
    methods = _values(grid, "spec_method") or ["off"]
    for m in methods:
        if m not in SPEC_METHODS:
            errors.append(f"unknown speculative method {m!r}; valid: {', '.join(SPEC_METHODS)} "
                          f"(fix: sweep.grid.spec_method=[off,mtp])")
    ks = _values(grid, "num_speculative_tokens") or [1]
    for m in methods:
        spec = SPEC_METHODS.get(m)
        if spec is None or m == "off":
            continue
        for k in ks:
            if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= spec.max_k:
                errors.append(f"num_speculative_tokens={k!r} is outside 1..{spec.max_k} for {m!r} "
                              f"(fix: sweep.grid.num_speculative_tokens=[1,2,3])")
    for c in _values(grid, "concurrency"):
        if not isinstance(c, int) or isinstance(c, bool) or c < 1:
            errors.append(f"concurrency={c!r} must be an integer ≥ 1 (fix: sweep.grid.concurrency=[1,4])")
    for u in _values(grid, "gpu_memory_utilization"):
        if not isinstance(u, (int, float)) or isinstance(u, bool) or not 0 < u <= 1:
            errors.append(f"gpu_memory_utilization={u!r} is outside (0, 1] "
                          f"(fix: sweep.grid.gpu_memory_utilization=[0.9])")
    for b in _values(grid, "enable_prefix_caching"):
        if not isinstance(b, bool):
            errors.append(f"enable_prefix_caching={b!r} must be true or false "
                          f"(fix: sweep.grid.enable_prefix_caching=[true,false])")
    for n in _values(grid, "max_model_len"):
        if not isinstance(n, int) or isinstance(n, bool) or n < 16:
            errors.append(f"max_model_len={n!r} must be an integer ≥ 16 (fix: sweep.grid.max_model_len=[2048])")
    return errors


def _looks_like_hub_id(path: str) -> bool:
    return path.count("/") == 1 and not path.startswith((".", "/", "~"))


def check_model(model: dict) -> list[str]:
    if model.get("builtin"):
        return []
    path = model.get("path")
    if not path:
        return ["no model given (fix: model=tiny_mtp, or model.path=/path/to/model)"]
    if not os.path.exists(os.path.expanduser(path)) and not _looks_like_hub_id(path):
        return [f"model path {path!r} does not exist (fix: model.path=<an existing folder>)"]
    return []


def check_max_len(*, grid: dict, model: dict) -> list[str]:
    limit = model.get("max_model_len_limit")
    if not limit:
        return []
    return [f"max_model_len={n} is above the model's limit {limit} "
            f"(fix: sweep.grid.max_model_len=[{limit}] or smaller)"
            for n in _values(grid, "max_model_len") if isinstance(n, int) and n > limit]


def check_workloads(*, workloads: dict, grid: dict) -> list[str]:
    from runner.measurement.workloads import WORKLOADS
    from runner.plan.grid import expand_workload_points

    errors = []
    max_lens = [n for n in _values(grid, "max_model_len") if isinstance(n, int)]
    for name, raw in workloads.items():
        if name not in WORKLOADS:
            errors.append(f"unknown workload {name!r}; valid: {', '.join(sorted(WORKLOADS))} "
                          f"(fix: workload=[{sorted(WORKLOADS)[0]}])")
            continue
        cls = WORKLOADS[name]
        raw = dict(raw or {})
        api = raw.get("api", "async")
        if api not in cls.apis:
            errors.append(f"workload {name!r} cannot use api={api!r}; valid: {', '.join(cls.apis)} "
                          f"(fix: workload.{name}.api={cls.apis[0]})")
        for key in ("api", "concurrency", "repeats"):
            raw.pop(key, None)
        try:
            points = expand_workload_points(name=name, params=raw)
        except PlanError as exc:
            errors.append(str(exc))
            continue
        for point in points:
            try:
                params = cls.parse_params(point)
            except (ValueError, TypeError) as exc:
                errors.append(str(exc))
                break
            errors.extend(f"workload {name!r}: {e} (fix: workload.{name}.{e.split('=')[0]}=<a valid value>)"
                          for e in params.validate())
            need = params.max_sequence_tokens()
            for n in max_lens:
                if need > n:
                    errors.append(f"workload {name!r} needs {need} tokens per sequence ({point}) but "
                                  f"max_model_len={n} (fix: shrink workload.{name} sizes or raise "
                                  f"sweep.grid.max_model_len)")
    return errors


def engine_arg_names() -> Optional[set[str]]:
    """vLLM's own engine-argument fields (None where vLLM is not installed on the driver)."""
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # vLLM's import-time notices are not the user's business here
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
    except Exception:
        return None
    finally:
        root.setLevel(level)
    return {f.name for f in dataclasses.fields(AsyncEngineArgs)}


def check_engine_args(*, args: Iterable[str], known: Optional[set[str]], where: str) -> list[str]:
    if known is None:
        return []
    errors = []
    for name in args:
        if name not in known:
            close = sorted(k for k in known if k.startswith(name[:4]))[:5]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            errors.append(f"{name!r} is not a vLLM engine argument{hint} (fix: remove or rename {where}.{name})")
    return errors


def grid_with_arms(*, grid: dict, arms) -> dict:
    """The grid's values of each engine axis plus those the explicit arms (sweep.arms) name, for the
    per-value checks; raises PlanError for malformed arms."""
    from runner.plan.grid import normalize_arms

    merged = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in grid.items()}
    for arm in normalize_arms(arms):
        for name, value in arm.items():
            values = _values(merged, name)
            merged[name] = values + ([value] if value not in values else [])
    return merged


def validate(*, grid: dict, model: dict, workloads: dict, engine_args: dict, engine_axes: dict,
             known_engine_args: Optional[set[str]], arms=None) -> None:
    grid = grid_with_arms(grid=grid, arms=arms) if arms else grid
    errors = check_grid(grid) + check_model(model) + check_max_len(grid=grid, model=model)
    errors += check_workloads(workloads=workloads, grid=grid) if workloads else [
        "the sweep names no workload (fix: workload=[decode])"]
    errors += check_engine_args(args=engine_args, known=known_engine_args, where="engine.args")
    errors += check_engine_args(args=engine_axes, known=known_engine_args, where="sweep.engine_axes")
    for name, values in (engine_axes or {}).items():
        if isinstance(values, (list, tuple)) and not values:
            errors.append(f"engine axis {name!r} has no values (fix: sweep.engine_axes.{name}=[...])")
    if errors:
        raise PlanError("invalid sweep:\n  - " + "\n  - ".join(errors))
