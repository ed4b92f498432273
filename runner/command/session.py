"""What the stages of one sweep command share (Ray, the tracker, the progress bar), and its signals and exit."""
from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import Callable, Optional

from runner.config.sections import RunConfig
from runner.measurement.records import RunKeys
from runner.plan.grid import Plan
from runner.plan.stages import Stage
from runner.schema import TrialStatus
from runner.scheduling.first_trial import FirstTrialClock
from runner.scheduling.held import HeldEngines
from runner.scheduling.settings import ExecutionSettings
from runner.scheduling.startup_steps import StartupSteps
from runner.scheduling.startup import ModelFolder, ModelInfoFill, begin_model_info, prepare_builtin_model, start_ray


@dataclasses.dataclass(kw_only=True)
class Session:
    """What the stages of one command share: Ray, the tracker, the progress bar, the executor's settings, and the
    engines: every command is a study of one or more stages (a plain sweep is one), and the session owns its
    actors, lane bundles and resident engines (`held`); a stage only plans trials."""

    settings: ExecutionSettings
    keys: RunKeys
    tracker: object
    progress: object
    launched: bool = False  # the command's launch span is on the timeline (once, before its first stage)
    held: HeldEngines  # the command's actors, bundles and the engines its stages left loaded
    model_info: ModelInfoFill = dataclasses.field(default_factory=ModelInfoFill)
    clock: Optional[FirstTrialClock] = None  # set at open: the first trial's line

    @classmethod
    def open(cls, *, config: RunConfig, run_dir: Path, plan: Plan, previous: dict,
             steps: StartupSteps) -> "Session":
        from tqdm import tqdm

        from runner.sinks.tracking import open_tracker

        device = config.engine.device
        steps.mark("run folder")
        model = ModelFolder(lambda: _model_folder(config, plan))  # needs no Ray: built beside its start
        address, namespace = config.cluster.address, None
        if config.execution.keep_engines:  # engines outlive the command, on a cluster that does too
            from runner.pool.head import pool_ray

            address, namespace = pool_ray(address=address, pool=config.execution.pool,
                                          say=lambda line: print(line, flush=True))
        capacity = start_ray(config.cluster, device=device, address=address, namespace=namespace)
        steps.mark("Ray (the model folder beside it)")
        model_info = model.ready()  # before any actor resolves the model: one builder of its folder
        steps.mark("model folder beyond that")
        for sig in previous:  # again: ray.init installs its own SIGTERM handler (which aborted the process)
            signal.signal(sig, raise_interrupt)
        settings = ExecutionSettings.of(config, capacity=capacity)
        keys = RunKeys(sweep=plan.sweep, run_id=config.run)
        held = _held_engines(settings=settings, keys=keys, run_dir=run_dir, model_cfg=config.model)
        tracker = open_tracker(tracking=config.tracking, run_dir=run_dir)
        steps.mark("tracker")
        print(steps.line(), flush=True)
        progress = tqdm(total=0, desc="trials", unit="trial", dynamic_ncols=True)
        return cls(settings=settings, keys=keys, tracker=tracker, progress=progress, model_info=model_info,
                   held=held, clock=FirstTrialClock(origin=process_started_at()))

    def run(self, stage: Stage, *, config: RunConfig, sink, skip: set[str], todo: int,
            before_engines: Optional[Callable[[], None]] = None) -> None:
        """One stage's trials on the session's engines (`stage.later`: engines stay loaded for later stages)."""
        from runner.scheduling.describe import describe_loads, describe_rounds
        from runner.scheduling.loop import Scheduler

        plan = stage.plan
        self.progress.total += todo
        self.progress.refresh()
        lines = describe_rounds(plan, device=self.settings.device, resident=self.settings.resident)
        if stage.later:
            lines.append(describe_loads(plan, resident=self.settings.resident, adaptive=True,
                                        held=frozenset(self.held.engines_left())))
        print("\n".join(lines), flush=True)
        scheduler = Scheduler(plan=plan, model_cfg=config.model, keys=self.keys, sink=sink, settings=self.settings,
                              held=self.held, later=stage.later, on_trial=self.tracker.log_trial,
                              on_engine=self.tracker.log_engine, progress=self.progress,
                              launched_at=None if self.launched else process_started_at(),
                              before_engines=self._before_engines(before_engines), clock=self.clock)
        self.launched = True
        scheduler.run(skip_trial_ids=skip)

    def _before_engines(self, then: Optional[Callable[[], None]]) -> Callable[..., None]:
        def before_engines(*, load: bool) -> None:
            clock = self.clock or FirstTrialClock(origin=0.0, done=True)
            with clock.timed("waiting for vLLM's model-info fill"):
                if load:
                    self.model_info.wait()
                else:  # a trial before any load (engines woken from the pool): no load needs it
                    self.model_info.stop()
            if not load and not clock.done:
                clock.note(f"model-info fill: {self.model_info.outcome}")
            if then is not None:
                with clock.timed("vLLM's engine-argument rules"):
                    then()
        return before_engines

    def close(self, *, sink, completed: bool, export_later: list) -> None:
        self.progress.close()
        self.held.drop()  # the engines the stages kept: shut down (a pooled one parks), bounded; bundles released
        compact(sink)  # before the W&B export, which ships the tables' files
        if completed:
            export_later.append(self.tracker)
        else:
            self.tracker.finish()
        shutdown_ray()


def _held_engines(*, settings: ExecutionSettings, keys: RunKeys, run_dir: Path, model_cfg) -> HeldEngines:
    from runner.scheduling.actors import EngineActors
    from runner.scheduling.cluster import LaneBundles

    return HeldEngines(actors=EngineActors(settings=settings, keys=keys, log_dir=run_dir / "logs", model_cfg=model_cfg),
                       bundles=LaneBundles(gpus_per_unit=1.0 / settings.engines_per_gpu))


def _model_folder(config: RunConfig, plan: Plan) -> ModelInfoFill:
    """The embedded model's folder (built on a local cluster) and vLLM's model-info fill for it: on every device,
    once per machine and vLLM (its stamp), since a first load that misses vLLM's cache inspects the classes itself,
    one step after another (18 s of a cold CPU start, beside nothing)."""
    if config.cluster.address:
        return ModelInfoFill()
    prepare_builtin_model(config.model)
    return begin_model_info(config.model, mtp=any(e.settings.spec_method == "mtp" for e in plan.engines))


def compact(sink) -> None:
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


def skipped_ids(sink) -> set[str]:
    """Race-eliminated trials are done: a resume does not run them (nor does retry_failed)."""
    rows = getattr(sink, "rows", {}).get("trials", [])
    return {r["trial_id"] for r in rows if r.get("status") == TrialStatus.SKIPPED}


def raise_interrupt(signum, frame):
    raise KeyboardInterrupt()


def ignore_signals() -> None:
    """A second Ctrl-C must not cut the cleanup short (engines still to kill)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass


def shutdown_ray() -> None:
    import ray

    if not ray.is_initialized():
        return
    import threading

    # Bounded: a wedged raylet must not hold the exit past the stop-in-seconds promise.
    worker = threading.Thread(target=ray.shutdown, daemon=True)
    worker.start()
    worker.join(timeout=8)
