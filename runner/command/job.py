"""The sweep as a Hydra job: its run folder checked, held by this command alone, its config the one of the
folder's results (or no results yet), then the sweep run in it."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from omegaconf import DictConfig, OmegaConf

from runner.command.sweep import run_sweep
from runner.config.checks import ConfigError
from runner.config.sections import RunConfig
from runner.config.store import typed


@contextmanager
def open_run_folder(cfg: DictConfig) -> Iterator[RunConfig]:
    """Before anything is written for the run: the config typed (names that become paths are plain names), the
    output root created and tested for writing, the run folder made and held by this command alone (a second
    command on it is refused, naming the holder). Yields the typed config."""
    from runner.sinks.run_folder import hold_run_folder, unwritable_reason

    config = typed(cfg)
    reason = unwritable_reason(Path(config.output_root).expanduser())
    if reason:
        raise ConfigError(f"output_root={config.output_root!r} cannot be written: {reason} "
                          f"(fix: output_root=<a folder you can write>, e.g. output_root=outputs)")
    run_dir = Path(str(OmegaConf.select(cfg, "hydra.run.dir"))).expanduser()
    reason = unwritable_reason(run_dir)
    if reason:
        raise ConfigError(f"the run folder {run_dir} cannot be written: {reason} "
                          f"(fix: output_root=<a folder you can write>, or run=<another name>)")
    with hold_run_folder(run_dir, say=lambda line: print(line, file=sys.stderr, flush=True)):
        refuse_changed_config(cfg, run_dir=run_dir)
        yield config


def refuse_changed_config(cfg: DictConfig, *, run_dir: Path) -> None:
    """RunFolderConfigChanged (a ConfigError naming the keys and the fix) where the folder's results were run with
    another config: compared as config.yaml holds it, resolved with the sweep's preset applied."""
    from runner.config.presets import apply_preset
    from runner.config.resume import check_same_config, saved_config

    new = apply_preset(cfg).copy()
    OmegaConf.set_struct(new, False)
    new.pop("hydra", None)
    grown = check_same_config(run_dir=run_dir, run=str(cfg.get("run")), old=saved_config(run_dir),
                              new=OmegaConf.to_container(new, resolve=True))
    if grown:
        print(f"note: this command extends the run in {run_dir}: " + "; ".join(c.describe() for c in grown),
              file=sys.stderr, flush=True)


def task(cfg: DictConfig, config: Optional[RunConfig] = None) -> None:
    """The job in its run folder. `config`: typed by open_run_folder, which holds the folder; without it (Hydra's
    own entry, `python -m runner --multirun ...`) the folder is held here."""
    from hydra.core.hydra_config import HydraConfig

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if config is not None:
        code = run_sweep(cfg, run_dir=run_dir, config=config)
    else:
        from runner.sinks.run_folder import RunFolderBusy, hold_run_folder

        try:
            with hold_run_folder(run_dir, say=lambda line: print(line, file=sys.stderr, flush=True)):
                refuse_changed_config(cfg, run_dir=run_dir)
                code = run_sweep(cfg, run_dir=run_dir)
        except (RunFolderBusy, ConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 2
    if code:
        sys.exit(code)
