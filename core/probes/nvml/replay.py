"""Objects with the pynvml interface that replay a snapshot or record a live session."""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfdoctor.core.probes.nvml.binding import error_types, load_pynvml, safe_str
from tfdoctor.core.probes.nvml.snapshot import Snapshot

log = logging.getLogger(__name__)


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
        self._nvml = load_pynvml()
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
        # Only a device handle may be asked for its index: libnvidia-ml dereferences whatever
        # it is given, and an event set passed as a device crashed a real driver (580.159).
        device_type = getattr(self._inner, "c_nvmlDevice_t", None)
        if not (isinstance(device_type, type) and isinstance(value, device_type)):
            return None
        unanswered: tuple[type[BaseException], ...] = (*error_types(self._inner), AttributeError)
        try:  # a handle we did not see created (by UUID or bus id): ask, unrecorded
            found = int(self._inner.nvmlDeviceGetIndex(value))
        except unanswered as exc:  # NVML could not tell (or this pynvml cannot ask)
            log.debug("nvmlDeviceGetIndex: %s", safe_str(exc))
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
                    "message": safe_str(exc),
                }
            raise
        if fn_name == "nvmlDeviceGetHandleByIndex" and args and isinstance(args[0], int):
            self._remember(result, args[0])
        recorded = _value_to_json(result, self._handle_index)
        with self._lock:
            entry.pop("hung", None)
            entry["result"] = recorded
        return result
