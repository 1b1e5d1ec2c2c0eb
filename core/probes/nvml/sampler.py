"""Live GPU readings for telemetry, through the pynvml interface (live, replayed or recorded)."""

from __future__ import annotations

import logging
from typing import Any

from tfdoctor.core.probes.nvml.binding import (
    ULL_NOT_AVAILABLE,
    as_text,
    decode_throttle_reasons,
    error_types,
    safe_str,
)

log = logging.getLogger(__name__)


class GpuSampler:
    """Reads each GPU's memory, utilisation, temperature, power, throttle reasons, the VRAM
    of every process on it, and new Xid events, through a pynvml-like `api`.

    NVML errors are values: `open()` returns why NVML is unusable (no library, no driver), or
    None; `sample()` then leaves out each field NVML cannot give. One thread must own an
    instance (the telemetry sampler's NVML thread): NVML calls can hang on a GPU that fell off
    the bus.
    """

    def __init__(self, api: Any) -> None:
        self.api = api
        self._errors = error_types(api)  # how the api says NVML could not answer
        self.handles: list[Any] = []
        self.totals: list[int | None] = []
        self.names: list[str | None] = []
        self._events: Any = None
        self._open = False

    def open(self) -> str | None:
        if self.api is None:
            return "nvidia-ml-py is not installed"
        try:
            self.api.nvmlInit()
        except self._errors as exc:
            return f"NVML could not start: {safe_str(exc)}"
        self._open = True
        try:
            count = int(self.api.nvmlDeviceGetCount())
            for i in range(count):
                h = self.api.nvmlDeviceGetHandleByIndex(i)
                self.handles.append(h)
                name = self._get("nvmlDeviceGetName", h)
                self.names.append(as_text(name) if name is not None else None)
                mem = self._get("nvmlDeviceGetMemoryInfo", h)
                self.totals.append(getattr(mem, "total", None) if mem is not None else None)
        except self._errors as exc:
            self.close()
            return f"NVML could not list the GPUs: {safe_str(exc)}"
        try:
            self._events = self._register_xid()
        except self._errors as exc:  # no Xid events here (a driver or WSL without them)
            log.debug("Xid events unavailable: %s", safe_str(exc))
            self._events = None
        return None

    def _register_xid(self) -> Any:
        es = self.api.nvmlEventSetCreate()
        xid = getattr(self.api, "nvmlEventTypeXidCriticalError", 8)
        for h in self.handles:
            try:
                self.api.nvmlDeviceRegisterEvents(h, xid, es)
            except self._errors:  # not supported on this GPU / driver (e.g. WSL)
                log.debug("Xid events not supported on a GPU", exc_info=True)
        return es

    def _get(self, fn: str, *args: Any) -> Any:
        """api.fn(*args), or None when NVML cannot answer or this pynvml lacks the function."""
        call = getattr(self.api, fn, None)
        if call is None:
            return None
        try:
            return call(*args)
        except self._errors:
            return None

    def sample(self) -> list[dict[str, Any]]:
        """One reading per GPU: {index, used, total, util, temp_c, power_w, throttle, procs}."""
        out = []
        for i, h in enumerate(self.handles):
            row: dict[str, Any] = {"index": i}
            mem = self._get("nvmlDeviceGetMemoryInfo", h)
            if mem is not None:
                row["used"] = int(mem.used)
                row["total"] = int(mem.total)
            util = self._get("nvmlDeviceGetUtilizationRates", h)
            if util is not None:
                row["util"] = int(util.gpu)
            temp = self._get("nvmlDeviceGetTemperature", h, 0)
            if isinstance(temp, int):
                row["temp_c"] = temp
            power = self._get("nvmlDeviceGetPowerUsage", h)
            if isinstance(power, int):
                row["power_w"] = round(power / 1000.0, 1)
            mask = self._get("nvmlDeviceGetCurrentClocksEventReasons", h)
            if not isinstance(mask, int):
                mask = self._get("nvmlDeviceGetCurrentClocksThrottleReasons", h)
            if isinstance(mask, int):
                row["throttle"] = [r for r in decode_throttle_reasons(mask) if r != "gpu_idle"]
            procs: dict[int, int] = {}
            for fn in (
                "nvmlDeviceGetComputeRunningProcesses_v3",
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetGraphicsRunningProcesses_v3",
                "nvmlDeviceGetGraphicsRunningProcesses",
            ):
                got = self._get(fn, h)
                if not isinstance(got, list):
                    continue
                for p in got:
                    used = getattr(p, "usedGpuMemory", None)
                    pid = getattr(p, "pid", None)
                    if isinstance(pid, int) and isinstance(used, int) and used != ULL_NOT_AVAILABLE:
                        procs[pid] = max(procs.get(pid, 0), used)
            row["procs"] = [{"pid": p, "used": u} for p, u in sorted(procs.items())]
            out.append(row)
        return out

    def xid_events(self) -> list[dict[str, Any]]:
        """Xid errors reported since the last call (empty where events are unsupported)."""
        if self._events is None:
            return []
        found = []
        for _ in range(16):
            data = self._get("nvmlEventSetWait_v2", self._events, 0)
            if data is None:
                data = self._get("nvmlEventSetWait", self._events, 0)
            if data is None:
                break
            handle = getattr(data, "device", None)
            index = next((i for i, h in enumerate(self.handles) if h == handle), None)
            found.append({"gpu": index, "xid": getattr(data, "eventData", None)})
        return found

    def close(self) -> None:
        if self._events is not None:
            self._get("nvmlEventSetFree", self._events)
            self._events = None
        if self._open:
            self._get("nvmlShutdown")
            self._open = False
