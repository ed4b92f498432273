"""The schema (runner.config.sections) registered in Hydra's ConfigStore, and the config composed once.

conf/config.yaml names the schema first in its defaults (`config_schema`), so every group's YAML merges into
typed nodes: a misspelt key or a value of the wrong type fails at composition. `load_config` composes once
and builds the typed RunConfig once (OmegaConf.to_object); on failure runner.config.overrides explains each
bad override with its fix.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, ContextManager, Optional

from omegaconf import DictConfig, OmegaConf

from runner.config.location import CONF_DIR
from runner.config.overrides import SCHEMA_NAME, check_overrides, initialize_hydra, register_schema
from runner.config.checks import ConfigError
from runner.config.sections import RunConfig

CONFIG_NAME = "config"

register_schema()


def _unknown_keys(node, cls, path: str) -> list[str]:
    """Keys `+key=value` added to a typed section (Hydra lets `+` add them): refused here, with the fix."""
    if not dataclasses.is_dataclass(cls) or not isinstance(node, DictConfig):
        return []
    import typing

    fields = {f.name for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    errors = []
    for key in node.keys():
        where = f"{path}.{key}" if path else str(key)
        if key == "hydra" and not path:
            continue
        if key not in fields:
            if path == "sweep.grid":
                errors.append(f"unknown grid axis {key!r}; valid: {', '.join(sorted(fields))} (fix: remove "
                              f"{where}, or put engine arguments under sweep.engine_axes.{key})")
            else:
                errors.append(f"unknown config key {where!r}; valid under {path or 'the root'}: "
                              f"{', '.join(sorted(fields))} (fix: remove {where})")
            continue
        errors += _unknown_keys(node._get_node(key), hints.get(key), where)
    return errors


def typed(cfg: DictConfig) -> RunConfig:
    """The composed config as typed objects, built once (each section checks its values as it is built)."""
    from runner.config.presets import apply_preset

    cfg = apply_preset(cfg)
    errors = _unknown_keys(cfg, RunConfig, "")
    if errors:
        raise ConfigError("invalid sweep:\n  - " + "\n  - ".join(errors))
    plain = cfg.copy()
    with_hydra = "hydra" in plain
    if with_hydra:
        OmegaConf.set_struct(plain, False)
        plain.pop("hydra")
    try:
        config = OmegaConf.to_object(plain)
    except ConfigError:
        raise
    except Exception as exc:  # a preset's value of the wrong type
        raise ConfigError(f"the config does not fit its schema: {str(exc).strip().splitlines()[0]}") from exc
    if not isinstance(config, RunConfig):
        raise ConfigError(f"the config's root is not the runner's schema (fix: conf/config.yaml's defaults start "
                          f"with {SCHEMA_NAME})")
    return config


def invalid_overrides(overrides: list[str]) -> ConfigError:
    errors = check_overrides(list(overrides), config_dir=CONF_DIR, config_name=CONFIG_NAME)
    return ConfigError("invalid overrides:\n  - " + "\n  - ".join(errors or ["the config does not compose"]))


def compose(overrides: list[str]) -> DictConfig:
    """The composed config (once), or ConfigError naming each bad override and its fix."""
    from hydra import compose as hydra_compose

    try:
        with initialize_hydra(CONF_DIR):
            # With Hydra's own node: it records the command line, which a preset must not override.
            return hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides), return_hydra_config=True)
    except Exception as exc:
        raise invalid_overrides(overrides) from exc


def load_config(overrides: list[str]) -> RunConfig:
    """Overrides in, the typed config out: composed once, typed once."""
    return typed(compose(overrides))


def run_job(overrides: list[str], task: Callable[..., None], *, job_name: str = "cli",
            prepare: Optional[Callable[[DictConfig], ContextManager[Any]]] = None) -> None:
    """What `hydra.main` does for a single run (output folder, .hydra/, logging, HydraConfig), composing once:
    a composition that fails raises ConfigError with each bad override's fix instead of Hydra's first message.
    `prepare(cfg)`: entered before Hydra makes the job's folder and held while the job runs; the task gets what
    it yields, `task(cfg, prepared)` (without it: `task(cfg)`)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    failed = None
    with initialize_hydra(CONF_DIR, job_name=job_name):
        hydra = GlobalHydra.instance().hydra
        try:
            cfg = hydra.compose_config(config_name=CONFIG_NAME, overrides=list(overrides), run_mode=RunMode.RUN,
                                       with_log_configuration=True)
        except Exception as exc:
            failed = exc
        if failed is None and prepare is None:
            _run(hydra, cfg, task)
        elif failed is None:
            if cfg.hydra.mode is None:
                cfg.hydra.mode = RunMode.RUN
            HydraConfig.instance().set_config(cfg)  # as Hydra's job does, so that hydra.* interpolations resolve
            with prepare(cfg) as prepared:
                _run(hydra, cfg, lambda job_cfg: task(job_cfg, prepared))
    if failed is not None:  # explained outside Hydra's context (the explanation composes again, on failure only)
        raise invalid_overrides(overrides) from failed


def _run(hydra, cfg: DictConfig, task) -> None:
    """Hydra.run's steps after its compose: callbacks, the job (output folder, .hydra/, logging), its result."""
    from hydra._internal.callbacks import Callbacks
    from hydra.core.utils import run_job as hydra_run_job
    from hydra.types import HydraContext, RunMode

    if cfg.hydra.mode is None:
        cfg.hydra.mode = RunMode.RUN
    callbacks = Callbacks(cfg)
    callbacks.on_run_start(config=cfg, config_name=CONFIG_NAME)
    ret = hydra_run_job(hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=callbacks),
                        task_function=task, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None,
                        configure_logging=True)
    callbacks.on_run_end(config=cfg, config_name=CONFIG_NAME, job_return=ret)
    _ = ret.return_value  # the task's own exception, raised here
