"""Where the device time went, from the persisted timeline (phases.parquet): vLLM's own init, trials, warm-ups,
switches between resident engines, and the runner's own time.

Per lane (one device), spans are sorted in time. A *switch* is the gap from one engine's last trial to the next
engine's first trial on the same lane with no load between them (sleep + wake + the runner's calls). A *load
gap* is the same gap when the next engine loaded in it; its *runner overhead* is that gap less vLLM's own init
(the engine's `load_s`): process start, imports, results written, teardown, calls issued.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from runner.schema import Phase


@dataclass(kw_only=True)
class DeviceTime:
    wall_s: float
    launch_s: float  # command start → first engine actor call
    loads: int
    engines: int = 0  # distinct engines on the timeline: loads above it are reloads (per round, per stage, retries)
    vllm_init_s: float  # Σ engines' load_s over the loads (loads side by side each count)
    start_calls_s: float  # Σ start spans (vLLM's init + the actor's own work around it)
    loads_wall_s: float  # the time some engine was loading (loads side by side count once)
    prepare_s: float  # Σ prepare spans on the critical path (an actor started ahead is not on it)
    trials_s: float  # Σ trial spans, warm-ups included
    warmup_s: float
    measured_s: float  # Σ the trials' measured windows (trials.duration_s)
    workload_runs_s: float  # Σ the trials' workload runs (trials.wall_s): the measured windows and the cold phases
    wake_s: float
    sleep_s: float
    switches_s: list[float] = field(default_factory=list)
    load_gap_overhead_s: list[float] = field(default_factory=list)
    idle_s: float = 0.0  # on the lanes outside every span, after launch
    first_run_s: float = 0.0  # the first of two runs of each load's first trial (inside trial spans, in no figure)

    @property
    def runner_s(self) -> float:
        """Everything that is neither an engine's preparation or load, a trial, nor a sleep or wake: the runner's
        share."""
        return self.wall_s - self.prepare_s - self.loads_wall_s - self.trials_s - self.sleep_s - self.wake_s

    def outside_init_and(self, inside_s: float) -> float:
        """The wall beyond vLLM's own init and `inside_s`: with the workload runs, what the runner can still take
        away (launch, preparation, warm-ups, sleeps and wakes, its own calls)."""
        return self.wall_s - min(self.vllm_init_s, self.loads_wall_s) - inside_s

    def rows(self) -> list[dict]:
        def median(values: list[float]) -> str:
            return f"{statistics.median(values):.2f} s (n={len(values)}, {min(values):.2f}–{max(values):.2f})" \
                if values else "–"
        share = (lambda x: f"{x / self.wall_s:.0%}") if self.wall_s else (lambda x: "–")
        beyond_runs = self.outside_init_and(self.workload_runs_s)
        beyond_measured = self.outside_init_and(self.measured_s)
        return [
            {"what": "wall (each command's start → its last span's end)", "seconds": f"{self.wall_s:.1f}", "share": "100%"},
            {"what": "command start → first engine call", "seconds": f"{self.launch_s:.1f}",
             "share": share(self.launch_s)},
            {"what": f"engine loads ({self.loads} for {self.engines} engines; side by side counted once; Σ vLLM's "
                     f"own init {self.vllm_init_s:.1f} s)", "seconds": f"{self.loads_wall_s:.1f}",
             "share": share(self.loads_wall_s)},
            {"what": "engine preparation on the critical path (an actor's process and imports before its load)",
             "seconds": f"{self.prepare_s:.1f}", "share": share(self.prepare_s)},
            {"what": "trials (of which warm-ups; first runs of a load's first trial)",
             "seconds": f"{self.trials_s:.1f} ({self.warmup_s:.1f}; {self.first_run_s:.1f})", "share": share(self.trials_s)},
            {"what": "sleep + wake (resident engines)", "seconds": f"{self.sleep_s:.1f} + {self.wake_s:.1f}",
             "share": share(self.sleep_s + self.wake_s)},
            {"what": "runner's own time (wall − preparation − loads − trials − sleep − wake)", "seconds": f"{self.runner_s:.1f}",
             "share": share(self.runner_s)},
            {"what": "outside vLLM's init and the workload runs (their cold phases included)",
             "seconds": f"{beyond_runs:.1f}", "share": share(beyond_runs)},
            {"what": "outside vLLM's init and the measured windows", "seconds": f"{beyond_measured:.1f}",
             "share": share(beyond_measured)},
            {"what": "warm-ups against the measured windows (against the workload runs)",
             "seconds": f"{self.warmup_s:.1f} / {self.measured_s:.1f} ({self.workload_runs_s:.1f})",
             "share": f"{self.warmup_s / self.measured_s:.0%} ({self.warmup_s / self.workload_runs_s:.0%})"
             if self.measured_s and self.workload_runs_s else "–"},
            {"what": "device idle outside every span (after launch)", "seconds": f"{self.idle_s:.1f}",
             "share": share(self.idle_s)},
            {"what": "switch between resident engines, median", "seconds": median(self.switches_s), "share": ""},
            {"what": "runner overhead per load (gap − vLLM's init), median", "seconds":
             median(self.load_gap_overhead_s), "share": ""},
        ]


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def device_time(phases: pd.DataFrame, engines: pd.DataFrame, trials: pd.DataFrame) -> DeviceTime | None:
    """The split of one run's wall time; None without a timeline (runs from before phases.parquet)."""
    if phases is None or not len(phases):
        return None
    p = phases.assign(ended_at=phases.started_at + phases.duration_s).sort_values("started_at")
    # One launch per command: a timeline where each stage of an adaptive study wrote its own keeps the first.
    launch = p[p.phase == Phase.LAUNCH].sort_values("duration_s").drop_duplicates("started_at").sort_values("started_at")
    lanes = p[p.lane >= 0]
    if not len(lanes):
        return None
    commands = _command_starts(p, launch)
    wall = _wall(p, commands)
    load_s = {r.engine_id: float(r.load_s) for r in engines.itertuples()
              if getattr(r, "load_s", None) is not None and r.load_s == r.load_s}
    starts = lanes[lanes.phase == Phase.START]
    vllm_init = sum(_load_of(r, load_s) for r in starts.itertuples())
    on_timeline = _on_timeline(trials, lanes)
    warmups = _column_sum(on_timeline, "warmup_s")
    switches, overheads = _gaps(lanes, load_s, commands=commands)
    idle = wall - float(launch.duration_s.sum()) - union_length(list(zip(lanes.started_at, lanes.ended_at)))
    return DeviceTime(
        wall_s=wall, launch_s=float(launch.duration_s.sum()) if len(launch) else 0.0, loads=len(starts),
        engines=int(lanes.engine_id.dropna().nunique()),
        vllm_init_s=vllm_init, start_calls_s=float(starts.duration_s.sum()),
        loads_wall_s=union_length(list(zip(starts.started_at, starts.ended_at))),
        prepare_s=float(lanes[lanes.phase == Phase.PREPARE].duration_s.sum()),
        trials_s=float(lanes[lanes.phase == Phase.TRIAL].duration_s.sum()), warmup_s=warmups,
        measured_s=_column_sum(on_timeline, "duration_s"), workload_runs_s=_column_sum(on_timeline, "wall_s"),
        wake_s=float(lanes[lanes.phase == Phase.WAKE].duration_s.sum()),
        sleep_s=float(lanes[lanes.phase == Phase.SLEEP].duration_s.sum()),
        switches_s=switches, load_gap_overhead_s=overheads, idle_s=idle,
        first_run_s=_column_sum(on_timeline, "first_run_s"))


def _on_timeline(trials: pd.DataFrame, lanes: pd.DataFrame) -> pd.DataFrame:
    """The trials this timeline ran (a folder resumed from runs without one holds more)."""
    if "trial_id" in lanes and "trial_id" in trials:
        return trials[trials.trial_id.isin(lanes.trial_id.dropna())]
    return trials


def _column_sum(trials: pd.DataFrame, column: str) -> float:
    if column not in trials:
        return 0.0
    return float(pd.to_numeric(trials[column], errors="coerce").dropna().sum())


def _load_of(span, load_s: dict) -> float:
    """vLLM's init inside one start span: its own figure, else (older timelines) the engine's last load_s."""
    own = getattr(span, "load_s", None)
    if own is not None and own == own:
        return float(own)
    return load_s.get(span.engine_id, 0.0)


def _command_starts(p: pd.DataFrame, launch: pd.DataFrame) -> list[float]:
    """When each command began (a resume is a new command: its `launch` span); one start for timelines without."""
    return sorted(float(t) for t in launch.started_at) or [float(p.started_at.min())]


def _wall(p: pd.DataFrame, starts: list[float]) -> float:
    """Σ over commands of its start → its last span's end: breaks between commands are not the sweep's time."""
    total = 0.0
    for i, begin in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else float("inf")
        inside = p[(p.started_at >= begin) & (p.started_at < end)]
        total += float(inside.ended_at.max()) - begin if len(inside) else 0.0
    return total


def _gaps(lanes: pd.DataFrame, load_s: dict, *, commands: list[float]) -> tuple[list[float], list[float]]:
    """Per command and lane: engine-to-engine gaps between trials, split by whether a load happened in the gap
    (the break between two commands is no gap of the sweep's)."""
    switches, overheads = [], []
    command = np.searchsorted(np.asarray(commands, dtype=float), lanes.started_at.to_numpy(dtype=float),
                              side="right")
    for _, lane in lanes.assign(_command=command).groupby(["_command", "lane"]):
        last_trial = None  # (engine_id, ended_at)
        loaded: str | None = None
        init = 0.0
        lane_start = float(lane.started_at.min())
        for r in lane.itertuples():
            if r.phase == Phase.START:
                loaded, init = r.engine_id, _load_of(r, load_s)
            elif r.phase == Phase.TRIAL:
                if last_trial is None and loaded == r.engine_id:  # the lane's first engine: from its first call
                    overheads.append(float(r.started_at) - lane_start - init)
                elif last_trial is not None and last_trial[0] != r.engine_id:
                    gap = float(r.started_at) - last_trial[1]
                    if loaded == r.engine_id:
                        overheads.append(gap - init)
                    else:
                        switches.append(gap)
                last_trial, loaded = (r.engine_id, float(r.ended_at)), None
    return switches, overheads
