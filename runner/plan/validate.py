"""Check the whole plan before any engine starts. Each message names the override that fixes it."""
from __future__ import annotations

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


def engine_arg_spec():
    """vLLM's own engine-argument rules for the installed version, from the JSON cache (None: no vLLM here)."""
    from runner.plan.engine_args import load_spec

    return load_spec()


def _known_names(known) -> Optional[set[str]]:
    return None if known is None else (set(known) if isinstance(known, (set, frozenset, list)) else known.names)


def check_engine_args(*, args: Iterable[str], known, where: str) -> list[str]:
    """Names vLLM does not know (`known`: an EngineArgSpec or a set of names; None: not checked)."""
    import difflib

    known = _known_names(known)
    if known is None:
        return []
    errors = []
    for name in args:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
            if close:
                errors.append(f"{name!r} is not a vLLM engine argument; did you mean {close[0]!r}? "
                              f"(fix: {where}.{close[0]}=...)")
                continue
            near = sorted(k for k in known if k.startswith(name[:4]))[:5]
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            errors.append(f"{name!r} is not a vLLM engine argument{hint} (fix: remove or rename {where}.{name})")
    return errors


# Engine arguments the runner sets itself (each a row column or the model's own settings): passed through
# engine.args or sweep.engine_axes they would make a row's labels differ from what the engine ran.
RUNNER_OWNED = {
    "speculative_config": "sweep.grid.spec_method=[mtp] sweep.grid.num_speculative_tokens=[2] "
                          "(method extras: spec.<method>.<key>)",
    "model": "model.path=<folder or hub id>, or model=<option>",
    "tokenizer": "model.tokenizer=<path>",
    "load_format": "model.load_format=<format>",
    "max_model_len": "sweep.grid.max_model_len={values}",
    "gpu_memory_utilization": "sweep.grid.gpu_memory_utilization={values}",
    "enable_prefix_caching": "sweep.grid.enable_prefix_caching={values}",
    "tensor_parallel_size": "engine.tensor_parallel_size={value}",
    # vLLM 0.32's shortcuts into speculative_config.
    "spec_method": "sweep.grid.spec_method={values}",
    "spec_tokens": "sweep.grid.num_speculative_tokens={values}",
    "spec_model": "+spec.<method>.model=<draft model path>",
}
# Grid axes that reach vLLM, and the engine argument whose rules their values follow (off and its k=0 are the
# runner's own, never passed).
GRID_TO_VLLM = {"enable_prefix_caching": "enable_prefix_caching", "gpu_memory_utilization": "gpu_memory_utilization",
                "max_model_len": "max_model_len", "spec_method": "spec_method", "num_speculative_tokens": "spec_tokens"}


def _yaml_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_yaml_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_yaml_text(v)}" for k, v in value.items()) + "}"
    return "null" if value is None else str(value)


def _spec_config_fix(values: list) -> Optional[str]:
    """The grid axes (and spec.<method> extras) that give the engine these speculative_configs."""
    configs = [v for v in values if isinstance(v, dict) and v.get("method")]
    if not configs:
        return None
    methods = list(dict.fromkeys(str(c["method"]) for c in configs))
    ks = list(dict.fromkeys(c["num_speculative_tokens"] for c in configs if "num_speculative_tokens" in c))
    fix = f"sweep.grid.spec_method=[{','.join(methods)}]"
    fix += f" sweep.grid.num_speculative_tokens=[{','.join(map(str, ks))}]" if ks else ""
    extras = {k: v for c in configs for k, v in c.items() if k not in ("method", "num_speculative_tokens")}
    return fix + "".join(f" ++spec.{methods[0]}.{k}={_yaml_text(v)}" for k, v in extras.items())


def check_runner_owned(*, engine_args: dict, engine_axes: dict) -> list[str]:
    errors = []
    for where, args, as_list in (("engine.args", engine_args or {}, False),
                                 ("sweep.engine_axes", engine_axes or {}, True)):
        for name in args:
            if name not in RUNNER_OWNED:
                continue
            values = _values(args, name) if as_list else [args[name]]
            fix = RUNNER_OWNED[name].format(values=_yaml_text(values), value=_yaml_text(values[0] if values else 1))
            if name == "speculative_config":
                fix = _spec_config_fix(values) or fix
            errors.append(f"{where}.{name} is set by the runner, not passed through (its rows would say "
                          f"otherwise than the engine ran) (fix: remove {where}.{name}; use {fix})")
    return errors


def check_spec_extra(*, spec_extra: dict, methods: Iterable[str]) -> list[str]:
    """spec.<method> holds a method's extras; the method and k are the arm's own, and some methods need a
    draft model."""
    errors = []
    for method, extra in (spec_extra or {}).items():
        if extra is not None and not isinstance(extra, dict):
            errors.append(f"spec.{method} must be a dict of speculative_config keys, got {extra!r} "
                          f"(fix: spec.{method}={{}})")
            continue
        for key, fix in (("method", f"the arm's method comes from sweep.grid.spec_method=[{method}]"),
                         ("num_speculative_tokens", "k comes from sweep.grid.num_speculative_tokens=[1,2]")):
            if key in (extra or {}):
                errors.append(f"spec.{method}.{key} is set by the runner per arm (fix: remove spec.{method}.{key}; "
                              f"{fix})")
    for method in dict.fromkeys(methods):
        spec = SPEC_METHODS.get(method)
        if spec is None:
            continue
        extra = (spec_extra or {}).get(method) or {}
        for need in spec.needs:
            if not extra.get(need):
                errors.append(f"speculative method {method!r} needs its draft {need} (spec.{method}.{need}) "
                              f"(fix: +spec.{method}.{need}=<path to the {method} draft model>)")
    return errors


def check_engine_arg_rules(*, spec, engine_args: dict, engine_axes: dict, grid: dict) -> list[str]:
    """Every engine-argument value, by vLLM's own rules for the installed version (spec: EngineArgSpec)."""
    from runner.plan.engine_args import describe_valid, example_value, value_problem

    if spec is None or not hasattr(spec, "rules"):
        return []
    errors = []
    sources = [("engine.args", name, [value], False) for name, value in (engine_args or {}).items()]
    sources += [("sweep.engine_axes", name, _values(engine_axes, name), True) for name in (engine_axes or {})]
    sources += [("sweep.grid", axis, [v for v in _values(grid, axis) if v not in ("off", 0)], True)
                for axis in GRID_TO_VLLM if axis in grid]
    for where, name, values, as_list in sources:
        rule = spec.rules.get(GRID_TO_VLLM[name] if where == "sweep.grid" else name)
        if rule is None or name in RUNNER_OWNED and where != "sweep.grid":
            continue
        for v in values:
            problem = value_problem(rule, v)
            if problem is None:
                continue
            example = example_value(rule)
            fix = f"{where}.{name}=[{example}]" if as_list else f"{where}.{name}={example}"
            errors.append(f"{where}.{name}={_yaml_text(v)} {problem} for vLLM {spec.vllm_version}; valid: "
                          f"{describe_valid(rule)} (fix: {fix})")
    return errors


def check_sweep_keys(*, arms, engine_axes, race=False) -> list[str]:
    """The sweep-level keys every sweep accepts (conf/sweep_defaults.yaml), by type."""
    errors = []
    if arms is not None and not isinstance(arms, (list, tuple)):
        errors.append(f"sweep.arms={arms!r} must be a list of engine arms or null "
                      f"(fix: sweep.arms=[{{spec_method:off}},{{spec_method:mtp,num_speculative_tokens:2}}])")
    if engine_axes is not None and not isinstance(engine_axes, dict):
        errors.append(f"sweep.engine_axes={engine_axes!r} must be a dict of engine argument → values "
                      f"(fix: sweep.engine_axes={{kv_cache_dtype:[auto,fp8]}})")
    elif engine_axes:
        for name, values in engine_axes.items():
            if isinstance(values, dict):
                errors.append(f"sweep.engine_axes.{name} must be a list of values, got a dict "
                              f"(fix: sweep.engine_axes={{{name}:[<value>,<value>]}})")
    if not isinstance(race, bool):
        errors.append(f"sweep.race={race!r} must be true or false (fix: sweep.race=false)")
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
             known_engine_args=None, arms=None, spec_extra: Optional[dict] = None, race=False) -> None:
    """`known_engine_args`: vLLM's rules (EngineArgSpec from engine_arg_spec()), a set of names, or None."""
    errors = check_sweep_keys(arms=arms, engine_axes=engine_axes, race=race)
    if errors:
        raise PlanError("invalid sweep:\n  - " + "\n  - ".join(errors))
    engine_axes = engine_axes or {}
    grid = grid_with_arms(grid=grid, arms=arms) if arms else grid
    errors = check_grid(grid) + check_model(model) + check_max_len(grid=grid, model=model)
    errors += check_runner_owned(engine_args=engine_args, engine_axes=engine_axes)
    errors += check_spec_extra(spec_extra=spec_extra or {}, methods=_values(grid, "spec_method") or ["off"])
    flagged = {axis for axis in ENGINE_AXES if any(f"{axis}=" in e for e in errors)}
    for e in check_engine_arg_rules(spec=known_engine_args, engine_args=engine_args, engine_axes=engine_axes,
                                    grid=grid):
        # A grid axis the grid's own (stricter) checks already refused gets one message, not two.
        if not any(e.startswith(f"sweep.grid.{axis}=") for axis in flagged):
            errors.append(e)
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
    node = base
    for i, part in enumerate(parts):
        if i and (node is None or isinstance(node, DictConfig) and not len(node)) and "=" in override:
            # An empty (null) dict such as sweep.engine_axes takes a whole dict; Hydra refuses a new key in it.
            parent, rest = ".".join(parts[:i]), ".".join(parts[i:])
            value = override.split("=", 1)[1]
            return (f"{parent} is empty, so {override!r} names a key it does not have "
                    f"(fix: {parent}={{{rest}:{value}}}, or +{key}={value})")
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


# ---- capacity: trials the engine cannot hold at once (warned, still run: a wall to measure) -------------------
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}


def model_shape(model: dict) -> Optional[dict]:
    """The model's config.json as a dict (builtin models from their spec), None where it cannot be read here."""
    import json

    builtin = model.get("builtin")
    if builtin in ("tiny_mtp", "mimo_7b"):
        from runner.models.tiny import TinyModelSpec, model_config

        spec = TinyModelSpec()
        if builtin == "mimo_7b":
            from runner.models.mimo7b import MIMO_7B as spec
        return model_config(spec=spec, eos_token_id=0)
    path = model.get("path")
    config = os.path.join(os.path.expanduser(path), "config.json") if path else None
    if config and os.path.exists(config):
        try:
            with open(config) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    return None


def kv_bytes_per_token(*, shape: dict, engine_args: dict, spec_method: str) -> Optional[int]:
    """2 (K and V) × layers × KV heads × head dim × element bytes; MTP layers count when MTP runs."""
    layers = shape.get("num_hidden_layers")
    heads = shape.get("num_key_value_heads") or shape.get("num_attention_heads")
    head_dim = shape.get("head_dim") or (shape["hidden_size"] // shape["num_attention_heads"]
                                         if shape.get("hidden_size") and shape.get("num_attention_heads") else None)
    if not (_is_int(layers) and _is_int(heads) and _is_int(head_dim)):
        return None
    if spec_method == "mtp":
        layers += int(shape.get("num_nextn_predict_layers") or 0)
    kv_dtype = str(engine_args.get("kv_cache_dtype") or "auto")
    if kv_dtype.startswith("fp8") or kv_dtype.startswith("int8"):
        size = 1
    else:
        dtype = str(engine_args.get("dtype") or "auto")
        size = _DTYPE_BYTES.get(dtype if dtype != "auto" else str(shape.get("torch_dtype") or "bfloat16"), 2)
    return 2 * layers * heads * head_dim * size


def kv_pool_bytes(*, engine: dict, engine_args: dict) -> Optional[int]:
    if _is_int(engine_args.get("kv_cache_memory_bytes")):
        return engine_args["kv_cache_memory_bytes"]
    if engine.get("device", "cpu") == "cpu" and _is_int(engine.get("cpu_kvcache_space_gib")):
        return engine["cpu_kvcache_space_gib"] * 2**30
    return None


def capacity_warnings(plan, *, model: dict, engine: dict) -> list[str]:
    """Trials whose concurrency × sequence length the engine's KV pool cannot hold, or whose concurrency is
    above max_num_seqs. Estimates from config.json; prefix sharing is not counted (an upper bound)."""
    import json

    from runner.measurement.workloads import WORKLOADS
    from runner.plan.labels import plan_labels

    shape = model_shape(model)
    labels = plan_labels(plan.engines)
    warnings, seen, unknown = [], set(), []
    for e in plan.engines:
        args = json.loads(e.settings.engine_args_json or "{}")
        per_token = kv_bytes_per_token(shape=shape, engine_args=args, spec_method=e.settings.spec_method) \
            if shape else None
        pool = kv_pool_bytes(engine=engine, engine_args=args)
        max_seqs = args.get("max_num_seqs")
        for t in plan.trials_of(e.engine_id):
            key = (e.engine_id, t.workload, t.params_json, t.concurrency)
            if key in seen:
                continue
            seen.add(key)
            cls = WORKLOADS.get(t.workload)
            try:
                seq = min(cls.parse_params(t.params).max_sequence_tokens(), e.settings.max_model_len)
            except Exception:
                continue
            where = f"engine {e.engine_id} ({labels[e.engine_id]}), {t.workload} c={t.concurrency}"
            if _is_int(max_seqs) and t.concurrency > max_seqs:
                warnings.append(f"warning: {where}: concurrency {t.concurrency} > max_num_seqs={max_seqs}; at most "
                                f"{max_seqs} run at once, the rest queue (fix, if not meant: "
                                f"engine.args.max_num_seqs={t.concurrency} or a lower sweep.grid.concurrency)")
            need = t.concurrency * seq
            if pool is None or per_token is None:
                unknown.append(need)
                continue
            tokens = pool // per_token
            if need > tokens:
                warnings.append(f"warning: {where}: {t.concurrency} × {seq} tokens = {need} tokens, above the KV "
                                f"pool's ~{tokens} tokens ({pool / 2**30:.3g} GiB / {per_token} B per token); "
                                f"the trial runs as a capacity wall (preemption or queueing expected)")
    if unknown:
        warnings.append(f"note: KV pool unknown before start for {len(unknown)} trial shape(s) (largest needs "
                        f"{max(unknown)} tokens); set sweep.engine_axes={{kv_cache_memory_bytes:[<bytes>]}} "
                        f"to check it before start")
    return warnings
