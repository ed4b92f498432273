"""The GPUs' energy counter and power draw through NVML, by vLLM's own bindings (vllm/third_party/pynvml.py): the
`pynvml` / `nvidia-ml-py` package need not be installed beside vLLM.

A GPU is named by its UUID. Ray's CUDA_VISIBLE_DEVICES is not NVML's numbering: an entry is either a UUID
("GPU-…") or an index that CUDA reads in its own device order, which is NVML's (PCI bus) order only under
CUDA_DEVICE_ORDER=PCI_BUS_ID. So the engine's workers say which UUIDs they hold (runner.vllm.worker_probe), and
only where they cannot does an index entry go to NVML, and then only under PCI_BUS_ID order.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from runner.vllm.versions import Check

# What the reader calls of the bindings; the contract check looks each one up.
FUNCTIONS = ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetHandleByIndex",
             "nvmlDeviceGetUUID", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPowerUsage", "NVMLError")


class NotMeasurable(RuntimeError):
    """Why this process's GPUs cannot be metered (the trial row's energy_unmeasured says it)."""


def bindings():
    """vLLM's copy of NVML's Python bindings."""
    from vllm.third_party import pynvml

    return pynvml


@dataclass(frozen=True, kw_only=True)
class Gpu:
    uuid: str
    handle: Any
    has_counter: bool  # NVML's total-energy counter (Volta and later); without it, power is sampled


class NvmlReader:
    """One process's view of its GPUs through NVML. `nvml` is the bindings module (a fake one in unit tests)."""

    def __init__(self, nvml=None):
        self.nvml = nvml if nvml is not None else bindings()
        try:
            self.nvml.nvmlInit()
        except Exception as exc:
            raise NotMeasurable(f"NVML did not start ({type(exc).__name__}: {exc})") from None

    def gpus(self, uuids: Sequence[str]) -> list[Gpu]:
        """The GPUs of these UUIDs (one per tensor-parallel rank; a UUID named twice is one GPU)."""
        out = []
        for uuid in dict.fromkeys(uuids):
            if uuid.startswith("MIG-"):
                raise NotMeasurable(f"{uuid} is a MIG instance: NVML meters the whole GPU, not its slices")
            try:
                handle = self._handle(uuid)
            except self.nvml.NVMLError as exc:
                raise NotMeasurable(f"NVML knows no GPU {uuid} ({exc})") from None
            out.append(Gpu(uuid=uuid, handle=handle, has_counter=self._counter(handle) is not None))
        if not out:
            raise NotMeasurable("the engine named no GPU")
        return out

    def _handle(self, uuid: str):
        try:
            return self.nvml.nvmlDeviceGetHandleByUUID(uuid)
        except TypeError:  # bindings that take the UUID as bytes only
            return self.nvml.nvmlDeviceGetHandleByUUID(uuid.encode())

    def visible_uuids(self, visible: Optional[str] = None) -> list[str]:
        """CUDA_VISIBLE_DEVICES' entries as UUIDs, for an engine whose workers did not say theirs."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if not entries:
            raise NotMeasurable("CUDA_VISIBLE_DEVICES names no GPU")
        if any(not e.startswith(("GPU-", "MIG-")) for e in entries) and \
                os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            raise NotMeasurable(f"CUDA_VISIBLE_DEVICES={visible} holds indices in CUDA's order, not NVML's, and "
                                f"the workers said no UUID")
        uuids = []
        for entry in entries:
            if entry.startswith(("GPU-", "MIG-")):
                uuids.append(entry)
            else:
                uuids.append(_text(self.nvml.nvmlDeviceGetUUID(self.nvml.nvmlDeviceGetHandleByIndex(int(entry)))))
        return uuids

    def _counter(self, handle) -> Optional[int]:
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except self.nvml.NVMLError:  # NOT_SUPPORTED before Volta
            return None

    def energy_mj(self, gpu: Gpu) -> int:
        """The GPU's energy since the driver loaded, in millijoules."""
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(gpu.handle))

    def power_mw(self, gpu: Gpu) -> int:
        """The GPU's power draw now (NVML averages it over about a second on recent GPUs), in milliwatts."""
        return int(self.nvml.nvmlDeviceGetPowerUsage(gpu.handle))

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def open_reader() -> NvmlReader:
    """The reader on this machine; NotMeasurable off CUDA or where NVML does not answer."""
    from runner.vllm.device import is_cuda

    try:
        cuda = is_cuda()
    except Exception as exc:
        raise NotMeasurable(f"vLLM's platform cannot be read ({type(exc).__name__}: {exc})") from None
    if not cuda:
        raise NotMeasurable("not a CUDA device (NVML meters NVIDIA GPUs only)")
    try:
        nvml = bindings()
    except ImportError as exc:
        raise NotMeasurable(f"vLLM ships no NVML bindings here ({exc})") from None
    return NvmlReader(nvml)


def check() -> Check:
    """vLLM's bindings and every function the reader calls; inactive off CUDA (the names are still checked)."""
    nvml = bindings()
    missing = [name for name in FUNCTIONS if not hasattr(nvml, name)]
    if missing:
        return Check(active=False, reason=f"vllm.third_party.pynvml has no {', '.join(missing)}")
    try:
        open_reader().close()
    except NotMeasurable as exc:
        return Check(active=False, reason=f"CUDA only: {exc} (vLLM's names are present)")
    return Check(active=True)
