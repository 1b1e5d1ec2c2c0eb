"""The bounded event buffer: readers get what came after their cursor, oldest first, and see
a gap (not an error) when they fell behind."""

from __future__ import annotations

import threading

from tfdoctor.core.events import EventBuffer


def test_since_returns_what_came_after_the_cursor_and_shows_a_gap() -> None:
    buf: EventBuffer[str] = EventBuffer(maxlen=5)
    assert buf.since(0) == []
    seqs = [buf.append(f"e{i}") for i in range(12)]
    assert seqs == list(range(1, 13))
    assert buf.since(9) == [(10, "e9"), (11, "e10"), (12, "e11")]
    assert buf.since(12) == [] and buf.since(99) == []
    # a reader that fell behind gets what is left; the jump from its cursor is the gap
    assert [s for s, _ in buf.since(2)] == [8, 9, 10, 11, 12]
    assert [s for s, _ in buf.since(-3)] == [8, 9, 10, 11, 12]


def test_writers_on_threads_and_a_reader_see_every_item_once() -> None:
    buf: EventBuffer[int] = EventBuffer(maxlen=100_000)

    def write(base: int) -> None:
        for i in range(5000):
            buf.append(base + i)

    threads = [threading.Thread(target=write, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    seen: list[int] = []
    cursor = 0
    while any(t.is_alive() for t in threads) or cursor < buf.last_seq:
        for seq, item in buf.since(cursor):
            assert seq == cursor + 1  # consecutive: nothing skipped, nothing twice
            cursor = seq
            seen.append(item)
    assert sorted(seen) == sorted(k * 10_000 + i for k in range(4) for i in range(5000))
