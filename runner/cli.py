"""`vllm-sweep` / `python -m runner`: the subcommands' dispatch (a sweep by default, `pool`, `report`, `--help`)."""
from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from runner.command.job import open_run_folder, task
from runner.config.checks import ConfigError
from runner.config.store import CONF_DIR, run_job


@hydra.main(version_base=None, config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    task(cfg)


def check_pool_arguments(args) -> int:
    """`vllm-sweep pool ...`: 2 (each problem printed with its fix) before any cluster is joined, else 0."""
    from runner.command.arguments import pool_problems
    from runner.report.arguments import refuse

    return refuse(pool_problems(action=args.action, names=list(getattr(args, "names", None) or []),
                                every=bool(getattr(args, "all", False)), address=args.address))


def console_main() -> None:
    """Composes the config once. Hydra's own flags (--help, --cfg, -m, …) go through hydra.main (which
    composes once too); a plain run composes here, so that bad overrides exit 2, each with its fix."""
    from runner.sinks.run_folder import RunFolderBusy

    argv = sys.argv[1:]
    if argv[:1] == ["pool"]:  # a command group of its own: no Hydra overrides
        from runner.command.pool import main as pool_main, parser as pool_parser

        args = pool_parser().parse_args(argv[1:])
        try:
            sys.exit(check_pool_arguments(args) or pool_main(argv[1:]))
        except ConnectionError as exc:  # it answered the check, then Ray would not have it
            where = f"--address {args.address}" if args.address else "the pools' Ray head"
            print(f"error: {where}: {exc} (fix: the head's HOST:PORT as `ray start --head` printed it, or leave "
                  f"--address out for the runner's own head)", file=sys.stderr)
            sys.exit(2)
    if argv[:1] == ["report"]:  # the same as vllm-sweep-report (which checks its arguments the same way)
        from runner.report.__main__ import main as report_main

        sys.exit(report_main(argv[1:]))
    from runner.command.help import help_text, wants_help

    if wants_help(argv):  # ours, not Hydra's config dump (--hydra-help is Hydra's)
        print(help_text())
        return
    if any(arg.startswith("-") for arg in argv):
        main()
        return
    try:
        run_job(argv, task, prepare=open_run_folder)
    except (ConfigError, RunFolderBusy) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
