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
GIB = float(1 << 30)
MIB = float(1 << 20)

# the plots' series (live, and a report's picture): id -> (legend name, colour, dashed)
STYLES: dict[str, tuple[str, str, bool]] = {
    "ram_used": ("System RAM used", "#1f77b4", False),
    "swap_used": ("Swap used", "#7f7f7f", False),
    "rss": ("Worker RSS", "#ff7f0e", False),
    "cgroup": ("Worker cgroup (what the cap counts)", "#e377c2", False),
    "worker_vram": ("Worker VRAM", "#ff7f0e", True),
    "tf_current": ("TF in use", "#9467bd", False),
    "tf_peak": ("TF peak", "#9467bd", True),
}
# whose RSS and VRAM the "Worker" series are: tfdoctor's own benchmark worker, or the user's
# process a watch followed
WORKER, WATCHED = "Worker", "Watched process"


def style(key: str, process: str = WORKER) -> tuple[str, str, bool]:
    """A series' legend name, colour and dash, its process named (`WORKER`, `WATCHED`)."""
    label, colour, dashed = STYLES.get(key, (key, "#000000", False))
    if label.startswith(WORKER + " "):
        label = process + label[len(WORKER) :]
    return label, colour, dashed


GPU_COLOURS = ("#2ca02c", "#17becf", "#bcbd22", "#d62728")
MARKER_COLOURS = {
    "phase": "#8c8c8c",
    "oom": "#d62728",
    "crash": "#d62728",
    "guard": "#e377c2",
    "fix": "#2ca02c",
    "stall": "#ff7f0e",
    "xid": "#d62728",
    "note": "#8c8c8c",
    "probe": "#8c8c8c",
    "probe_end": "#8c8c8c",
}


def format_bytes(value: float) -> str:
    """Axis and label text: "512 MiB", "1.5 GiB"."""
    if abs(value) >= GIB:
        return f"{value / GIB:.1f} GiB"
    if abs(value) >= MIB or value == 0:
        return f"{value / MIB:.0f} MiB"
    return f"{value / 1024:.0f} KiB"


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


class Columns(dict[str, tuple[list[float], list[float]]]):
    """Named (times, values) columns filled point by point; a missing value is skipped."""

    def put(self, name: str, t: float, v: float | None) -> None:
        if v is not None:
            xs, ys = self.setdefault(name, ([], []))
            xs.append(t)
            ys.append(v)


def memory_series(
    items: Iterable[Item], since_t: float | None = None, until_t: float | None = None
) -> dict[str, tuple[list[float], list[float]]]:
    """Per-run memory series (times, values): worker RSS, TF in use, GPU used, optionally
    only between two times."""
    out = Columns()
    put = out.put

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
