"""Named presets inside a sweep file: `sweep.preset=cpu` merges `sweep.presets.cpu` into the config.

A preset holds config in the root's shape (`sweep: {grid: ...}`, `workload: {...}`,
`engine: {...}`); lists replace lists. It lets one study file carry both its full
size and a scaled-down size for the embedded model on CPU, chosen by one override.
A key the command line sets keeps the command line's value where the preset sets it too.
"""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from runner.config.checks import ConfigError as PlanError


def apply_preset(cfg: DictConfig) -> DictConfig:
    sweep = cfg.get("sweep") or {}
    name = sweep.get("preset")
    if not name:
        return cfg
    presets = sweep.get("presets") or {}
    if name not in presets:
        valid = ", ".join(sorted(presets)) or "none"
        raise PlanError(f"sweep {sweep.get('name')!r} has no preset {name!r}; valid: {valid} "
                        f"(fix: sweep.preset={sorted(presets)[0] if presets else 'null'})")
    overlay = OmegaConf.to_container(presets[name], resolve=False)
    unknown = sorted(set(overlay) - set(cfg))
    if unknown:
        raise PlanError(f"sweep.presets.{name} sets {unknown[0]!r}, which the config does not have "
                        f"(fix: put it under sweep, workload, engine or model)")
    selected = set(cfg.get("workload") or {})
    extra = sorted(set(overlay.get("workload") or {}) - selected)
    if extra:
        # A preset scales the chosen workloads; it must not add one the sweep did not pick.
        overlay["workload"] = {k: v for k, v in overlay["workload"].items() if k in selected}
    base = cfg.copy()
    OmegaConf.set_struct(base, False)  # a preset may set workload params the defaults leave out
    merged = OmegaConf.merge(base, overlay)
    for key in command_line_keys(cfg):
        if _sets(overlay, key.split(".")):
            OmegaConf.update(merged, key, OmegaConf.select(cfg, key), merge=False)
    return merged


def command_line_keys(cfg: DictConfig) -> list[str]:
    """The config keys the command line set (group choices and deletions aside), from Hydra's record of it."""
    task = OmegaConf.select(cfg, "hydra.overrides.task", default=None)
    if task is None:  # a job's own config (Hydra takes its node out): the running job's record
        task = _running_job_overrides()
    if not task:
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([str(o) for o in task])
    return [o.key_or_group for o in parsed if not o.is_delete() and "." in o.key_or_group]


def _running_job_overrides() -> list:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return list(HydraConfig.get().overrides.task or [])


def _sets(overlay, parts: list[str]) -> bool:
    """The preset sets this key (or replaces a value above it)."""
    node = overlay
    for part in parts:
        if not isinstance(node, dict):
            return True
        if part not in node:
            return False
        node = node[part]
    return True
