"""`python -m runner`: config → validated plan → engines on actors → Parquet (+ W&B) → report."""
from __future__ import annotations

import dataclasses
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

import hydra
from omegaconf import DictConfig, OmegaConf

from runner.config.checks import ConfigError
from runner.config.sections import RunConfig, SweepSection
from runner.config.store import CONF_DIR, run_job, typed
from runner.measurement.records import RunKeys
from runner.plan.deferred_check import DeferredEngineArgCheck
from runner.plan.engine_args import begin_spec, spec_uncached
from runner.plan.grid import Plan, PlanError, build_plan
from runner.plan.question import question_problems
from runner.plan.stages import Stage, adaptive_study, run_stages
from runner.plan.capacity import capacity_warnings
from runner.plan.validate import engine_arg_spec, validate
from runner.schema import TrialStatus
from runner.scheduling.settings import ExecutionSettings
from runner.scheduling.startup_steps import StartupSteps
from runner.scheduling.startup import (ModelFolder, ModelInfoFill, begin_model_info, dry_run_capacity,
                                      prepare_builtin_model, start_ray)


def make_plan(config: RunConfig, *, check_engine_args: bool = True, warn=None) -> Plan:
    """The validated plan of the typed config; capacity warnings (trials the engine cannot hold at once) go to
    `warn` (default: stderr) before anything starts."""
    validate(config, known_engine_args=engine_arg_spec() if check_engine_args else None)
    plan = build_plan(config)
    unasked = question_problems(config.sweep.question, [dataclasses.asdict(e.settings) for e in plan.engines])
    for line in capacity_warnings(plan, model=config.model, engine=config.engine) + race_warnings(config.sweep) \
            + unasked:
        (warn or (lambda text: print(text, file=sys.stderr)))(line)
    return plan


def race_warnings(sweep: SweepSection) -> list[str]:
    """A race that cannot stop anything: an arm is stopped only after MIN_ROUNDS rounds."""
    from runner.measurement.race import MIN_ROUNDS

    if not sweep.race or sweep.repeats > MIN_ROUNDS:
        return []
    return [f"warning: sweep.race=true saves nothing with sweep.repeats={sweep.repeats}: an arm is stopped only "
            f"after {MIN_ROUNDS} rounds, as a verdict needs {MIN_ROUNDS} repeats (fix: sweep.repeats="
            f"{MIN_ROUNDS + 2})"]


def run_sweep(cfg: DictConfig, *, run_dir: Path, config: Optional[RunConfig] = None) -> int:
    """`config`: the typed `cfg` where the caller already built it."""
    wall_start = time.perf_counter()
    steps = StartupSteps(origin=process_started_at())
    steps.mark("Python, imports and config")
    try:
        config = config or typed(cfg)  # the one conversion: everything below takes typed objects
        if not config.dry_run:
            from runner.scheduling.startup import begin_compile

            begin_compile()  # beside validation, Ray's start and the first actor's imports
        study = adaptive_study(config.sweep.adaptive)
        later = not config.dry_run and spec_uncached()  # vLLM's rules need its import: read beside Ray's start
        plannable = study.plannable(config) if study else config
        plan = make_plan(plannable, check_engine_args=not later)
        engine_arg_check = DeferredEngineArgCheck(config=plannable, pending=begin_spec()) if later else None
        steps.mark("validation and plan")
        report = config.report
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from runner.sinks.result_sink import ParquetSink

    sink = ParquetSink(run_dir)
    done = sink.finished_trial_ids(include_failed=not config.retry_failed)
    stages = run_stages(config=config, plan=plan, trial_rows=lambda: sink.rows["trials"])
    if config.dry_run:
        from runner.scheduling.describe import describe_devices, describe_plan

        first = next(stages)
        if study:
            print(f"adaptive study {config.sweep.adaptive}: stage {first.name!r} below ({first.why}); later stages "
                  f"are planned from its results")
        device = config.engine.device
        capacity = dry_run_capacity(config.cluster, device=device)
        print(describe_plan(first.plan, done=done, parallel=capacity.max_parallel_engines if capacity else 0))
        print("\n".join(describe_devices(first.plan, device=device, capacity=capacity, done=done,
                                            seed=config.execution.order_seed)))
        return 0
    from runner.config.presets import apply_preset

    OmegaConf.save(apply_preset(cfg), run_dir / "config.yaml", resolve=True)
    if study:
        print(f"sweep {plan.sweep!r}: adaptive study {config.sweep.adaptive} (each stage planned from the results "
              f"of the ones before); results in {run_dir}")
    else:
        todo = sum(t.trial_id not in done for t in plan.trials)
        resumed = f" ({len(plan.trials) - todo} already done, {todo} to run)" if done else ""
        print(f"sweep {plan.sweep!r}: {len(plan.engines)} engine configs, {len(plan.trials)} trials{resumed}; "
              f"results in {run_dir}")
    trackers: list = []
    planned: set[str] = set()
    code = _execute(stages=stages, base_plan=plan, config=config, sink=sink, run_dir=run_dir, planned=planned,
                    export_later=trackers, announce=bool(study), steps=steps, before_engines=engine_arg_check)
    if code:
        return code
    from runner.summary import print_summary

    print_summary(run_dir=run_dir, trial_ids=planned)
    if report.enabled:
        _write_report(run_dir)
    for tracker in trackers:  # after the report, so that the W&B sweep run carries its Answer table
        tracker.finish()
    print(f"results: {run_dir}")
    if config.execution.keep_engines:
        print(_pool_note(config))
    print(f"total time: {time.perf_counter() - wall_start:.1f} s")
    return 0


def _pool_note(config: RunConfig) -> str:
    pool = config.execution.pool
    return (f"engines kept in pool {pool!r} for {config.execution.pool_ttl_s:g} s idle (vllm-sweep pool list; "
            f"vllm-sweep pool release {pool} frees them)")


def _write_report(run_dir: Path) -> None:
    try:
        from runner.report.build import write_report
    except ImportError:
        return
    try:
        write_report(run_dirs=[run_dir], out_dir=run_dir, echo=True)
    except Exception as exc:  # the results are already on disk; a report bug must not fail the sweep
        print(f"warning: report failed ({type(exc).__name__}: {exc}); retry: python -m runner.report {run_dir}",
              file=sys.stderr)


def _to_run(stage: Stage, *, config: RunConfig, sink) -> tuple[set[str], list]:
    """(trial ids to skip, trials to run) of a stage, as the run folder stands now."""
    skip = sink.finished_trial_ids(include_failed=not config.retry_failed) | _skipped_ids(sink)
    return skip, [t for t in stage.plan.trials if t.trial_id not in skip]


def _execute(*, stages: Iterator[Stage], base_plan: Plan, config: RunConfig, sink, run_dir: Path, planned: set,
             export_later: list, announce: bool, steps: StartupSteps,
             before_engines: Optional[Callable[[], None]] = None) -> int:
    """Runs each stage's remaining trials (Ray starts with the first stage that has any; `planned` collects every
    stage's trial ids). A tracker of a sweep that completed goes into `export_later` (the caller exports after the
    report); one that was interrupted exports here, before the process ends."""
    from runner.scheduling.stops import DeadlineReached, Interrupted

    # Signals arrive as KeyboardInterrupt from here on. (Ray in a side thread lost its GCS connection.)
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    session: Optional[_Session] = None
    completed = False
    try:
        for stage in stages:
            planned |= {t.trial_id for t in stage.plan.trials}
            skip, todo = _to_run(stage, config=config, sink=sink)
            if announce:
                print(f"stage {stage.name!r}: {len(stage.plan.trials)} trials, {len(todo)} to run ({stage.why})",
                      flush=True)
            if not todo:
                continue
            if session is None:
                session = _Session.open(config=config, run_dir=run_dir, plan=base_plan, previous=previous,
                                        steps=steps)
            session.run(stage.plan, config=config, sink=sink, run_dir=run_dir, skip=skip, todo=len(todo),
                        before_engines=before_engines)
        if session is None:
            print(f"nothing to do: all {len(planned)} trials of this sweep are already in {run_dir} "
                  f"(run=<new name> starts a fresh run)")
        completed = True
    except (Interrupted, KeyboardInterrupt):
        _ignore_signals()
        print(f"\ninterrupted: finished trials are in {run_dir}; the trial in flight reruns; "
              f"run the same command again to resume"
              + (f"; {_pool_note(config)}" if config.execution.keep_engines else ""), file=sys.stderr)
        return 130
    except ConfigError as exc:  # a later stage of an adaptive study that cannot be planned
        _ignore_signals()
        print(f"error: {exc}; finished trials are in {run_dir}", file=sys.stderr)
        return 2
    except DeadlineReached as exc:
        _ignore_signals()
        print(f"\nstopped at execution.deadline_s: {exc.reason}; {exc.left} trial(s) left; finished trials are in "
              f"{run_dir}; run the same command again (with a later execution.deadline_s) to resume", file=sys.stderr)
        return 3
    finally:
        _ignore_signals()
        if session is not None:
            session.close(sink=sink, completed=completed, export_later=export_later)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


@dataclasses.dataclass(kw_only=True)
class _Session:
    """What the stages of one command share: Ray, the tracker, the progress bar and the executor's settings."""

    settings: ExecutionSettings
    keys: RunKeys
    tracker: object
    progress: object
    launched: bool = False  # the command's launch span is on the timeline (once, before its first stage)
    model_info: ModelInfoFill = dataclasses.field(default_factory=ModelInfoFill)

    @classmethod
    def open(cls, *, config: RunConfig, run_dir: Path, plan: Plan, previous: dict,
             steps: StartupSteps) -> "_Session":
        from tqdm import tqdm

        from runner.sinks.tracking import open_tracker

        device = config.engine.device
        steps.mark("run folder")
        model = ModelFolder(lambda: _model_folder(config, plan))  # needs no Ray: built beside its start
        capacity = start_ray(config.cluster, device=device,
                             pool=config.execution.pool if config.execution.keep_engines else None)
        steps.mark("Ray (the model folder beside it)")
        model_info = model.ready()  # before any actor resolves the model: one builder of its folder
        steps.mark("model folder beyond that")
        for sig in previous:  # again: ray.init installs its own SIGTERM handler (which aborted the process)
            signal.signal(sig, _raise_interrupt)
        settings = ExecutionSettings.of(config, capacity=capacity)
        keys = RunKeys(sweep=plan.sweep, run_id=config.run)
        tracker = open_tracker(tracking=config.tracking, run_dir=run_dir)
        steps.mark("tracker")
        print(steps.line(), flush=True)
        progress = tqdm(total=0, desc="trials", unit="trial", dynamic_ncols=True)
        return cls(settings=settings, keys=keys, tracker=tracker, progress=progress, model_info=model_info)

    def run(self, plan: Plan, *, config: RunConfig, sink, run_dir: Path, skip: set[str], todo: int,
            before_engines: Optional[Callable[[], None]] = None) -> None:
        from runner.scheduling.describe import describe_rounds
        from runner.scheduling.loop import Scheduler

        self.progress.total += todo
        self.progress.refresh()
        print("\n".join(describe_rounds(plan, device=self.settings.device, resident=self.settings.resident)),
              flush=True)
        scheduler = Scheduler(plan=plan, model_cfg=config.model, keys=self.keys, sink=sink, settings=self.settings,
                              log_dir=run_dir / "logs", on_trial=self.tracker.log_trial,
                              on_engine=self.tracker.log_engine, progress=self.progress,
                              launched_at=None if self.launched else process_started_at(),
                              before_engines=self._before_engines(before_engines))
        self.launched = True
        scheduler.run(skip_trial_ids=skip)

    def _before_engines(self, then: Optional[Callable[[], None]]) -> Callable[[], None]:
        def before_engines() -> None:
            self.model_info.wait()
            if then is not None:
                then()
        return before_engines

    def close(self, *, sink, completed: bool, export_later: list) -> None:
        self.progress.close()
        _compact(sink)  # before the W&B export, which ships the tables' files
        if completed:
            export_later.append(self.tracker)
        else:
            self.tracker.finish()
        _shutdown_ray()


def _model_folder(config: RunConfig, plan: Plan) -> ModelInfoFill:
    """The embedded model's folder (built on a local cluster) and vLLM's model-info fill for it (on CUDA)."""
    if config.cluster.address:
        return ModelInfoFill()
    prepare_builtin_model(config.model)
    if config.engine.device != "cuda":
        return ModelInfoFill()
    return begin_model_info(config.model, mtp=any(e.settings.spec_method == "mtp" for e in plan.engines))


def _compact(sink) -> None:
    """Each table's parts folded into one file; the parts stay readable as they are if this fails."""
    compact = getattr(sink, "compact", None)
    if compact is None:
        return
    try:
        compact()
    except (Exception, KeyboardInterrupt) as exc:  # the results are on disk as parts: never fail the sweep
        print(f"warning: compacting the results failed ({type(exc).__name__}: {exc}); they stay readable as "
              f"parts in {getattr(sink, 'run_dir', '')}", file=sys.stderr)


def process_started_at() -> float:
    """When this command started (epoch seconds): the timeline's `launch` span starts there."""
    from runner import STARTED_AT

    return STARTED_AT


def _skipped_ids(sink) -> set[str]:
    """Race-eliminated trials are done: a resume does not run them (nor does retry_failed)."""
    rows = getattr(sink, "rows", {}).get("trials", [])
    return {r["trial_id"] for r in rows if r.get("status") == TrialStatus.SKIPPED}


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt()


def _ignore_signals() -> None:
    """A second Ctrl-C must not cut the cleanup short (engines still to kill)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass


def _shutdown_ray() -> None:
    import ray

    if not ray.is_initialized():
        return
    import threading

    # Bounded: a wedged raylet must not hold the exit past the stop-in-seconds promise.
    worker = threading.Thread(target=ray.shutdown, daemon=True)
    worker.start()
    worker.join(timeout=8)


@hydra.main(version_base=None, config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    task(cfg)


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
        yield config


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
                code = run_sweep(cfg, run_dir=run_dir)
        except RunFolderBusy as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 2
    if code:
        sys.exit(code)


def console_main() -> None:
    """Composes the config once. Hydra's own flags (--help, --cfg, -m, …) go through hydra.main (which
    composes once too); a plain run composes here, so that bad overrides exit 2, each with its fix."""
    from runner.sinks.run_folder import RunFolderBusy

    argv = sys.argv[1:]
    if argv[:1] == ["pool"]:  # a command group of its own: no Hydra overrides
        from runner.scheduling.pool_command import main as pool_main

        sys.exit(pool_main(argv[1:]))
    if any(arg.startswith("-") for arg in argv):
        main()
        return
    try:
        run_job(argv, task, prepare=open_run_folder)
    except (ConfigError, RunFolderBusy) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
