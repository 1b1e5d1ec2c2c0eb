"""Numbers read out of telemetry items (kind, item): the one place that knows their shape.

A "sample" item holds the machine (RAM, swap, each GPU) and the followed processes' RSS; a
"tf" item holds TensorFlow's allocator numbers per device. The plot, the verify comparison,
the telemetry rules and the verify summary all read them through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Item = tuple[str, dict[str, Any]]

WORKER_RSS, TF_IN_USE, GPU_USED = "Worker RSS", "TF in use", "GPU used"


def rss_bytes(sample: dict[str, Any]) -> float | None:
    """The followed processes' RSS, summed, or None when the sample has none."""
    rss = sample.get("rss")
    if not isinstance(rss, dict) or not rss:
        return None
    return float(sum(v for v in rss.values() if isinstance(v, (int, float))))


def gpu_used_bytes(sample: dict[str, Any]) -> float | None:
    """Memory used on every GPU, summed, or None without GPUs."""
    gpus = sample.get("gpus") or []
    if not gpus:
        return None
    return float(sum(int(g.get("used") or 0) for g in gpus))


def tf_bytes(item: dict[str, Any], key: str = "current") -> float | None:
    """TF's allocator `current` (in use) or `peak`, summed over devices; None without any."""
    mems = [v for k, v in item.items() if k != "t" and isinstance(v, dict)]
    if not mems:
        return None
    return float(sum(int(m.get(key) or 0) for m in mems))


def memory_series(
    items: Iterable[Item], since_t: float | None = None, until_t: float | None = None
) -> dict[str, tuple[list[float], list[float]]]:
    """Per-run memory series (times, values): worker RSS, TF in use, GPU used, optionally
    only between two times."""
    out: dict[str, tuple[list[float], list[float]]] = {}

    def put(name: str, t: float, v: float | None) -> None:
        if v is None:
            return
        xs, ys = out.setdefault(name, ([], []))
        xs.append(t)
        ys.append(v)

    for kind, item in items:
        t = item.get("t")
        if not isinstance(t, (int, float)):
            continue
        if (since_t is not None and t < since_t) or (until_t and t > until_t):
            continue
        if kind == "sample":
            put(WORKER_RSS, float(t), rss_bytes(item))
            put(GPU_USED, float(t), gpu_used_bytes(item))
        elif kind == "tf":
            put(TF_IN_USE, float(t), tf_bytes(item))
    return out
