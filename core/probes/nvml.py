"""GPU facts from NVML, live or recorded and replayed; the only module that imports pynvml."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tfdoctor.core.factnames import gpu, is_known
from tfdoctor.core.model import Fact, FactValue, ProbeResult, ProbeStatus
from tfdoctor.core.probes.jupyter import (
    KernelLocation,
    KernelLookup,
    ProcessInfoProvider,
    ProcInfo,
    locate_kernel,
    parse_kernel_cmdline,
    process_info,
)

log = logging.getLogger(__name__)

PROBE = "nvml"
SCHEMA = 1
KIND = "tfdoctor-nvml-snapshot"
DEFAULT_TIMEOUT_S = 10.0

_MIB = 1024 * 1024
_ULL_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE for unsigned long long
# Constants from nvml.h, spelled out so that replay does not depend on the pynvml version.
_TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
_MEMORY_ERROR_UNCORRECTED = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_VOLATILE_ECC = 0  # NVML_VOLATILE_ECC
_RETIRE_SINGLE_BIT = 0  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
_RETIRE_DOUBLE_BIT = 1  # NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
_ENABLED = 1  # NVML_FEATURE_ENABLED

# nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (same values under both names).
THROTTLE_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal"),
    (0x040, "hw_thermal"),
    (0x080, "hw_power_brake"),
    (0x100, "display_clocks"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)

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


class SnapshotError(ValueError):
    """A file is not a usable tfdoctor NVML snapshot; the message says why, in one line."""


# --------------------------------------------------------------------------------------------
# Values as JSON and back: device handles become their index, structs become {"_struct": ...}.


@dataclass(frozen=True)
class ReplayHandle:
    """A device handle during replay: only its NVML index survives recording."""

    index: int


class ReplayStruct:
    """A replayed NVML struct: plain attributes named like the ctypes fields."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"ReplayStruct({inner})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplayStruct) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]


def _value_from_json(data: Any) -> Any:
    if isinstance(data, list):
        return [_value_from_json(v) for v in data]
    if isinstance(data, dict):
        if "_handle" in data and len(data) == 1:
            return ReplayHandle(int(data["_handle"]))
        if "_struct" in data and len(data) == 1:
            return ReplayStruct(**{k: _value_from_json(v) for k, v in data["_struct"].items()})
        return {k: _value_from_json(v) for k, v in data.items()}
    return data


def _call_key(fn: str, args: Any, kwargs: Any = None) -> str:
    return json.dumps([fn, args, kwargs or {}], sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# Snapshots


@dataclass(frozen=True)
class Snapshot:
    """A recorded NVML session plus what replay needs to name the processes it saw.

    ``nvml_calls`` entries are ``{"fn", "args", "result"}`` or ``{"fn", "args", "error":
    {"class", "value", "message"}}``; an entry still marked ``"hung": true`` was in flight when
    the recording stopped and blocks on replay (a stall reproduced).
    """

    nvml_calls: tuple[dict[str, Any], ...]
    processes: Mapping[int, ProcInfo] = field(default_factory=dict)
    jupyter: Mapping[int, KernelLocation] = field(default_factory=dict)
    recorded_at: str = ""
    host: Mapping[str, Any] = field(default_factory=dict)
    provenance: str = ""
    name: str = "memory"

    def process_info(self, pid: int) -> ProcInfo | None:
        """Process info as recorded (a :data:`ProcessInfoProvider` for replay)."""
        return self.processes.get(pid)

    def kernel_lookup(self, pid: int, kernel_id: str | None) -> KernelLocation:
        """A kernel's notebook server and path as recorded; unknown when not recorded."""
        return self.jupyter.get(pid, KernelLocation())

    def to_json(self) -> dict[str, Any]:
        """The snapshot file's content."""
        return {
            "schema": SCHEMA,
            "kind": KIND,
            "recorded_at": self.recorded_at,
            "host": dict(self.host),
            "provenance": self.provenance,
            "nvml_calls": [dict(c) for c in self.nvml_calls],
            "processes": {str(pid): p.to_json() for pid, p in sorted(self.processes.items())},
            "jupyter": {
                str(pid): {"notebook_server": k.notebook_server, "notebook_path": k.notebook_path}
                for pid, k in sorted(self.jupyter.items())
            },
        }

    @classmethod
    def from_json(cls, data: Any, name: str = "memory") -> Snapshot:
        """Build a snapshot from parsed JSON.

        Raises:
            SnapshotError: the data is not a tfdoctor NVML snapshot of a schema we read.
        """
        if not isinstance(data, dict):
            raise SnapshotError(
                f"{name}: not a tfdoctor NVML snapshot (top level is not an object)"
            )
        if data.get("kind") != KIND:
            raise SnapshotError(
                f"{name}: not a tfdoctor NVML snapshot (kind is {data.get('kind')!r}, "
                f"expected {KIND!r})"
            )
        if data.get("schema") != SCHEMA:
            raise SnapshotError(
                f"{name}: snapshot schema {data.get('schema')!r} is not supported "
                f"(this tfdoctor reads schema {SCHEMA})"
            )
        calls = data.get("nvml_calls")
        if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("fn"), str) and isinstance(c.get("args"), list)
            for c in calls
        ):
            raise SnapshotError(f"{name}: 'nvml_calls' must be a list of {{fn, args, ...}} objects")
        try:
            processes = {
                int(pid): ProcInfo.from_json(int(pid), info)
                for pid, info in (data.get("processes") or {}).items()
            }
            jupyter = {
                int(pid): KernelLocation(
                    notebook_server=loc.get("notebook_server"),
                    notebook_path=loc.get("notebook_path"),
                )
                for pid, loc in (data.get("jupyter") or {}).items()
            }
        except (AttributeError, TypeError, ValueError) as exc:
            raise SnapshotError(
                f"{name}: malformed 'processes' or 'jupyter' table ({exc})"
            ) from exc
        host = data.get("host")
        return cls(
            nvml_calls=tuple(calls),
            processes=processes,
            jupyter=jupyter,
            recorded_at=str(data.get("recorded_at", "")),
            host=host if isinstance(host, dict) else {},
            provenance=str(data.get("provenance", "")),
            name=name,
        )


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot file written by :func:`capture` (or built by hand in that format).

    Args:
        path: the JSON file.

    Returns:
        The snapshot, named after the file.

    Raises:
        SnapshotError: the file cannot be read, is not JSON, is not an NVML snapshot
            (wrong ``kind``) or has a schema this version does not read.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{p.name}: cannot read the snapshot ({exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"{p.name}: not a JSON file ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc
    return Snapshot.from_json(data, name=p.name)


def _dumps_snapshot(data: Mapping[str, Any]) -> str:
    """JSON with one NVML call / process per line: diffable and readable by hand."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ["{"]
    keys = list(data)
    for n, key in enumerate(keys):
        value = data[key]
        end = "," if n < len(keys) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f" {one(key)}: [")
            lines += [
                f"  {one(v)}" + ("," if j < len(value) - 1 else "") for j, v in enumerate(value)
            ]
            lines.append(f" ]{end}")
        elif isinstance(value, dict) and value and key != "host":
            lines.append(f" {one(key)}: {{")
            items = list(value.items())
            lines += [
                f"  {one(k)}: {one(v)}" + ("," if j < len(items) - 1 else "")
                for j, (k, v) in enumerate(items)
            ]
            lines.append(f" }}{end}")
        else:
            lines.append(f" {one(key)}: {one(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_snapshot(snapshot: Snapshot, path: str | os.PathLike[str]) -> None:
    """Write a snapshot atomically: a temp file beside it, fsync, then rename over.

    Args:
        snapshot: what to write.
        path: destination; its folder must exist.

    Raises:
        OSError: the folder is missing or not writable, or the disk is full. The destination
            is left as it was.
    """
    dest = Path(path)
    text = _dumps_snapshot(snapshot.to_json())
    try:
        mode = dest.stat().st_mode & 0o777  # keep the mode of the file we replace
    except OSError:
        mode = 0o644  # mkstemp's 0600 would hide a snapshot meant for sharing
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable where the OS allows it
        dir_fd = os.open(dest.parent or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# --------------------------------------------------------------------------------------------
# Replay and record: objects with the pynvml function interface.


def _pynvml() -> Any:
    import pynvml

    return pynvml


class ReplayNvml:
    """Answers pynvml calls from a snapshot, raising the real pynvml exceptions it recorded.

    A call that is not in the snapshot raises ``NVMLError_NotSupported``, so snapshots made
    before :func:`collect` learned a new call still replay. Repeated calls with the same
    arguments get the recorded answers in order, then the last one again. A call recorded as
    in flight (``"hung": true``) blocks until :meth:`release`.

    Raises:
        ImportError: on construction, when nvidia-ml-py (pynvml) is not installed: replay
            raises its real exception classes.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._nvml = _pynvml()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._answers: dict[str, list[dict[str, Any]]] = {}
        for entry in snapshot.nvml_calls:
            key = _call_key(entry["fn"], entry["args"], entry.get("kwargs"))
            self._answers.setdefault(key, []).append(entry)
        self._served: dict[str, int] = {}

    def release(self) -> None:
        """Let replayed hung calls return (they raise ``NVMLError_Timeout``)."""
        self._release.set()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name.startswith("nvml"):
            return functools.partial(self._call, name)
        # Constants and exception classes come from the real module.
        return getattr(self._nvml, name)

    def _call(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        key = _call_key(fn, [_arg_to_json(a, None) for a in args], _kwargs_json(kwargs))
        with self._lock:
            entries = self._answers.get(key)
            if not entries:
                raise self._nvml.NVMLError(self._nvml.NVML_ERROR_NOT_SUPPORTED)
            n = self._served.get(key, 0)
            self._served[key] = n + 1
            entry = entries[min(n, len(entries) - 1)]
        if entry.get("hung"):
            log.debug("replaying a hung %s", fn)
            self._release.wait()
            raise self._nvml.NVMLError(self._nvml.NVML_ERROR_TIMEOUT)
        if "error" in entry:
            raise self._error(entry["error"])
        return _value_from_json(entry.get("result"))

    def _error(self, err: Mapping[str, Any]) -> BaseException:
        value = err.get("value")
        if isinstance(value, int):
            exc: BaseException = self._nvml.NVMLError(value)
            return exc
        cls = getattr(self._nvml, str(err.get("class", "")), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(str(err.get("message", "")))
        return RuntimeError(str(err.get("message", "recorded NVML error")))


def _kwargs_json(kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    return {k: _arg_to_json(v, None) for k, v in kwargs.items()} if kwargs else None


def _arg_to_json(value: Any, handles: Callable[[Any], int | None] | None) -> Any:
    if isinstance(value, ReplayHandle):
        return {"_handle": value.index}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [_arg_to_json(v, handles) for v in value]
    if handles is not None:
        idx = handles(value)
        if idx is not None:
            return {"_handle": idx}
    return repr(value)


def _value_to_json(value: Any, handles: Callable[[Any], int | None]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, ReplayHandle):
        return {"_handle": value.index}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [_value_to_json(v, handles) for v in value]
    if isinstance(value, dict):
        return {str(k): _value_to_json(v, handles) for k, v in value.items()}
    if isinstance(value, ctypes.Structure):
        names = [f[0] for f in getattr(value, "_fields_", ())]
        return {"_struct": {n: _value_to_json(getattr(value, n), handles) for n in names}}
    if isinstance(value, ctypes._Pointer):  # a device handle (c_nvmlDevice_t)
        idx = handles(value)
        return {"_handle": idx} if idx is not None else repr(value)
    if hasattr(value, "__dict__"):  # pynvml's nvmlFriendlyObject, or a replayed struct
        return {"_struct": {k: _value_to_json(v, handles) for k, v in vars(value).items()}}
    return repr(value)


class RecordingNvml:
    """Wraps an object with the pynvml interface and logs every nvml* call it forwards.

    Each call is stored as ``{"fn", "args", "result"}`` or ``{"fn", "args", "error"}`` with
    device handles replaced by their index, ready for :class:`ReplayNvml`.

    Raises:
        Whatever the wrapped call raises (an ``NVMLError``), unchanged, after logging it.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._calls: list[dict[str, Any]] = []
        self._handle_ids: dict[int, int] = {}
        self._handle_refs: list[Any] = []  # keeps handles alive so their id() stays unique

    @property
    def calls(self) -> list[dict[str, Any]]:
        """A copy of the calls so far; one still running is marked ``"hung": true``."""
        with self._lock:
            return [dict(c) for c in self._calls]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._inner, name)
        if name.startswith("nvml") and callable(attr):
            return functools.partial(self._call, name, attr)
        return attr

    def _handle_index(self, value: Any) -> int | None:
        if isinstance(value, ReplayHandle):
            return value.index
        with self._lock:
            idx = self._handle_ids.get(id(value))
        if idx is not None or not isinstance(value, ctypes._Pointer):
            return idx
        try:  # a handle we did not see created (by UUID or bus id): ask, unrecorded
            found = int(self._inner.nvmlDeviceGetIndex(value))
        except Exception:
            return None
        self._remember(value, found)
        return found

    def _remember(self, handle: Any, index: int) -> None:
        with self._lock:
            self._handle_ids[id(handle)] = index
            self._handle_refs.append(handle)

    def _call(self, fn_name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        entry: dict[str, Any] = {
            "fn": fn_name,
            "args": [_arg_to_json(a, self._handle_index) for a in args],
            "hung": True,
        }
        if kwargs:
            entry["kwargs"] = _kwargs_json(kwargs)
        with self._lock:
            self._calls.append(entry)
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            value = getattr(exc, "value", None)
            with self._lock:
                entry.pop("hung", None)
                entry["error"] = {
                    "class": type(exc).__name__,
                    "value": value if isinstance(value, int) else None,
                    "message": _safe_str(exc),
                }
            raise
        if fn_name == "nvmlDeviceGetHandleByIndex" and args and isinstance(args[0], int):
            self._remember(result, args[0])
        recorded = _value_to_json(result, self._handle_index)
        with self._lock:
            entry.pop("hung", None)
            entry["result"] = recorded
        return result


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


# --------------------------------------------------------------------------------------------
# Collection


class _Missing:
    """The sentinel for 'NVML could not tell' (unknown, not false)."""


_MISSING = _Missing()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the clock throttle (clock event) reasons set in an NVML bitmask.

    Args:
        mask: ``nvmlDeviceGetCurrentClocksEventReasons`` / ``...ThrottleReasons`` value.

    Returns:
        Reason names in bit order (``['gpu_idle']``); unknown bits as ``'bit_0x800'``.
    """
    names = [name for bit, name in THROTTLE_REASON_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASON_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


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
        mismatch = getattr(errors, "NVMLLibraryMismatchError", None)  # newer pynvml only
        self._field_errors: tuple[type[BaseException], ...] = (errors.NVMLError,) + (
            (mismatch,) if isinstance(mismatch, type) else ()
        )

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
                self.fail("gpu_lost", f"{_safe_str(exc)}{where}")
            return _MISSING
        except self._field_errors as exc:
            # NotSupported / NoPermission / FunctionNotFound and friends: unknown, not fatal.
            log.debug("%s: %s", self.current, _safe_str(exc))
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
            self.fail("library_not_found", _safe_str(exc))
        except e.NVMLError_DriverNotLoaded as exc:
            self.fail("driver_not_loaded", _safe_str(exc))
        except e.NVMLError_LibRmVersionMismatch as exc:
            self.fail("version_mismatch", _safe_str(exc))
        except e.NVMLError_NoPermission as exc:
            self.fail("no_permission", _safe_str(exc))
        except e.NVMLError_GpuIsLost as exc:
            self.fail("gpu_lost", _safe_str(exc))
        except e.NVMLError as exc:
            self.fail("error", _safe_str(exc), f"NVML could not start: {_safe_str(exc)}.")
        else:
            try:
                self._query()
            finally:
                self.current = "nvmlShutdown"
                try:
                    self.nvml.nvmlShutdown()
                except e.NVMLError as exc:
                    log.debug("nvmlShutdown: %s", _safe_str(exc))
        self.add("nvml.status", self.nvml_status)

    def _query(self) -> None:
        driver = self.call("nvmlSystemGetDriverVersion")
        if driver is not _MISSING:
            self.add("nvidia.driver_version", _text(driver))
        cuda = self.call("nvmlSystemGetCudaDriverVersion_v2")
        if cuda is _MISSING:
            cuda = self.call("nvmlSystemGetCudaDriverVersion")
        if isinstance(cuda, int) and cuda > 0:
            self.add("nvidia.cuda_driver_version", f"{cuda // 1000}.{(cuda % 1000) // 10}")
        version = self.call("nvmlSystemGetNVMLVersion")
        if version is not _MISSING:
            self.add("nvml.version", _text(version))
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
                text += f"; driver {_text(driver)}"
                if isinstance(cuda, int) and cuda > 0:
                    text += f" supports CUDA up to {cuda // 1000}.{(cuda % 1000) // 10}"
            self.message = text + "."

    def _device(self, i: int, h: Any) -> None:
        c = functools.partial(self.call, gpu_index=i)
        name = c("nvmlDeviceGetName", h)
        if name is not _MISSING:
            self.add(gpu(i, "name"), _text(name))
        uuid = c("nvmlDeviceGetUUID", h)
        if uuid is not _MISSING:
            self.add(gpu(i, "uuid"), _text(uuid))
        pci = c("nvmlDeviceGetPciInfo", h)
        bus_id = getattr(pci, "busId", None) if pci is not _MISSING else None
        if bus_id:
            self.add(gpu(i, "pci_bus_id"), _text(bus_id))
        cc = c("nvmlDeviceGetCudaComputeCapability", h)
        if isinstance(cc, (list, tuple)) and len(cc) == 2:
            self.add(gpu(i, "compute_capability"), f"{int(cc[0])}.{int(cc[1])}")
        mem = c("nvmlDeviceGetMemoryInfo", h)
        if mem is not _MISSING:
            for attr in ("total", "used", "free"):
                value = getattr(mem, attr, None)
                if isinstance(value, int):
                    self.add(gpu(i, f"memory_{attr}_mib"), value // _MIB)
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
                    used // _MIB if isinstance(used, int) and used != _ULL_NOT_AVAILABLE else None
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
            log.debug("process info for %d: %s", pid, exc)
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
        except Exception as exc:
            log.debug("notebook lookup for kernel pid %d: %s", pid, exc)
            where = KernelLocation()
        out["notebook_server"] = where.notebook_server
        out["notebook_path"] = where.notebook_path
        return out


# id(nvml object) -> (the object, its stuck probe thread, that thread's session)
_STUCK: dict[int, tuple[Any, threading.Thread, _Session]] = {}
_STUCK_LOCK = threading.Lock()


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


def _live_kernel_lookup(info: ProcessInfoProvider) -> KernelLookup:
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
        errors = _pynvml()
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
        kernel_lookup = replayed.kernel_lookup if replayed else _live_kernel_lookup(info)
    session = _Session(nvml, errors, source, info, kernel_lookup)

    if timeout_s is None:
        session.run()
    else:
        with _STUCK_LOCK:
            earlier = _STUCK.get(id(nvml))
            if earlier is not None and not earlier[1].is_alive():
                del _STUCK[id(nvml)]
                earlier = None
        if earlier is not None:
            # A thread is still inside NVML from an earlier probe: another would just pile up
            # behind the same driver lock. Report the stall again instead.
            return _timeout_result(source, [], earlier[2].current, timeout_s, started, True)
        worker = threading.Thread(target=session.run, name="tfdoctor-nvml-probe", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            with _STUCK_LOCK:
                _STUCK[id(nvml)] = (nvml, worker, session)
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


# --------------------------------------------------------------------------------------------
# Record and replay entry points


class _RecordingProcesses:
    """Wraps the process-info provider and kernel lookup, keeping what they answered."""

    def __init__(self, info: ProcessInfoProvider, lookup: KernelLookup | None) -> None:
        self._info = info
        self._lookup = lookup or _live_kernel_lookup(self.info)
        self.processes: dict[int, ProcInfo] = {}
        self.jupyter: dict[int, KernelLocation] = {}

    def info(self, pid: int) -> ProcInfo | None:
        found = self._info(pid)
        if found is not None:
            self.processes[pid] = found
        return found

    def lookup(self, pid: int, kernel_id: str | None) -> KernelLocation:
        where = self._lookup(pid, kernel_id)
        if where.notebook_server is not None or where.notebook_path is not None:
            self.jupyter[pid] = where
        return where


def _host_info() -> dict[str, Any]:
    # No hostname or user name: snapshots get shared in bug reports.
    out: dict[str, Any] = {
        "system": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
    try:
        from importlib.metadata import version

        out["nvidia_ml_py"] = version("nvidia-ml-py")
    except Exception:
        out["nvidia_ml_py"] = None
    return out


def record(
    nvml: Any = None,
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    process_info_provider: ProcessInfoProvider | None = None,
    kernel_lookup: KernelLookup | None = None,
    provenance: str = "",
) -> tuple[ProbeResult, Snapshot]:
    """Run :func:`collect` while recording every NVML call and process lookup it makes.

    Args:
        nvml: what to record: None for live pynvml, or any object with its interface (a
            :class:`ReplayNvml`, to re-record a snapshot).
        timeout_s: as for :func:`collect`; a call still running is recorded as hung.
        process_info_provider: as for :func:`collect`.
        kernel_lookup: as for :func:`collect`.
        provenance: how this recording was made, stored in the snapshot.

    Returns:
        The probe result and the snapshot that replays to the same facts.

    Raises:
        ImportError: nvidia-ml-py (pynvml) is not installed.
    """
    inner = _pynvml() if nvml is None else nvml
    replayed = inner.snapshot if isinstance(inner, ReplayNvml) else None
    info = process_info_provider or (replayed.process_info if replayed else process_info)
    if kernel_lookup is None and replayed is not None:
        kernel_lookup = replayed.kernel_lookup
    recorder = RecordingNvml(inner)
    procs = _RecordingProcesses(info, kernel_lookup)
    result = collect(
        recorder,
        timeout_s=timeout_s,
        process_info_provider=procs.info,
        kernel_lookup=procs.lookup,
        source=f"nvml-snapshot:{replayed.name}" if replayed else PROBE,
    )
    snapshot = Snapshot(
        nvml_calls=tuple(recorder.calls),
        processes=dict(procs.processes),
        jupyter=dict(procs.jupyter),
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        host=_host_info(),
        provenance=provenance or "recorded live by tfdoctor.core.probes.nvml.capture",
    )
    return result, snapshot


def capture(
    path: str | os.PathLike[str],
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    provenance: str = "",
) -> ProbeResult:
    """Probe this machine's GPUs live and save the session as a replayable snapshot.

    Args:
        path: where to write the snapshot JSON (atomically).
        timeout_s: as for :func:`collect`.
        provenance: a note on the machine and why it was recorded, kept in the snapshot.

    Returns:
        The live probe result (also for a machine without NVIDIA driver: that is a snapshot
        worth having too).

    Raises:
        OSError: the snapshot could not be written (missing folder, permissions, disk full).
        ImportError: nvidia-ml-py (pynvml) is not installed.
    """
    result, snapshot = record(
        None,
        timeout_s=timeout_s,
        provenance="recorded live by tfdoctor.core.probes.nvml.capture on the machine described "
        "in 'host'" + (f": {provenance}" if provenance else ""),
    )
    save_snapshot(snapshot, path)
    log.info("NVML snapshot written to %s (%s)", path, result.status.value)
    return result


def collect_from_snapshot(
    snapshot: Snapshot | str | os.PathLike[str], *, timeout_s: float | None = DEFAULT_TIMEOUT_S
) -> ProbeResult:
    """Replay a snapshot through the same code as a live :func:`collect`.

    Args:
        snapshot: a :class:`Snapshot` or the path of a snapshot file.
        timeout_s: as for :func:`collect` (matters for snapshots of a hang).

    Returns:
        The probe result; facts carry the source 'nvml-snapshot:<file name>'.

    Raises:
        SnapshotError: the file is unreadable, not JSON, or not a supported snapshot.
    """
    snap = snapshot if isinstance(snapshot, Snapshot) else load_snapshot(snapshot)
    return collect(ReplayNvml(snap), timeout_s=timeout_s)


# --------------------------------------------------------------------------------------------
# Live sampling for telemetry: the same pynvml interface (live, replayed or recorded).


def live_api() -> Any:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        return _pynvml()
    except ImportError:
        return None


class GpuSampler:
    """Reads each GPU's memory, utilisation, temperature, power, throttle reasons, the VRAM
    of every process on it, and new Xid events, through a pynvml-like `api`.

    `open()` returns why NVML is unusable (no library, no driver), or None; `sample()` then
    never raises: a failing call leaves its field out. One thread must own an instance (the
    telemetry sampler's NVML thread): NVML calls can hang on a GPU that fell off the bus.
    """

    def __init__(self, api: Any) -> None:
        self.api = api
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
        except Exception as exc:
            return f"NVML could not start: {_safe_str(exc)}"
        self._open = True
        try:
            count = int(self.api.nvmlDeviceGetCount())
            for i in range(count):
                h = self.api.nvmlDeviceGetHandleByIndex(i)
                self.handles.append(h)
                name = self._get("nvmlDeviceGetName", h)
                self.names.append(_text(name) if name is not None else None)
                mem = self._get("nvmlDeviceGetMemoryInfo", h)
                self.totals.append(getattr(mem, "total", None) if mem is not None else None)
        except Exception as exc:
            self.close()
            return f"NVML could not list the GPUs: {_safe_str(exc)}"
        try:
            self._events = self._register_xid()
        except Exception:
            self._events = None
        return None

    def _register_xid(self) -> Any:
        es = self.api.nvmlEventSetCreate()
        xid = getattr(self.api, "nvmlEventTypeXidCriticalError", 8)
        for h in self.handles:
            try:
                self.api.nvmlDeviceRegisterEvents(h, xid, es)
            except Exception:  # not supported on this GPU / driver (e.g. WSL)
                log.debug("Xid events not supported on a GPU", exc_info=True)
        return es

    def _get(self, fn: str, *args: Any) -> Any:
        """api.fn(*args), or None when it fails or does not exist."""
        try:
            return getattr(self.api, fn)(*args)
        except Exception:
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
                    if (
                        isinstance(pid, int)
                        and isinstance(used, int)
                        and used != _ULL_NOT_AVAILABLE
                    ):
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
