"""Driver, GPU and GPU-process facts read through NVML (live, replayed or recorded)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from tfdoctor.core.factnames import gpu, is_known
from tfdoctor.core.model import Fact, FactValue, ProbeResult, ProbeStatus
from tfdoctor.core.probes.jupyter import (
    KernelLocation,
    KernelLookup,
    ProcessInfoProvider,
    locate_kernel,
    parse_kernel_cmdline,
    process_info,
)
from tfdoctor.core.probes.nvml.binding import (
    ULL_NOT_AVAILABLE,
    as_text,
    decode_throttle_reasons,
    error_types,
    load_pynvml,
    safe_str,
)
from tfdoctor.core.probes.nvml.replay import ReplayNvml
from tfdoctor.core.probes.nvml.stuck import remember_stuck, stuck_in

log = logging.getLogger(__name__)

PROBE = "nvml"
DEFAULT_TIMEOUT_S = 10.0

_MIB = 1024 * 1024
# Constants from nvml.h, spelled out so that replay does not depend on the pynvml version.
_TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
_MEMORY_ERROR_UNCORRECTED = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_VOLATILE_ECC = 0  # NVML_VOLATILE_ECC
_RETIRE_SINGLE_BIT = 0  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
_RETIRE_DOUBLE_BIT = 1  # NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
_ENABLED = 1  # NVML_FEATURE_ENABLED

# nvml.status value -> (probe status, what it means and what to do).
_INIT_FAILURES: dict[str, tuple[ProbeStatus, str]] = {
    "library_not_found": (
        ProbeStatus.ABSENT,
        "No NVIDIA driver library (libnvidia-ml.so.1) was found, so no GPU could be checked. "
        "If this machine has an NVIDIA GPU, install the NVIDIA driver; inside a container, "
        "start it with GPU access (the NVIDIA Container Toolkit, `--gpus all`).",
    ),
    "driver_not_loaded": (
        ProbeStatus.ABSENT,
        "The NVIDIA driver is installed but its kernel module is not loaded, so no program "
        "can use the GPU. Check `lsmod | grep nvidia` and `sudo dmesg | grep -i nvidia`; with "
        "Secure Boot on, the module must be signed. A reboot after installing often fixes it.",
    ),
    "version_mismatch": (
        ProbeStatus.ERROR,
        "Driver/library version mismatch: the NVIDIA driver was updated but the old kernel "
        "module is still loaded. Until you reboot (or reload the nvidia kernel modules), "
        "nvidia-smi, TensorFlow and every other CUDA program will fail to use the GPU.",
    ),
    "no_permission": (
        ProbeStatus.DENIED,
        "Not allowed to talk to the NVIDIA driver. Check that your user can open /dev/nvidia* "
        "(often the 'video' or 'render' group), or that the container was given the devices.",
    ),
    "gpu_lost": (
        ProbeStatus.ERROR,
        "A GPU has fallen off the bus (NVML says 'GPU is lost'). This points at hardware, "
        "power or PCIe trouble; look for Xid 79 in `sudo dmesg | grep -i xid` and reboot.",
    ),
}


class _Missing:
    """The sentinel for 'NVML could not tell' (unknown, not false)."""


_MISSING = _Missing()


class _Session:
    """One NVML conversation: init, queries, shutdown. Runs in the stall-guard thread."""

    def __init__(
        self,
        nvml: Any,
        errors: Any,
        source: str,
        info: ProcessInfoProvider,
        lookup: KernelLookup,
    ) -> None:
        self.nvml = nvml
        self.errors = errors  # the pynvml module, for its exception classes
        self.source = source
        self.info = info
        self.lookup = lookup
        self._lock = threading.Lock()
        self._facts: list[Fact] = []
        self.status = ProbeStatus.OK
        self.nvml_status = "ok"
        self.message = ""
        self.current = "nvmlInit"
        self._field_errors = error_types(errors)

    @property
    def facts(self) -> list[Fact]:
        with self._lock:
            return list(self._facts)

    def add(self, name: str, value: FactValue) -> None:
        if not is_known(name):  # a programming error, not a machine state
            raise KeyError(f"fact {name!r} is not in core/factnames.py")
        with self._lock:
            self._facts.append(Fact(name, value, self.source))

    def fail(self, nvml_status: str, error: str, message: str | None = None) -> None:
        status, text = _INIT_FAILURES.get(nvml_status, (ProbeStatus.ERROR, ""))
        self.status = status
        self.nvml_status = nvml_status
        self.message = message or text or f"NVML failed: {error}."
        self.add("nvml.error", error)

    def call(self, fn_name: str, *args: Any, gpu_index: int | None = None) -> Any:
        """Call one NVML function; any NVML error leaves the value unknown (_MISSING)."""
        self.current = fn_name if gpu_index is None else f"{fn_name} on GPU {gpu_index}"
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:  # this pynvml predates the function
            return _MISSING
        try:
            return fn(*args)
        except self.errors.NVMLError_GpuIsLost as exc:
            if self.nvml_status == "ok":
                where = "" if gpu_index is None else f" (GPU {gpu_index})"
                self.fail("gpu_lost", f"{safe_str(exc)}{where}")
            return _MISSING
        except self._field_errors as exc:
            # NotSupported / NoPermission / FunctionNotFound and friends: unknown, not fatal.
            log.debug("%s: %s", self.current, safe_str(exc))
            return _MISSING

    def first(self, gpu_index: int, handle: Any, *fn_names: str) -> Any:
        """The first of several function versions that answers (newest first)."""
        for name in fn_names:
            value = self.call(name, handle, gpu_index=gpu_index)
            if value is not _MISSING:
                return value
        return _MISSING

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a bug or a driver oddity must not take the caller down
            log.exception("NVML probe failed")
            self.fail("error", f"{type(exc).__name__}: {exc}")

    def _run(self) -> None:
        e = self.errors
        try:
            self.current = "nvmlInit"
            self.nvml.nvmlInit()
        except e.NVMLError_LibraryNotFound as exc:
            self.fail("library_not_found", safe_str(exc))
        except e.NVMLError_DriverNotLoaded as exc:
            self.fail("driver_not_loaded", safe_str(exc))
        except e.NVMLError_LibRmVersionMismatch as exc:
            self.fail("version_mismatch", safe_str(exc))
        except e.NVMLError_NoPermission as exc:
            self.fail("no_permission", safe_str(exc))
        except e.NVMLError_GpuIsLost as exc:
            self.fail("gpu_lost", safe_str(exc))
        except e.NVMLError as exc:
            self.fail("error", safe_str(exc), f"NVML could not start: {safe_str(exc)}.")
        else:
            try:
                self._query()
            finally:
                self.current = "nvmlShutdown"
                try:
                    self.nvml.nvmlShutdown()
                except e.NVMLError as exc:
                    log.debug("nvmlShutdown: %s", safe_str(exc))
        self.add("nvml.status", self.nvml_status)

    def _query(self) -> None:
        driver = self.call("nvmlSystemGetDriverVersion")
        if driver is not _MISSING:
            self.add("nvidia.driver_version", as_text(driver))
        cuda = self.call("nvmlSystemGetCudaDriverVersion_v2")
        if cuda is _MISSING:
            cuda = self.call("nvmlSystemGetCudaDriverVersion")
        if isinstance(cuda, int) and cuda > 0:
            self.add("nvidia.cuda_driver_version", f"{cuda // 1000}.{(cuda % 1000) // 10}")
        version = self.call("nvmlSystemGetNVMLVersion")
        if version is not _MISSING:
            self.add("nvml.version", as_text(version))
        count = self.call("nvmlDeviceGetCount")
        if not isinstance(count, int):
            if self.nvml_status == "ok":
                self.fail(
                    "error", "nvmlDeviceGetCount failed", "NVML started but could not count GPUs."
                )
            return
        self.add("gpu.count", count)
        for i in range(count):
            handle = self.call("nvmlDeviceGetHandleByIndex", i, gpu_index=i)
            if handle is not _MISSING:
                self._device(i, handle)
        if self.nvml_status == "ok":
            text = f"NVML sees {count} GPU{'' if count == 1 else 's'}"
            if driver is not _MISSING:
                text += f"; driver {as_text(driver)}"
                if isinstance(cuda, int) and cuda > 0:
                    text += f" supports CUDA up to {cuda // 1000}.{(cuda % 1000) // 10}"
            self.message = text + "."

    def _device(self, i: int, h: Any) -> None:
        c = functools.partial(self.call, gpu_index=i)
        name = c("nvmlDeviceGetName", h)
        if name is not _MISSING:
            self.add(gpu(i, "name"), as_text(name))
        uuid = c("nvmlDeviceGetUUID", h)
        if uuid is not _MISSING:
            self.add(gpu(i, "uuid"), as_text(uuid))
        pci = c("nvmlDeviceGetPciInfo", h)
        bus_id = getattr(pci, "busId", None) if pci is not _MISSING else None
        if bus_id:
            self.add(gpu(i, "pci_bus_id"), as_text(bus_id))
        cc = c("nvmlDeviceGetCudaComputeCapability", h)
        if isinstance(cc, (list, tuple)) and len(cc) == 2:
            self.add(gpu(i, "compute_capability"), f"{int(cc[0])}.{int(cc[1])}")
        mem = c("nvmlDeviceGetMemoryInfo", h)
        if mem is not _MISSING:
            for attr in ("total", "used", "free"):
                value = getattr(mem, attr, None)
                if isinstance(value, int):
                    self.add(gpu(i, f"memory_{attr}_mib"), value // _MIB)
        # v1 'used' counts what the driver reserves for itself (480 MiB on an idle H100, where
        # nvidia-smi says 0 MiB); v2 names that reserve, so an idle GPU does not look shared.
        v2 = getattr(self.errors, "nvmlMemory_v2", None)
        mem2 = c("nvmlDeviceGetMemoryInfo", h, v2) if isinstance(v2, int) else _MISSING
        reserved = getattr(mem2, "reserved", None) if mem2 is not _MISSING else None
        if isinstance(reserved, int):
            self.add(gpu(i, "memory_reserved_mib"), reserved // _MIB)
        persistence = c("nvmlDeviceGetPersistenceMode", h)
        if isinstance(persistence, int):
            self.add(gpu(i, "persistence_mode"), persistence == _ENABLED)
        ecc = c("nvmlDeviceGetEccMode", h)
        if isinstance(ecc, (list, tuple)) and ecc:
            self.add(gpu(i, "ecc_enabled"), int(ecc[0]) == _ENABLED)
        ecc_errors = c("nvmlDeviceGetTotalEccErrors", h, _MEMORY_ERROR_UNCORRECTED, _VOLATILE_ECC)
        if isinstance(ecc_errors, int):
            self.add(gpu(i, "ecc_uncorrected_volatile"), ecc_errors)
        self._retired_pages(i, h)
        self._remapped_rows(i, h)
        temp = c("nvmlDeviceGetTemperature", h, _TEMPERATURE_GPU)
        if isinstance(temp, (int, float)):
            self.add(gpu(i, "temperature_c"), temp)
        power_mw = c("nvmlDeviceGetPowerUsage", h)
        if isinstance(power_mw, (int, float)):
            self.add(gpu(i, "power_w"), round(power_mw / 1000.0, 1))
        util = c("nvmlDeviceGetUtilizationRates", h)
        util_gpu = getattr(util, "gpu", None) if util is not _MISSING else None
        if isinstance(util_gpu, int):
            self.add(gpu(i, "utilization_pct"), util_gpu)
        reasons = self.first(
            i,
            h,
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        )
        if isinstance(reasons, int):
            self.add(gpu(i, "throttle_reasons"), decode_throttle_reasons(reasons))
        self._processes(i, h)

    def _retired_pages(self, i: int, h: Any) -> None:
        single = self.call("nvmlDeviceGetRetiredPages", h, _RETIRE_SINGLE_BIT, gpu_index=i)
        double = self.call("nvmlDeviceGetRetiredPages", h, _RETIRE_DOUBLE_BIT, gpu_index=i)
        pending = self.call("nvmlDeviceGetRetiredPagesPendingStatus", h, gpu_index=i)
        if single is _MISSING and double is _MISSING and pending is _MISSING:
            return
        self.add(
            gpu(i, "retired_pages"),
            {
                "single_bit": len(single) if isinstance(single, list) else None,
                "double_bit": len(double) if isinstance(double, list) else None,
                "pending": (int(pending) == _ENABLED) if isinstance(pending, int) else None,
            },
        )

    def _remapped_rows(self, i: int, h: Any) -> None:
        rows = self.call("nvmlDeviceGetRemappedRows", h, gpu_index=i)
        if isinstance(rows, (list, tuple)) and len(rows) == 4:
            corr, unc, pending, failed = (int(v) for v in rows)
            self.add(
                gpu(i, "remapped_rows"),
                {
                    "correctable": corr,
                    "uncorrectable": unc,
                    "pending": bool(pending),
                    "failed": bool(failed),
                },
            )

    def _processes(self, i: int, h: Any) -> None:
        found: dict[int, dict[str, Any]] = {}
        seen_any = False
        for kind, fns in (
            (
                "compute",
                (
                    "nvmlDeviceGetComputeRunningProcesses_v3",
                    "nvmlDeviceGetComputeRunningProcesses_v2",
                ),
            ),
            (
                "graphics",
                (
                    "nvmlDeviceGetGraphicsRunningProcesses_v3",
                    "nvmlDeviceGetGraphicsRunningProcesses_v2",
                ),
            ),
        ):
            procs = self.first(i, h, *fns)
            if not isinstance(procs, list):
                continue
            seen_any = True
            for p in procs:
                pid = getattr(p, "pid", None)
                if not isinstance(pid, int):
                    continue
                used = getattr(p, "usedGpuMemory", None)
                used_mib = (
                    used // _MIB if isinstance(used, int) and used != ULL_NOT_AVAILABLE else None
                )
                entry = found.get(pid)
                if entry is None:
                    found[pid] = {"pid": pid, "used_mib": used_mib, "kind": kind}
                else:  # the same process doing both: NVML reports its memory in each list
                    if entry["kind"] != kind:
                        entry["kind"] = "compute+graphics"
                    if used_mib is not None:
                        entry["used_mib"] = max(entry["used_mib"] or 0, used_mib)
        if not seen_any:
            return
        for entry in found.values():
            self.current = f"process lookup for pid {entry['pid']} on GPU {i}"
            entry.update(self._describe_process(entry["pid"]))
        ordered = sorted(
            found.values(),
            key=lambda e: (-(e["used_mib"] if e["used_mib"] is not None else -1), e["pid"]),
        )
        self.add(gpu(i, "processes"), ordered)

    def _describe_process(self, pid: int) -> dict[str, Any]:
        try:
            info = self.info(pid)
        except Exception as exc:  # a provider must not fail the probe
            log.debug("process info for %d: %s", pid, exc, exc_info=True)
            info = None
        out: dict[str, Any] = {
            "name": info.name if info else None,
            "user": info.username if info else None,
            "cmdline": list(info.cmdline) if info and info.cmdline is not None else None,
            "is_jupyter_kernel": False,
            "kernel_id": None,
            "notebook_server": None,
            "notebook_path": None,
        }
        kernel = parse_kernel_cmdline(info.cmdline if info else None)
        if kernel is None:
            return out
        out["is_jupyter_kernel"] = True
        out["kernel_id"] = kernel.kernel_id
        try:
            where = self.lookup(pid, kernel.kernel_id)
        except Exception as exc:  # nor a notebook lookup
            log.debug("notebook lookup for kernel pid %d: %s", pid, exc, exc_info=True)
            where = KernelLocation()
        out["notebook_server"] = where.notebook_server
        out["notebook_path"] = where.notebook_path
        return out


def _timeout_result(
    source: str, read: list[Fact], stuck: str, timeout_s: float, started: float, earlier: bool
) -> ProbeResult:
    log.warning("NVML did not answer within %.3g s (stuck in %s)", timeout_s, stuck)
    facts = [f for f in read if not f.name.startswith("nvml.")]
    facts.append(Fact("nvml.status", "timeout", source))
    if earlier:
        error = f"an earlier probe is still waiting for {stuck}"
    else:
        error = f"no answer from {stuck} after {timeout_s:g} s"
    facts.append(Fact("nvml.error", error, source))
    return ProbeResult(
        probe=PROBE,
        status=ProbeStatus.TIMEOUT,
        facts=tuple(facts),
        message=(
            f"NVML stopped answering ({error}). A GPU may have fallen off the bus or the "
            "driver is wedged: look for Xid errors in `sudo dmesg | grep -i xid`; a reboot is "
            "usually needed."
        ),
        duration_s=time.monotonic() - started,
    )


def live_kernel_lookup(info: ProcessInfoProvider) -> KernelLookup:
    """Jupyter's runtime files and REST API, asked about the kernels among ``info``'s processes."""

    def lookup(pid: int, kernel_id: str | None) -> KernelLocation:
        return locate_kernel(pid, kernel_id, info=info)

    return lookup


def collect(
    nvml: Any = None,
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    process_info_provider: ProcessInfoProvider | None = None,
    kernel_lookup: KernelLookup | None = None,
    source: str | None = None,
) -> ProbeResult:
    """Read driver, GPU and GPU-process facts through NVML.

    Absent hardware is a status, never an exception: no NVML library -> ABSENT
    (``nvml.status`` 'library_not_found'), driver not loaded -> ABSENT, driver/library version
    mismatch -> ERROR, no permission -> DENIED, GPU lost -> ERROR. Fields a GPU does not
    support are left out (unknown).

    Args:
        nvml: an object with the pynvml function interface: None for the live pynvml module,
            a :class:`ReplayNvml` to replay a snapshot, a :class:`RecordingNvml` to record.
        timeout_s: give up waiting after this long and return TIMEOUT (NVML can hang when a
            GPU falls off the bus); the stuck call is left in a daemon thread. None waits.
        process_info_provider: pid -> :class:`ProcInfo`; psutil live, the snapshot's table
            when ``nvml`` is a :class:`ReplayNvml`.
        kernel_lookup: (pid, kernel id) -> notebook server and path; Jupyter's runtime files
            and REST API live, the snapshot's table on replay.
        source: the facts' source; 'nvml' live, 'nvml-snapshot:<file>' on replay.

    Returns:
        The probe result (probe 'nvml'). On TIMEOUT it holds the facts read before the stall;
        while that call stays stuck, later calls with the same ``nvml`` object return TIMEOUT
        at once instead of queueing another thread behind it.

    Raises:
        Nothing for machine states: NVML errors, a hang, a missing pynvml and unexpected
        exceptions inside the probe all come back as a status with a message.
    """
    started = time.monotonic()
    try:
        errors = load_pynvml()
    except ImportError as exc:
        return ProbeResult(
            probe=PROBE,
            status=ProbeStatus.ABSENT,
            facts=(
                Fact("nvml.status", "library_not_found", source or PROBE),
                Fact("nvml.error", f"pynvml is not importable: {exc}", source or PROBE),
            ),
            message="The nvidia-ml-py package is not installed, so no GPU could be checked.",
            duration_s=time.monotonic() - started,
        )
    if nvml is None:
        nvml = errors
    replayed = nvml.snapshot if isinstance(nvml, ReplayNvml) else None
    if source is None:
        source = f"nvml-snapshot:{replayed.name}" if replayed is not None else PROBE
    info = process_info_provider or (replayed.process_info if replayed else process_info)
    if kernel_lookup is None:
        kernel_lookup = replayed.kernel_lookup if replayed else live_kernel_lookup(info)
    session = _Session(nvml, errors, source, info, kernel_lookup)

    if timeout_s is None:
        session.run()
    else:
        earlier = stuck_in(nvml)
        if earlier is not None:
            # A thread is still inside NVML from an earlier probe: another would just pile up
            # behind the same driver lock. Report the stall again instead.
            return _timeout_result(source, [], earlier, timeout_s, started, True)
        worker = threading.Thread(target=session.run, name="tfdoctor-nvml-probe", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            remember_stuck(nvml, worker, session)
            return _timeout_result(
                source, session.facts, session.current, timeout_s, started, False
            )
    return ProbeResult(
        probe=PROBE,
        status=session.status,
        facts=tuple(session.facts),
        message=session.message,
        duration_s=time.monotonic() - started,
    )
