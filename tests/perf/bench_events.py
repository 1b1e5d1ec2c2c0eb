"""How a reader's cost grows with the history kept: `EventBuffer.since` for the newest item
with 100 items kept vs 100,000 (a monitor or the Reproduce page after an hour at 10-200 Hz).
Target: the ratio stays under 3 (the cost of a read does not grow with the history).

Run: .venv/bin/python tests/perf/bench_events.py
"""

from __future__ import annotations

import statistics
import sys
import time

from tfdoctor.core.events import EventBuffer

TARGET_RATIO = 3.0


def per_read_us(kept: int, reads: int = 5000) -> float:
    buf: EventBuffer[int] = EventBuffer(maxlen=kept)
    for i in range(kept):
        buf.append(i)
    t0 = time.perf_counter()
    for i in range(reads):
        buf.append(i)
        buf.since(buf.last_seq - 1)
    return (time.perf_counter() - t0) / reads * 1e6


def main() -> int:
    small, large = [], []
    for _ in range(5):  # alternating, side by side: the machine is shared and noisy
        small.append(per_read_us(100))
        large.append(per_read_us(100_000))
    s, big = statistics.median(small), statistics.median(large)
    ratio = big / s
    print(f"append + read of the newest item: {s:.2f} us with 100 kept, {big:.2f} us with "
          f"100,000 kept: ratio {ratio:.2f} (target < {TARGET_RATIO})")  # fmt: skip
    return 0 if ratio < TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
