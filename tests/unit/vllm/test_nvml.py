"""The real NVML reader against the installed vLLM: its bindings carry every function the reader calls, and on a
machine without a CUDA GPU the meter says why it measures nothing (the trial rows carry that reason, never 0)."""
from __future__ import annotations

from runner.execution.energy import EnergyMeter, Unmetered, open_meter
from runner.vllm import nvml
from runner.vllm.device import is_cuda


def test_vllms_bindings_carry_every_function_the_reader_calls():
    bindings = nvml.bindings()
    assert bindings.__name__ == "vllm.third_party.pynvml"
    assert [name for name in nvml.FUNCTIONS if not callable(getattr(bindings, name, None))] == []


def test_the_real_meter_measures_on_cuda_and_says_why_not_elsewhere(monkeypatch):
    if is_cuda():  # outside an engine no worker names its GPU: the first one, by its bus order
        monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    meter = open_meter(None)
    if is_cuda():
        assert isinstance(meter, EnergyMeter) and meter.calibration.idle_w > 0
    else:
        assert isinstance(meter, Unmetered)
        assert meter.columns(output_tokens=1) == {"energy_unmeasured": "not a CUDA device (NVML meters NVIDIA GPUs "
                                                                       "only)"}
