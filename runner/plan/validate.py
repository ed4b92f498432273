"""Check the typed config against its environment before any engine starts: the model's files, the workloads'
parameters, vLLM's engine-argument rules (capacity is warned by runner.plan.capacity; each section's own values
are checked as it is built, in runner.config.sections). Each message names the override that fixes it."""
from __future__ import annotations

import os
import re
from typing import Iterable, Optional

from runner.config.checks import _is_int
from runner.config.sections import ENGINE_AXES, TRIAL_AXES, ModelSection, RunConfig, SweepSection
from runner.config.workload_keys import workload_override
from runner.plan import load_checks
from runner.plan.device_share import check_device_share
from runner.plan.grid import PlanError
from runner.plan.model_checks import check_model
from runner.models.source import driver_tokenizer
from runner.spec_arm import SPEC_METHODS, SpecArm
from runner.plan.spec_variants import check_spec_variants
from runner.plan.vllm_args import GRID_TO_VLLM, OWNED
from runner.vllm.spec_config import speculative_config

def grid_values(sweep: SweepSection) -> dict[str, list]:
    """Each grid axis's values plus those the explicit arms (sweep.arms) name, for the per-value checks."""
    values = {axis: sweep.grid.values(axis) for axis in (*ENGINE_AXES, *TRIAL_AXES)}
    for arm in sweep.arms or []:
        for name, value in arm.axes().items():
            values[name] += [value] if value not in values[name] else []
    return values


def engine_budgets(sweep: SweepSection) -> list:
    """The gpu_memory_utilization values the engines run with: an explicit arm's own where it names one (the grid's
    then never reaches an engine), else the grid's."""
    grid = _values({"budget": sweep.grid.values("gpu_memory_utilization")}, "budget")
    if not sweep.arms:
        return grid
    named = [arm.axes() for arm in sweep.arms]
    return list(dict.fromkeys(v for axes in named for v in (
        [axes["gpu_memory_utilization"]] if "gpu_memory_utilization" in axes else grid)))


def _values(grid: dict, axis: str) -> list:
    v = grid.get(axis)
    return list(v) if isinstance(v, (list, tuple)) else ([] if v is None else [v])


def check_max_len(*, grid: dict, model: ModelSection) -> list[str]:
    limit = model_max_len_limit(model)
    if not limit:
        return []
    return [f"max_model_len={n} is above the model's limit {limit} "
            f"(fix: sweep.grid.max_model_len=[{limit}] or smaller)"
            for n in _values(grid, "max_model_len") if isinstance(n, int) and n > limit]


def check_workloads(*, workloads: dict, grid: dict) -> list[str]:
    from runner.measurement.workloads import WORKLOADS
    from runner.plan.grid import expand_workload_points, parse_point

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
                          f"(fix: {workload_override(name, 'api', cls.apis[0])})")
        for key in ("api", "concurrency", "repeats"):
            raw.pop(key, None)
        try:
            points = expand_workload_points(name=name, params=raw)
        except PlanError as exc:
            errors.append(str(exc))
            continue
        for point in points:
            try:
                params = parse_point(name, point)
            except PlanError as exc:
                errors.append(str(exc))
                break
            problems = params.validate()
            errors.extend(f"workload {name!r}: {e} (fix: {_workload_fix(name, e)})" for e in problems)
            if problems:
                continue  # a refused point's sizes say nothing more (and may not be computable)
            if _sequence_tokens(params) is None:
                errors.append(_empty_workload(name, point))
                continue
            for n in max_lens:
                need = params.sequence_tokens_at(n)
                if need > n:
                    errors.append(f"workload {name!r}: {params.over_length_error(n)}" if params.over_length_error(n)
                                  else f"workload {name!r} needs {need} tokens per sequence ({point}) but "
                                  f"max_model_len={n} (fix: shrink workload.{name} sizes or raise "
                                  f"sweep.grid.max_model_len)")
    return errors


def _sequence_tokens(params) -> Optional[int]:
    """The point's longest sequence; None where it yields no request (a filter or cap left nothing)."""
    try:
        need = params.max_sequence_tokens()
    except ValueError:  # max() over no request
        return None
    return need if need and need > 0 else None


def _empty_workload(name: str, point: dict) -> str:
    """A point that yields no request, naming the key whose value emptied it (the one whose default gives
    requests back)."""
    from runner.plan.grid import parse_point

    for key in [k for k in point if point[k] is not None]:
        try:
            params = parse_point(name, {k: v for k, v in point.items() if k != key})
        except PlanError:
            continue
        if not params.validate() and _sequence_tokens(params) is not None:
            return (f"workload {name!r} yields no request: {key}={point[key]!r} leaves none ({point}) "
                    f"(fix: {workload_override(name, key, '<a value that keeps requests>')}, or remove it)")
    return f"workload {name!r} yields no request ({point}) (fix: loosen the workload.{name} keys that filter it)"


def _workload_fix(name: str, error: str) -> str:
    key = error.split("=")[0]
    named = re.search(r"\(it looks like [^:]+: (\w+)=(\w+)\)", error)
    if named and named.group(1) != "workload":  # a file of another format: the key that reads it
        return workload_override(name, named.group(1), named.group(2))
    if key == "prompt_file" and ": line " in error:
        return f"repair that line, or {workload_override(name, 'prompt_file', '<another JSONL file>')}"
    return workload_override(name, key, "<a valid value>")


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
            if name not in OWNED:  # the builder's keys (runner.plan.vllm_args): passed through, a row would lie
                continue
            values = _values(args, name) if as_list else [args[name]]
            fix = OWNED[name].format(values=_yaml_text(values), value=_yaml_text(values[0] if values else 1))
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


def check_spec_rules(*, spec_extra: dict, spec) -> list[str]:
    """Each spec.<method> key and value by the installed vLLM's speculative_config rules (its SpeculativeConfig's
    fields, which forbid any other key), and vLLM's n-gram rule prompt_lookup_min ≤ prompt_lookup_max."""
    import difflib

    from runner.plan.engine_args import describe_valid, example_value, value_problem

    rules = getattr(spec, "speculative", None)
    if not rules:
        return []
    errors = []
    for method, extra in (spec_extra or {}).items():
        broken = False
        for key, value in (extra or {}).items():
            if key in ("method", "num_speculative_tokens"):
                continue  # the arm's own (check_spec_extra says so)
            rule = rules.get(key)
            if rule is None:
                broken = True
                close = difflib.get_close_matches(key, sorted(rules), n=1, cutoff=0.75)
                valid = sorted(set(rules) - {"method", "num_speculative_tokens"})
                hint = (f"did you mean {close[0]!r}? (fix: ++spec.{method}.{close[0]}={_yaml_text(value)})" if close
                        else f"valid: {', '.join(valid)} (fix: remove spec.{method}.{key})")
                errors.append(f"spec.{method}.{key} is not a key of vLLM {spec.vllm_version}'s speculative_config; "
                              f"{hint}")
                continue
            problem = value_problem(rule, value)
            if problem:
                broken = True
                errors.append(f"spec.{method}.{key}={_yaml_text(value)} {problem} for vLLM {spec.vllm_version}'s "
                              f"speculative_config; valid: {describe_valid(rule)} "
                              f"(fix: ++spec.{method}.{key}={example_value(rule)})")
        if broken or method not in ("ngram", "ngram_gpu") or method not in SPEC_METHODS:
            continue
        merged = speculative_config(SpecArm(method=method, k=1), extra=extra)
        low, high = merged.get("prompt_lookup_min"), merged.get("prompt_lookup_max")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            errors.append(f"spec.{method}: prompt_lookup_min={low} must be ≤ prompt_lookup_max={high} (vLLM's rule) "
                          f"(fix: ++spec.{method}.prompt_lookup_min={high}, or ++spec.{method}.prompt_lookup_max={low})")
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
        if rule is None or name in OWNED and where != "sweep.grid":
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


def validate(config: RunConfig, *, known_engine_args=None) -> None:
    """`known_engine_args`: vLLM's rules (EngineArgSpec from engine_arg_spec()), a set of names, or None."""
    engine_args, engine_axes, workloads = config.engine.args, config.sweep.engine_axes, config.workload
    grid = grid_values(config.sweep)
    errors = check_model(config.model, spec=known_engine_args, engine_args=engine_args)
    errors += check_max_len(grid=grid, model=config.model)
    errors += check_runner_owned(engine_args=engine_args, engine_axes=engine_axes)
    errors += check_spec_extra(spec_extra=config.spec, methods=config.spec_methods)
    errors += check_spec_rules(spec_extra=config.spec, spec=known_engine_args)
    errors += check_spec_variants(config)
    errors += check_engine_arg_rules(spec=known_engine_args, engine_args=engine_args, engine_axes=engine_axes,
                                     grid=grid)
    errors += check_workloads(workloads=workloads, grid=grid) if workloads else [
        "the sweep names no workload (fix: workload=[decode])"]
    errors += check_engine_args(args=engine_args, known=known_engine_args, where="engine.args")
    errors += check_engine_args(args=engine_axes, known=known_engine_args, where="sweep.engine_axes")
    for name, values in engine_axes.items():
        if isinstance(values, (list, tuple)) and not values:
            errors.append(f"engine axis {name!r} has no values (fix: sweep.engine_axes.{name}=[...])")
    errors += check_engine_arg_values(engine_args=engine_args, engine_axes=engine_axes)
    errors += check_workload_levels(workloads=workloads)
    errors += load_checks.check_load_shape(workloads=workloads)
    errors += load_checks.check_prompt_lengths(workloads=workloads, max_lens=[
        n for n in grid["max_model_len"] if _is_int(n)], tokenizer=lambda: driver_tokenizer(config.model))
    errors += check_device_share(engines_per_gpu=config.cluster.engines_per_gpu, device=config.engine.device,
                                 budgets=engine_budgets(config.sweep), tensor_parallel=config.engine.tensor_parallel_size,
                                 keep_engines=config.execution.keep_engines, adaptive=bool(config.sweep.adaptive))
    if errors:
        raise PlanError("invalid sweep:\n  - " + "\n  - ".join(errors))


# ---- the rest of the config: engine, cluster, execution -----------------------------------------
def model_max_len_limit(model: ModelSection) -> Optional[int]:
    """The model's longest sequence: model.max_model_len_limit, or its config.json where the folder is here."""
    import json

    limits = [model.max_model_len_limit] if _is_int(model.max_model_len_limit) else []
    path = model.path
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
                errors.append(f"workload {name!r}: concurrency has no values "
                              f"(fix: {workload_override(name, 'concurrency', '[1,4]')})")
            for c in levels:
                if not _is_int(c) or c < 1:
                    errors.append(f"workload {name!r}: concurrency={c!r} must be an integer ≥ 1 "
                                  f"(fix: {workload_override(name, 'concurrency', '[1,4]')})")
        if "repeats" in raw and (not _is_int(raw["repeats"]) or raw["repeats"] < 1):
            errors.append(f"workload {name!r}: repeats={raw['repeats']!r} must be an integer ≥ 1 "
                          f"(fix: {workload_override(name, 'repeats', '1')})")
    return errors
