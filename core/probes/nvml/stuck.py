"""Probe threads stuck inside NVML, remembered so that the next probe does not queue behind."""

from __future__ import annotations

import threading
from typing import Any, Protocol


class InFlight(Protocol):
    """A probe's NVML conversation, as far as the registry needs it."""

    current: str  # the NVML call it is in


# id(nvml object) -> (the object, its stuck probe thread, that thread's session)
_STUCK: dict[int, tuple[Any, threading.Thread, InFlight]] = {}
_STUCK_LOCK = threading.Lock()


def stuck_in(nvml: Any) -> str | None:
    """The call an earlier probe through ``nvml`` is still stuck in, or None.

    A probe thread that has returned since is forgotten.
    """
    with _STUCK_LOCK:
        earlier = _STUCK.get(id(nvml))
        if earlier is not None and not earlier[1].is_alive():
            del _STUCK[id(nvml)]
            earlier = None
    return None if earlier is None else earlier[2].current


def remember_stuck(nvml: Any, worker: threading.Thread, session: InFlight) -> None:
    """Remember that ``worker`` is stuck in a call through ``nvml`` (both kept alive, so that
    the id stays theirs)."""
    with _STUCK_LOCK:
        _STUCK[id(nvml)] = (nvml, worker, session)
