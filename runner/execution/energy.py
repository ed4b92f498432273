"""The GPU energy of a trial's measure window, in the actor: NVML's total-energy counter read at the window's edges
where the GPUs keep one, else their power sampled through the window and integrated. Summed over the engine's GPUs
(one per tensor-parallel rank). Off CUDA, or where NVML cannot name the engine's GPUs, every trial says why it was
not measured; a figure is never 0 for want of a reading.

At the engine's start, while it is idle, the meter reads the GPUs' idle power and the counter's resolution (how
often its value moves): a window that spans few of its updates is not measured (MIN_UPDATES).
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

COUNTER = "counter"  # energy_source: NVML's total-energy counter, read at the window's edges
SAMPLED = "sampled"  # energy_source: power readings through the window, integrated
SAMPLE_EVERY_S = 0.05  # power readings where a GPU has no counter
IDLE_S = 1.0  # how long the idle power and the counter's updates are watched at the engine's start
IDLE_POLL_S = 0.002
# A window must span this many of the counter's updates (or power samples): each edge's reading may be stale by up
# to one update, so fewer would leave more than a fifth of the figure to chance.
MIN_UPDATES = 10


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """What the meter saw of the idle engine's GPUs."""

    idle_w: float  # summed over the GPUs
    resolution_s: float  # the counter's update interval (the sampling interval without a counter)


class Unmetered:
    """A meter for an engine whose GPUs cannot be metered: every trial row says why."""

    def __init__(self, reason: str):
        self.reason = reason

    def begin(self) -> None:
        pass

    def end(self) -> None:
        pass

    def columns(self, *, output_tokens: int) -> dict:
        return {"energy_unmeasured": self.reason}


@dataclass(kw_only=True)
class EnergyMeter:
    """begin() and end() bracket a measure window (the last pair wins, as the counters' window does)."""

    reader: object  # runner.vllm.nvml.NvmlReader (or a fake in tests)
    gpus: Sequence
    calibration: Calibration
    clock: Callable[[], float] = time.perf_counter
    sample_every_s: float = SAMPLE_EVERY_S
    _start: Optional[tuple[float, float]] = None  # (clock, mJ) at begin (counter)
    _stop: Optional[tuple[float, float]] = None
    _samples: list = field(default_factory=list)  # (clock, mW) through the window (sampled)
    _sampler: Optional[threading.Thread] = None
    _halt: threading.Event = field(default_factory=threading.Event)

    @property
    def counter(self) -> bool:
        return all(g.has_counter for g in self.gpus)

    def begin(self) -> None:
        self._stop = None
        if self.counter:
            self._start = (self.clock(), self._energy_mj())
            return
        self._halt_sampler()
        self._samples = [(self.clock(), self._power_mw())]
        self._start = (self._samples[0][0], 0.0)
        self._halt = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="runner-power", daemon=True)
        self._sampler.start()

    def end(self) -> None:
        if self._start is None:
            return
        if self.counter:
            self._stop = (self.clock(), self._energy_mj())
            return
        self._halt_sampler()
        self._samples.append((self.clock(), self._power_mw()))
        self._stop = (self._samples[-1][0], integrate_mj(self._samples))

    def columns(self, *, output_tokens: int) -> dict:
        """The trial row's energy columns; energy_unmeasured says why where there is no figure."""
        common = {"power_idle_w": self.calibration.idle_w, "energy_resolution_s": self.calibration.resolution_s,
                  "energy_source": COUNTER if self.counter else SAMPLED, "energy_gpus": len(self.gpus)}
        if self._start is None or self._stop is None:
            return {**common, "energy_unmeasured": "the workload opened no measure window"}
        window_s = self._stop[0] - self._start[0]
        if window_s < MIN_UPDATES * self.calibration.resolution_s:
            return {**common, "energy_unmeasured": f"window {window_s:.3f} s spans fewer than {MIN_UPDATES} of the "
                                                   f"counter's {self.calibration.resolution_s:.3f} s updates"}
        joules = (self._stop[1] - self._start[1]) / 1000.0
        if joules <= 0:
            return {**common, "energy_unmeasured": f"the counter did not move over {window_s:.3f} s"}
        return {**common, "energy_j": joules, "power_mean_w": joules / window_s,
                "energy_per_output_token_j": joules / output_tokens if output_tokens else None,
                **({} if output_tokens else {"energy_unmeasured": "no output tokens to divide by"})}

    def _energy_mj(self) -> float:
        return float(sum(self.reader.energy_mj(g) for g in self.gpus))

    def _power_mw(self) -> float:
        return float(sum(self.reader.power_mw(g) for g in self.gpus))

    def _sample(self) -> None:
        while not self._halt.wait(self.sample_every_s):
            self._samples.append((self.clock(), self._power_mw()))

    def _halt_sampler(self) -> None:
        if self._sampler is not None:
            self._halt.set()
            self._sampler.join()
            self._sampler = None


def integrate_mj(samples: Sequence[tuple[float, float]]) -> float:
    """Trapezoids over (seconds, mW) readings: millijoules."""
    return sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in zip(samples, samples[1:]))


def calibrate(reader, gpus: Sequence, *, watch_s: float = IDLE_S, poll_s: float = IDLE_POLL_S,
              clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
              sample_every_s: float = SAMPLE_EVERY_S) -> Calibration:
    """Idle power and the counter's update interval, watched for `watch_s` while the engine is idle."""
    power: list[float] = []
    changes: list[float] = []
    last = None
    counter = all(g.has_counter for g in gpus)
    started = clock()
    while clock() - started < watch_s:
        power.append(float(sum(reader.power_mw(g) for g in gpus)))
        if counter:
            value = sum(reader.energy_mj(g) for g in gpus)
            if last is not None and value != last:
                changes.append(clock())
            last = value
        sleep(poll_s)
    intervals = [b - a for a, b in zip(changes, changes[1:])]
    # Without two updates in the watch the counter is coarser than the watch itself.
    resolution = (statistics.median(intervals) if intervals else watch_s) if counter else sample_every_s
    return Calibration(idle_w=statistics.fmean(power) / 1000.0 if power else float("nan"), resolution_s=resolution)


def open_meter(uuids: Optional[Sequence[str]], *, opener: Optional[Callable] = None):
    """The engine's meter: an EnergyMeter over its GPUs (the workers' UUIDs, else CUDA_VISIBLE_DEVICES'), or an
    Unmetered saying why. Call it while the engine is idle (it watches the idle GPUs for IDLE_S)."""
    from runner.vllm import nvml

    try:
        reader = (opener or nvml.open_reader)()
        try:
            gpus = reader.gpus(uuids) if uuids and all(uuids) else None
        except nvml.NotMeasurable:  # a UUID NVML does not know: CUDA_VISIBLE_DEVICES may still name the GPUs
            gpus = None
        gpus = gpus or reader.gpus(reader.visible_uuids())
        return EnergyMeter(reader=reader, gpus=gpus, calibration=calibrate(reader, gpus))
    except nvml.NotMeasurable as exc:
        return Unmetered(str(exc))
    except Exception as exc:  # a meter that cannot read must not fail the engine
        return Unmetered(f"NVML read failed ({type(exc).__name__}: {exc})"[:300])
