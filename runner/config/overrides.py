"""Why a command line's overrides do not compose, each with the override that fixes it: a misspelt key (with the
likely intended one), an unknown group option (with the valid ones), a value of the wrong type for the schema
(runner.config.sections), an override that does not parse. Used only once composing has failed."""
from __future__ import annotations

import dataclasses
import os
import re
import typing
from typing import Optional

from runner.config.location import PKG

SCHEMA_NAME = "config_schema"


def register_schema() -> None:
    """The schema in Hydra's ConfigStore, under the name conf/config.yaml's defaults start with."""
    from hydra.core.config_store import ConfigStore

    from runner.config.sections import RunConfig

    ConfigStore.instance().store(name=SCHEMA_NAME, node=RunConfig)


def initialize_hydra(config_dir: str, *, job_name: Optional[str] = None):
    """Hydra's context for composing from `config_dir`: a `pkg://` search path (the installed configs,
    runner.config.store.CONF_DIR) or an absolute folder."""
    from hydra import initialize_config_dir, initialize_config_module

    named = {"job_name": job_name} if job_name else {}
    if config_dir.startswith(PKG):
        return initialize_config_module(config_module=config_dir[len(PKG):], version_base=None, **named)
    return initialize_config_dir(version_base=None, config_dir=config_dir, **named)


def check_overrides(overrides: list[str], *, config_dir: str, config_name: str = "config") -> list[str]:
    """Each override that cannot apply, with the override that fixes it (empty: all apply). `config_dir`: a
    folder or a `pkg://` search path."""
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
    from hydra import compose

    register_schema()
    with initialize_hydra(config_dir):
        return compose(config_name=config_name, overrides=overrides)


def _first_bad_override(overrides: list[str], *, config_dir: str,
                        config_name: str) -> Optional[tuple[Optional[str], str]]:
    for override in overrides:  # grammar first, one at a time, so the message names the override
        problem = _parse_problem(override)
        if problem:
            return override, problem
    try:
        _compose(overrides, config_dir=config_dir, config_name=config_name)
        return None
    except Exception as error:
        exc, text = error, str(error)
    typed = _type_problem(text, exc, overrides)
    if typed:
        return typed
    key = re.search(r"Could not override '([^']+)'", text)
    if key:
        override = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~") == key.group(1)), None)
        others = [o for o in overrides if o != override]
        return override, _unknown_key_message(key.group(1), override=override or key.group(1),
                                              base=_safe_compose(others, config_dir=config_dir,
                                                                 config_name=config_name))
    present = re.search(r"Could not append to config\. An item is already at '([^']+)'", text)
    if present:  # `+key=value` adds a key: one the config declares is set as it is
        override = next((o for o in overrides if o.startswith("+") and not o.startswith("++")
                         and o[1:].split("=", 1)[0] == present.group(1)), None)
        if override:
            return override, (f"{present.group(1)} is already in the config: `+` adds only a key that is not "
                              f"(fix: {override[1:]})")
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
    if parts[0] == "workload" and len(parts) == 3 and isinstance(base, DictConfig):
        message = _workload_key_message(parts[1], parts[2], override=override, selected=base.get("workload"))
        if message:
            return message
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


# Keys of a workload's block that are not its parameters: the grid's concurrency and repeats, replaced for it.
WORKLOAD_LEVEL_KEYS = ("api", "concurrency", "repeats")


def _workload_key_message(name: str, param: str, *, override: str, selected) -> Optional[str]:
    """`workload.<name>.<param>=...` that Hydra refused: a workload the sweep does not select, a parameter its
    YAML does not declare (`+` adds it), or a misspelt one; None where the workload is unknown."""
    import difflib

    from runner.measurement.workloads import WORKLOADS

    if name not in WORKLOADS:
        return None
    value = override.split("=", 1)[1] if "=" in override else "..."
    chosen = list(selected.keys()) if selected is not None else []
    if name not in chosen:
        return (f"workload {name!r} is not selected (workload: {', '.join(map(str, chosen)) or 'none'}) "
                f"(fix: workload=[{','.join(map(str, chosen + [name]))}] {override.lstrip('+')})")
    import dataclasses

    valid = sorted({f.name for f in dataclasses.fields(WORKLOADS[name].params_type)} | set(WORKLOAD_LEVEL_KEYS))
    if param in valid:
        return (f"workload.{name}.{param} is not in conf/workload/{name}.yaml, so `+` adds it "
                f"(fix: +workload.{name}.{param}={value})")
    close = difflib.get_close_matches(param, valid, n=1, cutoff=0.6)
    if close:
        plus = "" if close[0] in selected[name] else "+"
        return (f"workload {name!r} has no parameter {param!r}; did you mean {close[0]!r}? "
                f"(fix: {plus}workload.{name}.{close[0]}={value})")
    return (f"workload {name!r} has no parameter {param!r}; valid: {', '.join(valid)} "
            f"(fix: remove {override})")


def _group_options(config_dir: str, group: str) -> list[str]:
    if config_dir.startswith(PKG):
        from importlib import resources

        try:
            folder = resources.files(config_dir[len(PKG):]).joinpath(group)
        except (ImportError, TypeError, ValueError):
            return []
        names = [f.name for f in folder.iterdir()] if folder.is_dir() else []
    else:
        folder = os.path.join(config_dir, group)
        names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(f[:-5] for f in names if f.endswith(".yaml"))


def _chain(exc: BaseException):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _schema_field(path: str):
    """The dataclass field of the schema at a dotted path ('sweep.grid.concurrency'), or None."""
    from runner.config.sections import RunConfig

    cls, found = RunConfig, None
    for part in path.split("."):
        if not dataclasses.is_dataclass(cls):
            return None
        fields = {f.name: f for f in dataclasses.fields(cls)}
        found = fields.get(part)
        if found is None:
            return None
        hints = typing.get_type_hints(cls)
        cls = hints.get(part)
        for arg in typing.get_args(cls) or ():  # Optional[X], list[X]
            if dataclasses.is_dataclass(arg):
                cls = arg
    return found


def _type_problem(text: str, exc: Exception, overrides: list[str]) -> Optional[tuple[Optional[str], str]]:
    """A value the schema's type refuses: '<key>=<value> must be … (fix: …)'."""
    from omegaconf.errors import ConfigKeyError, ConfigTypeError, ValidationError

    merging = re.search(r"Error merging override (.+)", text)
    override = merging.group(1).strip() if merging else None
    for cause in _chain(exc):
        full_key = getattr(cause, "full_key", None)
        if isinstance(cause, ConfigKeyError) and "ArmSection" in str(cause):
            return _arm_key_problem(str(getattr(cause, "key", full_key)), overrides)
        if not full_key or not isinstance(cause, (ValidationError, ConfigTypeError)):
            continue
        path = re.sub(r"\[\d+\]", "", str(full_key))
        field = _schema_field(path)
        meta = field.metadata if field is not None else {}
        value = getattr(cause, "value", None)
        shown = repr(value) if value is not None else (override.split("=", 1)[1] if override and "=" in override
                                                      else "?")
        must = meta.get("must") or f"has the wrong type ({str(cause).splitlines()[0]})"
        fix = meta.get("fix") or f"{path}=<a value of its type>"
        return override, f"{path}={shown} {must} (fix: {fix})"
    return None


def _arm_key_problem(key: str, overrides: list[str]) -> tuple[Optional[str], str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from runner.config.sections import ENGINE_AXES

    override = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~") == "sweep.arms"), None)
    index = 0
    if override:
        try:
            arms = OverridesParser.create().parse_overrides([override])[0].value()
            index = next((i for i, arm in enumerate(arms) if isinstance(arm, dict) and key in arm), 0)
        except Exception:
            pass
    return override, (f"sweep.arms[{index}] names {key!r}, not an engine axis; valid: {', '.join(ENGINE_AXES)} "
                      f"(fix: remove it from sweep.arms[{index}], or put it under sweep.engine_axes)")
