"""One config per run folder: a command whose config differs from the one the folder's results were run with
(its config.yaml) is refused before any engine starts, naming each key that differs and the fix (`run=<new
name>`), so that two configs never mix silently in one report. A command may extend the run (more values of
an axis, more repeats: every finished trial stays in its plan); a note says so. Pure.

The configs compared are like for like: both resolved, the sweep's preset applied (what config.yaml holds).
"""
from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, Optional

from runner.config.checks import ConfigError
from runner.config.workload_keys import with_current_names, without_declared_defaults

# Keys that may change when a run resumes: where results go and how the command is watched, stopped, retried,
# exported and reported, and where Ray runs. None of them changes what a finished trial measured or what the
# next one will. (report.slo, the older name of `slo`, is compared: it sets the goodput the trials record.)
RESUMABLE = (
    "run", "output_root", "dry_run", "retry_failed", "tracking", "report", "cluster.address",
    "execution.deadline_s", "execution.trial_timeout_s", "execution.start_timeout_s",
    "execution.max_trial_retries", "execution.shutdown_timeout_s", "execution.keep_engines", "execution.pool",
    "execution.pool_ttl_s",
    # The study's question and description are the report's; a preset is compared by what it set.
    "sweep.question", "sweep.description", "sweep.preset", "sweep.presets",
)
COMPARED_INSIDE_RESUMABLE = ("report.slo",)

# Keys whose values a resume may extend, every finished trial staying in the new plan: an axis's values (a list
# that keeps the old values, in any order) and the repeats (more of them). Grid axes, engine axes, explicit arms
# and a workload's parameters (a single value is an axis of one).
EXTENSIBLE_AXES = ("sweep.grid", "sweep.engine_axes", "sweep.arms", "workload")
MORE_REPEATS = ("sweep.repeats",)

_UNKNOWN = object()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    key: str
    old: Any
    new: Any
    extends: bool = False  # the old values stay (more axis values, more repeats): the run grows, nothing mixes

    def describe(self) -> str:
        return f"{self.key}: {_text(self.old)} → {_text(self.new)}"


def _text(value) -> str:
    if value is _UNKNOWN:
        return "(not set)"
    return json.dumps(value, default=str, separators=(", ", ": "))


def _under(key: str, prefixes) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def resumable(key: str) -> bool:
    return _under(key, RESUMABLE) and not _under(key, COMPARED_INSIDE_RESUMABLE)


def flatten(node, prefix: str = "") -> dict[str, Any]:
    """Dotted key → value; lists stay whole (an axis is one value), an empty dict is a value."""
    if not isinstance(node, dict) or (prefix and not node):
        return {prefix: node}
    out = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _normalized(config: dict) -> dict[str, Any]:
    config = dict(config)
    config.pop("hydra", None)
    workloads = config.get("workload")
    if isinstance(workloads, dict):
        config["workload"] = {name: without_declared_defaults(name, with_current_names(name, dict(params or {})))
                              if isinstance(params, dict) else params for name, params in workloads.items()}
    return {k: v for k, v in flatten(config).items() if not resumable(k)}


def schema_default(key: str):
    """The value the schema (runner.config.sections) gives `key` when a config leaves it out (_UNKNOWN: none,
    e.g. a key inside an open mapping such as engine.args or workload)."""
    from runner.config.sections import RunConfig

    cls: Any = RunConfig
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not dataclasses.is_dataclass(cls):
            return _UNKNOWN
        found = {f.name: f for f in dataclasses.fields(cls)}.get(part)
        if found is None:
            return _UNKNOWN
        if i == len(parts) - 1:
            if found.default is not dataclasses.MISSING:
                return found.default
            if found.default_factory is not dataclasses.MISSING:
                return found.default_factory()
            return _UNKNOWN
        hint = typing.get_type_hints(cls)[part]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        cls = args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint
    return _UNKNOWN


def _one_sided_same(value, key: str) -> bool:
    """A key only one config has (a field added to the schema since, or a null left out) is no change where its
    value is what the other config meant by leaving it out."""
    if value is None:
        return True
    default = schema_default(key)
    if dataclasses.is_dataclass(default):
        return False
    return default is not _UNKNOWN and default == value


def _as_values(value) -> list[str]:
    return [json.dumps(v, sort_keys=True) for v in (value if isinstance(value, list) else [value])]


def extends(key: str, old, new) -> bool:
    """`new` keeps every value of `old` (an axis) or raises the repeats: the finished trials stay in the plan."""
    if _under(key, MORE_REPEATS) or (key.startswith("workload.") and key.endswith(".repeats")):
        return isinstance(old, int) and isinstance(new, int) and new >= old
    if not _under(key, EXTENSIBLE_AXES) or not isinstance(new, list):
        return False
    if key.startswith("workload.") and key.count(".") != 2:
        return False
    return set(_as_values(old)) <= set(_as_values(new))


def config_changes(old: dict, new: dict) -> list[Change]:
    """The keys (outside RESUMABLE) whose values differ between two resolved configs, old → new."""
    a, b = _normalized(old), _normalized(new)
    changes = []
    for key in sorted(set(a) | set(b)):
        if key in a and key in b:
            if a[key] != b[key] or isinstance(a[key], bool) != isinstance(b[key], bool):
                changes.append(Change(key=key, old=a[key], new=b[key], extends=extends(key, a[key], b[key])))
        elif key in a and not _one_sided_same(a[key], key):
            changes.append(Change(key=key, old=a[key], new=_UNKNOWN))
        elif key in b and not _one_sided_same(b[key], key):
            changes.append(Change(key=key, old=_UNKNOWN, new=b[key]))
    return changes


class RunFolderConfigChanged(ConfigError):
    """The run folder holds results of another config."""


def check_same_config(*, run_dir, run: str, old: Optional[dict], new: dict) -> list[Change]:
    """RunFolderConfigChanged where the folder's results were run with another config (old: its config.yaml;
    None: the folder has none, or no results). Returns the changes that only extend the run (more axis values,
    more repeats)."""
    if old is None:
        return []
    every = config_changes(old, new)
    changes = [c for c in every if not c.extends]
    if not changes:
        return every
    shown = [c.describe() for c in changes[:12]] + ([f"… and {len(changes) - 12} more"] if len(changes) > 12 else [])
    raise RunFolderConfigChanged(
        f"run folder {run_dir} holds results of another config; this command changes "
        f"{len(changes)} key(s), old → new:\n  " + "\n  ".join(shown) +
        f"\n(fix: run=<new name> for a separate run, e.g. run={run}-2; or the earlier values to resume this one; "
        f"a resume may add axis values and repeats, and change {', '.join(RESUMABLE)})")


class RunFolderConfigUnreadable(ConfigError):
    """The run folder's config.yaml cannot be read (not YAML, truncated, empty): nothing can be compared with it."""


# Sections every config.yaml the runner writes holds (a file without one was cut short or edited away).
SAVED_SECTIONS = ("model", "engine", "sweep", "execution", "run")


def unreadable_reason(path, *, required: tuple[str, ...] = SAVED_SECTIONS) -> Optional[str]:
    """Why a saved config.yaml cannot be read as one (None where it can); `required`: the sections it must hold
    (a resume needs them all; the report takes defaults for what a hand-written file leaves out)."""
    from pathlib import Path

    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        text = Path(path).read_text()
    except UnicodeDecodeError:
        return "it is not text"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if not text.strip():
        return "it is empty"
    try:
        loaded = yaml.safe_load(text)
        if isinstance(loaded, dict):
            loaded = OmegaConf.to_container(OmegaConf.create(loaded), resolve=False)
    except (yaml.YAMLError, ValueError, OmegaConfBaseException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"not valid YAML: {first}"
    if not isinstance(loaded, dict):
        return f"it holds a {type(loaded).__name__}, not the config's keys"
    missing = [key for key in required if key not in loaded]
    if missing:
        return f"it lacks {', '.join(missing)} (cut short, or edited)"
    return None


def load_saved_config(run_dir) -> dict:
    """The run folder's config.yaml as written (keys unresolved); RunFolderConfigUnreadable, naming the file and
    what to do, where it cannot be read."""
    from pathlib import Path

    from omegaconf import OmegaConf

    path = Path(run_dir) / "config.yaml"
    reason = unreadable_reason(path)
    if reason is None:
        try:
            return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        except Exception as exc:  # what OmegaConf refuses beyond YAML (keys it cannot hold, say)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            reason = f"not a config OmegaConf can load: {first}"
    raise RunFolderConfigUnreadable(unreadable_message(path, reason=reason))


def unreadable_message(path, *, reason: str, fix: Optional[str] = None) -> str:
    run = path.parent.name
    fix = fix or (f"run=<new name> for a new run, e.g. run={run}-2; or repair {path} (the config this folder's "
                  f"results were run with) to resume it")
    return f"the run folder's saved config {path} cannot be read: {reason} (fix: {fix})"


def unreadable_config(run_dir, *, fix: Optional[str] = None,
                      required: tuple[str, ...] = SAVED_SECTIONS) -> Optional[str]:
    """The refusal for a run folder whose config.yaml exists and cannot be read (None: readable, or none)."""
    from pathlib import Path

    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        return None
    reason = unreadable_reason(path, required=required)
    return unreadable_message(path, reason=reason, fix=fix) if reason else None


def saved_config(run_dir) -> Optional[dict]:
    """The config the folder's results were run with, as written (None: no config.yaml, or no results yet, so
    nothing a changed config could mix with)."""
    from pathlib import Path

    from runner.sinks.run_folder import CONFIG_NAME

    path = Path(run_dir) / CONFIG_NAME
    if not path.is_file() or not any(Path(run_dir).rglob("*.parquet")):
        return None
    return load_saved_config(run_dir)  # a damaged file: refused with its path and the fix
