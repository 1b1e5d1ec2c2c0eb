"""A bounded, thread-safe event buffer with sequence numbers: producers append, readers poll."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Iterable
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Event(NamedTuple):
    """One thing that happened during long work: its kind and payload (the buffer numbers it).

    A tuple, so `for seq, (kind, data) in buffer.since(n)` reads it too.
    """

    kind: str
    data: Any = None


class EventBuffer(Generic[T]):
    """Append from any thread; read with `since(seq)` from another (the GUI's QTimer).

    Bounded: when full the oldest items go, and `since` tells the reader how many it missed
    through the gap in sequence numbers.
    """

    def __init__(self, maxlen: int = 10_000) -> None:
        self._items: collections.deque[tuple[int, T]] = collections.deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self._next = 1

    def append(self, item: T) -> int:
        with self._lock:
            seq = self._next
            self._next += 1
            self._items.append((seq, item))
            return seq

    def extend(self, items: Iterable[T]) -> int:
        seq = 0
        for item in items:
            seq = self.append(item)
        return seq

    def since(self, seq: int) -> list[tuple[int, T]]:
        """Items with a sequence number greater than `seq`, oldest first."""
        with self._lock:
            if not self._items or self._items[-1][0] <= seq:
                return []
            # sequence numbers are consecutive: the newest (last - seq) items are the answer,
            # taken from the right end so that a reader's cost does not grow with the history
            wanted = min(self._items[-1][0] - seq, len(self._items))
            out = list(itertools.islice(reversed(self._items), wanted))
            out.reverse()
            return out

    @property
    def last_seq(self) -> int:
        with self._lock:
            return self._next - 1
