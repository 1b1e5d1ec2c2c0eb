"""The one module that imports pynvml: loading it, its error classes, and NVML's values."""

from __future__ import annotations

from typing import Any

ULL_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE for unsigned long long

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


def load_pynvml() -> Any:
    """The pynvml module.

    Raises:
        ImportError: nvidia-ml-py (pynvml) is not installed.
    """
    import pynvml

    return pynvml


def live_api() -> Any:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        return load_pynvml()
    except ImportError:
        return None


def error_types(api: Any) -> tuple[type[BaseException], ...]:
    """The exceptions by which ``api`` (pynvml, or an object with its interface) says that NVML
    could not answer: ``NVMLError`` and its subclasses, and ``NVMLLibraryMismatchError`` in newer
    pynvml. Empty for an object that has neither."""
    found = (getattr(api, "NVMLError", None), getattr(api, "NVMLLibraryMismatchError", None))
    return tuple(t for t in found if isinstance(t, type) and issubclass(t, BaseException))


def safe_str(exc: BaseException) -> str:
    """An exception's message; its class name when even str() fails on it."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - str() of any exception may raise anything
        return type(exc).__name__


def as_text(value: Any) -> str:
    """An NVML string (bytes in older pynvml) as text."""
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
