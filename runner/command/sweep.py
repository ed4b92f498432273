"""One sweep command: config → validated plan → its stages' trials on engines → Parquet (+ W&B) → report."""
from __future__ import annotations

import dataclasses
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from omegaconf import DictConfig, OmegaConf

from runner.command.session import (Session, ignore_signals, process_started_at, raise_interrupt,
                                    skipped_ids)
from runner.config.checks import ConfigError
from runner.config.sections import RunConfig, SweepSection
from runner.config.store import typed
from runner.plan.deferred_check import DeferredEngineArgCheck
from runner.plan.engine_args import begin_spec, spec_uncached
from runner.models.source import driver_tokenizer
from runner.plan import load_checks
from runner.plan.grid import Plan, build_plan
from runner.plan.question import question_problems
from runner.plan.stages import Stage, adaptive_study, run_stages
from runner.plan.capacity import capacity_warnings
from runner.plan.spec_variants import profile_warnings
from runner.plan.validate import engine_arg_spec, validate
from runner.scheduling.shipping import by_reference
from runner.scheduling.startup_steps import StartupSteps
from runner.scheduling.startup import dry_run_capacity


def make_plan(config: RunConfig, *, check_engine_args: bool = True, warn=None) -> Plan:
    """The validated plan of the typed config; capacity warnings (trials the engine cannot hold at once) go to
    `warn` (default: stderr) before anything starts."""
    validate(config, known_engine_args=engine_arg_spec() if check_engine_args else None)
    plan = load_checks.ship_prompts(build_plan(config), tokenizer=lambda: driver_tokenizer(config.model))
    unasked = question_problems(config.sweep.question, [dataclasses.asdict(e.settings) for e in plan.engines])
    for line in capacity_warnings(plan, model=config.model, engine=config.engine) + race_warnings(config.sweep) \
            + unasked + profile_warnings(config):
        (warn or (lambda text: print(text, file=sys.stderr)))(line)
    return plan


def race_warnings(sweep: SweepSection) -> list[str]:
    """A race that cannot stop anything: an arm is stopped only after MIN_ROUNDS rounds."""
    from runner.numerics.race import MIN_ROUNDS

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
        from runner.plan.draft_hosts import describe as describe_drafts
        from runner.plan.draft_hosts import live_drafts
        from runner.scheduling.describe import describe_converge, describe_devices, describe_loads, describe_plan

        first = next(stages)
        if study:
            print(f"adaptive study {config.sweep.adaptive}: stage {first.name!r} below ({first.why}); later stages "
                  f"are planned from its results")
        device = config.engine.device
        capacity = dry_run_capacity(config.cluster, device=device)
        print(describe_plan(first.plan, done=done, parallel=capacity.max_parallel_engines if capacity else 0))
        print(describe_loads(first.plan, resident=config.execution.resident, adaptive=bool(study)))
        print(describe_drafts(first.plan, live=live_drafts(config)))
        for line in study.notes(config) if study else []:
            print(line)
        print("\n".join(describe_devices(first.plan, device=device, capacity=capacity, done=done,
                                            seed=config.execution.order_seed)))
        for line in describe_converge(first.plan, converge=config.sweep.converge):
            print(line)
        return 0
    from runner.config.presets import apply_preset

    OmegaConf.save(apply_preset(cfg), run_dir / "config.yaml", resolve=True)
    if study:
        print(f"sweep {plan.sweep!r}: adaptive study {config.sweep.adaptive} (each stage planned from the results "
              f"of the ones before); results in {run_dir}")
        for line in study.notes(config):
            print(line)
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
    _write_profiles(run_dir)
    if report.enabled:
        _write_report(run_dir)
    for tracker in trackers:  # after the report, so that the W&B sweep run carries its Answer table
        tracker.finish()
    print(f"results: {run_dir}")
    if config.execution.keep_engines:
        print(pool_note(config))
    print(f"total time: {time.perf_counter() - wall_start:.1f} s")
    return 0


def pool_note(config: RunConfig) -> str:
    pool = config.execution.pool
    return (f"engines kept in pool {pool!r} for {config.execution.pool_ttl_s:g} s idle (vllm-sweep pool list; "
            f"vllm-sweep pool release {pool} frees them)")


def _write_profiles(run_dir: Path) -> None:
    """The run's measured acceptance as profile files (runner.sinks.speculation_profiles); never fails the sweep."""
    from runner.sinks.speculation_profiles import write_profiles

    try:
        for line in write_profiles(run_dir).lines():
            print(line)
    except Exception as exc:
        print(f"warning: acceptance profiles not written ({type(exc).__name__}: {exc}); retry: python -m "
              f"runner.sinks.speculation_profiles {run_dir}", file=sys.stderr)


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
    skip = sink.finished_trial_ids(include_failed=not config.retry_failed) | skipped_ids(sink)
    return skip, [t for t in stage.plan.trials if t.trial_id not in skip]


def _execute(*, stages: Iterator[Stage], base_plan: Plan, config: RunConfig, sink, run_dir: Path, planned: set,
             export_later: list, announce: bool, steps: StartupSteps,
             before_engines: Optional[Callable[[], None]] = None) -> int:
    """Runs each stage's remaining trials (Ray starts with the first stage that has any; `planned` collects every
    stage's trial ids). A tracker of a sweep that completed goes into `export_later` (the caller exports after the
    report); one that was interrupted exports here, before the process ends."""
    from runner.scheduling.stops import DeadlineReached, Interrupted

    # Signals arrive as KeyboardInterrupt from here on. (Ray in a side thread lost its GCS connection.)
    previous = {sig: signal.signal(sig, raise_interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    session: Optional[Session] = None
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
                session = Session.open(config=config, run_dir=run_dir, plan=base_plan, previous=previous,
                                        steps=steps)
            # Files read and rendered here once per command; each node fetches their data once, not per trial.
            shipped = by_reference(load_checks.ship_prompts(stage.plan,
                                                            tokenizer=lambda: driver_tokenizer(config.model)))
            session.run(dataclasses.replace(stage, plan=shipped), config=config, sink=sink, skip=skip, todo=len(todo),
                        before_engines=before_engines)
        if session is None:
            print(f"nothing to do: all {len(planned)} trials of this sweep are already in {run_dir} "
                  f"(run=<new name> starts a fresh run)")
        completed = True
    except (Interrupted, KeyboardInterrupt):
        ignore_signals()
        print(f"\ninterrupted: finished trials are in {run_dir}; the trial in flight reruns; "
              f"run the same command again to resume"
              + (f"; {pool_note(config)}" if config.execution.keep_engines else ""), file=sys.stderr)
        return 130
    except ConfigError as exc:  # a later stage of an adaptive study that cannot be planned
        ignore_signals()
        print(f"error: {exc}; finished trials are in {run_dir}", file=sys.stderr)
        return 2
    except DeadlineReached as exc:
        ignore_signals()
        print(f"\nstopped at execution.deadline_s: {exc.reason}; {exc.left} trial(s) left; finished trials are in "
              f"{run_dir}; run the same command again (with a later execution.deadline_s) to resume", file=sys.stderr)
        return 3
    finally:
        ignore_signals()
        if session is not None:
            session.close(sink=sink, completed=completed, export_later=export_later)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
