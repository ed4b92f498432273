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
    limit = model_max_len_limit(model)
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


# ---- the rest of the config: engine, cluster, execution -----------------------------------------
def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def model_max_len_limit(model: dict) -> Optional[int]:
    """The model's longest sequence: model.max_model_len_limit, or its config.json where the folder is here."""
    import json

    limits = [model["max_model_len_limit"]] if _is_int(model.get("max_model_len_limit")) else []
    path = model.get("path")
    config = os.path.join(os.path.expanduser(path), "config.json") if path else None
    if config and os.path.exists(config):
        try:
            with open(config) as f:
                limit = json.load(f).get("max_position_embeddings")
            if _is_int(limit):
                limits.append(limit)
        except (OSError, ValueError):
            pass
    return min(limits) if limits else None


def check_run_settings(*, engine: dict, cluster: dict, execution: dict, repeats=1) -> list[str]:
    """Values the executor needs: device, TP, slots, timeouts, retries."""
    errors = []
    device = engine.get("device", "cpu")
    if device not in ("cpu", "cuda"):
        errors.append(f"engine.device={device!r} must be cpu or cuda (fix: engine=cpu or engine=gpu)")
    tp = engine.get("tensor_parallel_size", 1)
    if not _is_int(tp) or tp < 1:
        errors.append(f"engine.tensor_parallel_size={tp!r} must be an integer ≥ 1 (fix: engine.tensor_parallel_size=1)")
    kv = engine.get("cpu_kvcache_space_gib")
    if kv is not None and (not _is_int(kv) or kv < 1):
        # vLLM reads VLLM_CPU_KVCACHE_SPACE as whole GiB; smaller KV goes through kv_cache_memory_bytes.
        errors.append(f"engine.cpu_kvcache_space_gib={kv!r} must be a whole number of GiB ≥ 1 "
                      f"(fix: engine.cpu_kvcache_space_gib=1, or sweep.engine_axes.kv_cache_memory_bytes=[...] "
                      f"for less)")
    for name in ("cpu_engine_slots", "max_parallel_engines"):
        value = cluster.get(name)
        if value is not None and (not _is_int(value) or value < 1):
            errors.append(f"cluster.{name}={value!r} must be an integer ≥ 1 (fix: cluster.{name}=1)")
    cpus = cluster.get("cpus_per_engine", 1)
    if not _is_number(cpus) or cpus <= 0:
        errors.append(f"cluster.cpus_per_engine={cpus!r} must be > 0 (fix: cluster.cpus_per_engine=1)")
    address = cluster.get("address")
    if address is not None and not (isinstance(address, str) and (address == "auto" or ":" in address)):
        errors.append(f"cluster.address={address!r} must be auto or HOST:PORT (fix: cluster.address=127.0.0.1:6379, "
                      f"or cluster.address=null for a local Ray)")
    for name in ("trial_timeout_s", "start_timeout_s"):
        value = execution.get(name, 1)
        if not _is_number(value) or value <= 0:
            errors.append(f"execution.{name}={value!r} must be a number of seconds > 0 (fix: execution.{name}=1800)")
    retries = execution.get("max_trial_retries", 1)
    if not _is_int(retries) or retries < 0:
        errors.append(f"execution.max_trial_retries={retries!r} must be an integer ≥ 0 "
                      f"(fix: execution.max_trial_retries=1)")
    if not _is_int(repeats) or repeats < 1:
        errors.append(f"sweep.repeats={repeats!r} must be an integer ≥ 1 (fix: sweep.repeats=1)")
    return errors


def check_engine_arg_values(*, engine_args: dict, engine_axes: dict) -> list[str]:
    """Engine arguments the runner itself interprets (vLLM checks the rest at start-up)."""
    errors = []
    for where, values in [("engine.args", [engine_args.get("kv_cache_memory_bytes")])] + [
            ("sweep.engine_axes", _values(engine_axes, "kv_cache_memory_bytes"))]:
        for v in values:
            if v is not None and (not _is_int(v) or v < 1):
                errors.append(f"kv_cache_memory_bytes={v!r} must be a positive integer of bytes "
                              f"(fix: {where}.kv_cache_memory_bytes=[1073741824])")
    return errors


def check_workload_levels(*, workloads: dict) -> list[str]:
    """A workload's own concurrency and repeats (they replace the grid's for that workload)."""
    errors = []
    for name, raw in (workloads or {}).items():
        raw = raw or {}
        if "concurrency" in raw:
            levels = _values(raw, "concurrency")
            if not levels:
                errors.append(f"workload {name!r}: concurrency has no values (fix: workload.{name}.concurrency=[1,4])")
            for c in levels:
                if not _is_int(c) or c < 1:
                    errors.append(f"workload {name!r}: concurrency={c!r} must be an integer ≥ 1 "
                                  f"(fix: workload.{name}.concurrency=[1,4])")
        if "repeats" in raw and (not _is_int(raw["repeats"]) or raw["repeats"] < 1):
            errors.append(f"workload {name!r}: repeats={raw['repeats']!r} must be an integer ≥ 1 "
                          f"(fix: workload.{name}.repeats=1)")
    return errors


def validate_run(*, engine: dict, cluster: dict, execution: dict, repeats=1, engine_args: dict,
                 engine_axes: dict, workloads: dict) -> None:
    """The checks beyond the plan's own (called next to validate(); same PlanError)."""
    errors = check_run_settings(engine=engine, cluster=cluster, execution=execution, repeats=repeats)
    errors += check_engine_arg_values(engine_args=engine_args, engine_axes=engine_axes)
    errors += check_workload_levels(workloads=workloads)
    if errors:
        raise PlanError("invalid sweep:\n  - " + "\n  - ".join(errors))


# ---- overrides: typos and unknown group options, before Hydra's own messages --------------------
def check_overrides(overrides: list[str], *, config_dir: str, config_name: str = "config") -> list[str]:
    """Each override that cannot apply, with the override that fixes it (empty: all apply)."""
    errors: list[str] = []
    kept = list(overrides)
    for _ in range(len(overrides) + 1):
        bad = _first_bad_override(kept, config_dir=config_dir, config_name=config_name)
        if bad is None:
            break
        override, message = bad
        errors.append(message)
        if override not in kept:
            break
        kept.remove(override)
    return errors


def _compose(overrides: list[str], *, config_dir: str, config_name: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(version_base=None, config_dir=config_dir):
        return compose(config_name=config_name, overrides=overrides)


def _first_bad_override(overrides: list[str], *, config_dir: str,
                        config_name: str) -> Optional[tuple[Optional[str], str]]:
    import re

    for override in overrides:  # grammar first, one at a time, so the message names the override
        problem = _parse_problem(override)
        if problem:
            return override, problem
    try:
        _compose(overrides, config_dir=config_dir, config_name=config_name)
        return None
    except Exception as exc:
        text = str(exc)
    key = re.search(r"Could not override '([^']+)'", text)
    if key:
        override = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~") == key.group(1)), None)
        others = [o for o in overrides if o != override]
        return override, _unknown_key_message(key.group(1), override=override or key.group(1),
                                              base=_safe_compose(others, config_dir=config_dir,
                                                                 config_name=config_name))
    group = re.search(r"Could not (?:load|find) '([^']+)/([^']+)'", text)
    if group:
        name, option = group.group(1), group.group(2)
        override = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~") == name), None)
        options = _group_options(config_dir, name)
        first = options[0] if options else "<option>"
        label = "workload" if name == "workload" else f"{name} option"
        fix = f"{name}=[{first}]" if override and "[" in override else f"{name}={first}"
        return override, f"unknown {label} {option!r}; valid: {', '.join(options)} (fix: {fix})"
    first_line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return None, f"the overrides do not compose: {first_line} (fix: check {' '.join(overrides)})"


def _parse_problem(override: str) -> Optional[str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        OverridesParser.create().parse_overrides([override])
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"cannot parse override {override!r}: {first} "
                f"(fix: key=value, a list as key=[a,b], a string with spaces in quotes)")
    return None


def _safe_compose(overrides: list[str], *, config_dir: str, config_name: str):
    try:
        return _compose(overrides, config_dir=config_dir, config_name=config_name)
    except Exception:
        try:
            return _compose([], config_dir=config_dir, config_name=config_name)
        except Exception:
            return None


def _unknown_key_message(key: str, *, override: str, base) -> str:
    """'sweep.grdi.concurrency' → the first segment that does not exist, and the likely intended key."""
    import difflib

    from omegaconf import DictConfig

    parts = key.split(".")
    node, known = base, []
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig) or part not in node:
            parent = ".".join(parts[:i])
            valid = sorted(node.keys()) if isinstance(node, DictConfig) else []
            close = difflib.get_close_matches(part, valid, n=1, cutoff=0.6)
            where = f"{parent}.{part}" if parent else part
            value = override.split("=", 1)[1] if "=" in override else "..."
            if close:
                fixed = ".".join(parts[:i] + [close[0]] + parts[i + 1:])
                return (f"unknown config key {where!r} in {override!r}; did you mean {close[0]!r}? "
                        f"(fix: {fixed}={value})")
            return (f"unknown config key {where!r} in {override!r}; valid under {parent or 'the root'}: "
                    f"{', '.join(map(str, valid))} (fix: one of those, or +{key}={value} to add a new key)")
        node = node[part]
    return f"cannot override {key!r} (fix: check {override})"


def _group_options(config_dir: str, group: str) -> list[str]:
    folder = os.path.join(config_dir, group)
    if not os.path.isdir(folder):
        return []
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))
