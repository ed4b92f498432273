"""The energy meter against a fake NVML (the bindings module's functions, driven by a fake clock): GPUs found by
UUID, energy summed over a tensor-parallel group, the counter's resolution and idle power, the sampled fallback,
and "not measured" with its reason instead of 0."""
from __future__ import annotations

import time

import pytest

from runner.execution import energy
from runner.execution.energy import COUNTER, SAMPLED, EnergyMeter, Unmetered, calibrate, open_meter
from runner.vllm.nvml import NotMeasurable, NvmlReader


class Clock:
    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeNvml:
    """The subset of pynvml the reader calls. Each GPU draws a constant power; its energy counter (mJ) moves
    every `update_s` of the clock, as NVML's does; `counter=False` GPUs have none (pre-Volta)."""

    class NVMLError(Exception):
        pass

    def __init__(self, clock: Clock, *, watts: dict[str, float], update_s: float = 0.1, counter: bool = True):
        self.clock, self.watts, self.update_s, self.counter = clock, watts, update_s, counter
        self.order = list(watts)  # NVML's (PCI bus) index order
        self.started = self.stopped = False

    def nvmlInit(self):
        self.started = True

    def nvmlShutdown(self):
        self.stopped = True

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.watts:
            raise self.NVMLError("Not Found")
        return ("handle", uuid)

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", self.order[index])

    def nvmlDeviceGetUUID(self, handle):
        return handle[1].encode()  # some bindings return bytes

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.counter:
            raise self.NVMLError("Not Supported")
        ticks = int(self.clock() / self.update_s)
        return int(self.watts[handle[1]] * ticks * self.update_s * 1000)

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts[handle[1]] * 1000)


TP_PAIR = {"GPU-aaaa": 300.0, "GPU-bbbb": 200.0, "GPU-cccc": 100.0}


def _meter(fake: FakeNvml, clock: Clock, uuids: list[str]) -> EnergyMeter:
    reader = NvmlReader(fake)
    gpus = reader.gpus(uuids)
    return EnergyMeter(reader=reader, gpus=gpus, clock=clock,
                       calibration=calibrate(reader, gpus, clock=clock, sleep=clock.sleep, poll_s=0.01))


def test_a_tensor_parallel_group_is_summed_over_its_gpus_by_uuid():
    clock = Clock()
    meter = _meter(FakeNvml(clock, watts=TP_PAIR), clock, ["GPU-aaaa", "GPU-bbbb"])
    assert meter.calibration.idle_w == pytest.approx(500.0)
    assert meter.calibration.resolution_s == pytest.approx(0.1)
    clock.now = 10.0
    meter.begin()
    clock.now = 20.0
    meter.end()
    cols = meter.columns(output_tokens=2500)
    assert cols["energy_source"] == COUNTER and cols["energy_gpus"] == 2
    assert cols["energy_j"] == pytest.approx(5000.0)  # 500 W over 10 s; GPU-cccc is not the engine's
    assert cols["power_mean_w"] == pytest.approx(500.0)
    assert cols["energy_per_output_token_j"] == pytest.approx(2.0)
    assert "energy_unmeasured" not in cols


def test_the_last_window_counts_as_the_counters_do():
    clock = Clock()
    meter = _meter(FakeNvml(clock, watts=TP_PAIR), clock, ["GPU-cccc"])
    clock.now = 5.0
    meter.begin()
    clock.now = 6.0
    meter.end()
    clock.now = 8.0
    meter.begin()
    clock.now = 12.0
    meter.end()
    assert meter.columns(output_tokens=400)["energy_j"] == pytest.approx(400.0)


def test_a_window_shorter_than_the_counter_can_resolve_is_not_measured_never_zero():
    clock = Clock()
    meter = _meter(FakeNvml(clock, watts=TP_PAIR, update_s=0.1), clock, ["GPU-aaaa"])
    clock.now = 3.0
    meter.begin()
    clock.now = 3.5  # five of the counter's updates: below MIN_UPDATES
    meter.end()
    cols = meter.columns(output_tokens=100)
    assert "energy_j" not in cols and "energy_per_output_token_j" not in cols
    assert "fewer than 10 of the counter's 0.100 s updates" in cols["energy_unmeasured"]
    assert cols["energy_resolution_s"] == pytest.approx(0.1) and cols["power_idle_w"] == pytest.approx(300.0)


def test_a_gpu_without_the_counter_has_its_power_sampled_and_integrated():
    fake = FakeNvml(time.perf_counter, watts={"GPU-old": 250.0}, counter=False)
    reader = NvmlReader(fake)
    gpus = reader.gpus(["GPU-old"])
    assert not gpus[0].has_counter
    meter = EnergyMeter(reader=reader, gpus=gpus, sample_every_s=0.005,
                        calibration=calibrate(reader, gpus, watch_s=0.02, sample_every_s=0.005))
    meter.begin()
    time.sleep(0.2)
    meter.end()
    cols = meter.columns(output_tokens=50)
    assert cols["energy_source"] == SAMPLED and cols["energy_resolution_s"] == 0.005
    assert cols["power_mean_w"] == pytest.approx(250.0)
    assert cols["energy_j"] == pytest.approx(250.0 * 0.2, rel=0.25)
    assert len(meter._samples) > 10


def test_cuda_visible_devices_indices_are_read_in_nvmls_order_only_under_pci_bus_order(monkeypatch):
    reader = NvmlReader(FakeNvml(Clock(), watts=TP_PAIR))
    assert reader.visible_uuids("GPU-cccc,GPU-aaaa") == ["GPU-cccc", "GPU-aaaa"]
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    with pytest.raises(NotMeasurable, match="indices in CUDA's order"):
        reader.visible_uuids("1,2")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert reader.visible_uuids("1,2") == ["GPU-bbbb", "GPU-cccc"]


def test_gpus_are_named_once_and_mig_slices_or_unknown_uuids_are_refused():
    reader = NvmlReader(FakeNvml(Clock(), watts=TP_PAIR))
    assert [g.uuid for g in reader.gpus(["GPU-aaaa", "GPU-aaaa"])] == ["GPU-aaaa"]  # two engines, one GPU
    with pytest.raises(NotMeasurable, match="MIG"):
        reader.gpus(["MIG-1234"])
    with pytest.raises(NotMeasurable, match="no GPU GPU-zzzz"):
        reader.gpus(["GPU-zzzz"])


def test_open_meter_takes_the_workers_uuids_and_falls_back_to_cuda_visible_devices(monkeypatch):
    clock = Clock()
    fake = FakeNvml(clock, watts=TP_PAIR)
    monkeypatch.setattr(energy, "calibrate", lambda reader, gpus: energy.Calibration(idle_w=1.0, resolution_s=0.1))
    meter = open_meter(["GPU-bbbb", "GPU-cccc"], opener=lambda: NvmlReader(fake))
    assert [g.uuid for g in meter.gpus] == ["GPU-bbbb", "GPU-cccc"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa")
    assert [g.uuid for g in open_meter([None], opener=lambda: NvmlReader(fake)).gpus] == ["GPU-aaaa"]
    assert [g.uuid for g in open_meter(["GPU-gone"], opener=lambda: NvmlReader(fake)).gpus] == ["GPU-aaaa"]


def test_without_nvml_every_trial_says_why_it_was_not_measured():
    def no_nvml():
        raise NotMeasurable("not a CUDA device (NVML meters NVIDIA GPUs only)")

    meter = open_meter(None, opener=no_nvml)
    assert isinstance(meter, Unmetered)
    meter.begin()
    meter.end()
    assert meter.columns(output_tokens=10) == {"energy_unmeasured": "not a CUDA device (NVML meters NVIDIA GPUs "
                                                                    "only)"}


def test_a_reader_that_breaks_mid_start_leaves_the_engine_unmetered_not_failed():
    class Broken(FakeNvml):
        def nvmlDeviceGetPowerUsage(self, handle):
            raise RuntimeError("driver gone")

    meter = open_meter(["GPU-aaaa"], opener=lambda: NvmlReader(Broken(Clock(), watts=TP_PAIR)))
    assert isinstance(meter, Unmetered) and "driver gone" in meter.reason
