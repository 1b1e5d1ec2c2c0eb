"""A run's memory plot as a standalone SVG picture (for reports): the live plot's series and
colours (`core.series`), limits as dashed lines, markers (OOM, crash, phases) as labelled
vertical lines. Pure text: no Qt, no plotting library; peaks survive the thinning."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tfdoctor.core import series
from tfdoctor.core.series import GPU_COLOURS, MARKER_COLOURS, STYLES, WORKER, format_bytes, style

MAX_POINTS = 400  # per series: each bucket keeps its lowest and highest value
WIDTH, HEIGHT = 820, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 34
SHOWN_MARKERS = ("oom", "crash", "guard", "stall", "xid", "fix", "killed", "exception", "hang")


@dataclass
class Line:
    label: str
    colour: str
    dashed: bool
    xs: list[float]
    ys: list[float]


@dataclass
class Picture:
    """A plot ready to draw, and what it shows in words (a report's alt text and table)."""

    lines: list[Line]
    limits: list[tuple[str, float, str]]  # (label, bytes, colour)
    markers: list[tuple[float, str, str]]  # (t, label, colour)
    peaks: list[tuple[str, float]]  # (series label, peak bytes)

    @property
    def empty(self) -> bool:
        return not any(line.xs for line in self.lines)

    def alt(self, title: str) -> str:
        said = "; ".join(f"{label} peaked at {format_bytes(v)}" for label, v in self.peaks)
        return f"{title}: {said}" if said else title


def picture(
    items: Iterable[tuple[str, dict[str, Any]]],
    cap_bytes: float | None = None,
    process: str = WORKER,
) -> Picture:
    """The series, limits and markers of a run's telemetry items; `cap_bytes`: the memory
    cap the run had (a dashed line)."""
    cols = series.Columns()
    put = cols.put
    limits: dict[str, tuple[str, float, str]] = {}
    if cap_bytes:
        limits["cgroup"] = ("memory cap", float(cap_bytes), STYLES["cgroup"][1])
    markers: list[tuple[float, str, str]] = []

    for kind, item in items:
        t = item.get("t")
        if not isinstance(t, (int, float)):
            continue
        if kind == "sample":
            put("ram_used", t, _num(item.get("ram_used")))
            if _num(item.get("ram_total")):
                limits["ram"] = ("RAM total", float(item["ram_total"]), STYLES["ram_used"][1])
            put("rss", t, series.rss_bytes(item))
            cg = item.get("cgroup")
            if isinstance(cg, dict):
                put("cgroup", t, _num(cg.get("usage")))
                if _num(cg.get("limit")):
                    limits["cgroup"] = ("memory cap", float(cg["limit"]), STYLES["cgroup"][1])
            for i, g in enumerate(item.get("gpus") or []):
                if isinstance(g, dict):
                    put(f"gpu{i}", t, _num(g.get("used")))
                    if _num(g.get("total")):
                        colour = GPU_COLOURS[i % len(GPU_COLOURS)]
                        limits[f"gpu{i}"] = (f"GPU {i} total", float(g["total"]), colour)
        elif kind == "tf":
            put("tf_current", t, series.tf_bytes(item))
            put("tf_peak", t, series.tf_bytes(item, "peak"))
        elif kind == "limit" and _num(item.get("value")):
            key = str(item.get("key") or "limit")
            limits[key] = (str(item.get("label") or key), float(item["value"]), "#e377c2")
        elif kind == "marker":
            category = str(item.get("category") or "note")
            if category in SHOWN_MARKERS:
                colour = MARKER_COLOURS.get(category, "#d62728")
                markers.append((float(t), str(item.get("label") or category), colour))
    lines = []
    for key, (xs, ys) in cols.items():
        if key.startswith("gpu"):
            i = int(key[3:])
            label, colour, dashed = f"GPU {i} used", GPU_COLOURS[i % len(GPU_COLOURS)], False
        else:
            label, colour, dashed = style(key, process)
        lines.append(Line(label, colour, dashed, *_thin(xs, ys)))
    peaks = [(line.label, max(cols[k][1])) for k, line in zip(cols, lines, strict=True)]
    shown = {round(v): (label, v, c) for label, v, c in limits.values()}  # one line per value
    return Picture(lines, list(shown.values()), markers[-12:], peaks)


def svg(pic: Picture, title: str) -> str:
    """The picture as an SVG document (fonts: the reader's sans-serif)."""
    xs = [x for line in pic.lines for x in line.xs] + [m[0] for m in pic.markers]
    ys = [y for line in pic.lines for y in line.ys]
    high = max(ys, default=0.0)
    # a limit the data come near is shown (a cap, a full GPU); a far one would flatten them
    ys += [v for _, v, _ in pic.limits if v <= 1.5 * high]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1.0
    top = _nice_top(max(ys) if ys else 1.0)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return TOP + ph - y / top * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" font-family="sans-serif" font-size="11">',
        f"<title>{html.escape(pic.alt(title))}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
    ]
    for i in range(5):  # y grid and ticks
        v = top * i / 4
        y = py(v)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#e4e7eb"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">'
            f"{format_bytes(v)}</text>"
        )
    for i in range(6):  # x ticks
        t = x0 + (x1 - x0) * i / 5
        out.append(
            f'<text x="{px(t):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
            f'fill="#555">{t:.0f} s</text>'
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#9aa3ad"/>'
    )
    for label, value, colour in pic.limits:
        if value <= top:
            y = py(value)
            out.append(
                f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                f'stroke="{colour}" stroke-dasharray="2 4" stroke-width="1"/>'
                f'<text x="{WIDTH - RIGHT - 4}" y="{y - 3:.1f}" text-anchor="end" '
                f'fill="{colour}">{html.escape(label)} {format_bytes(value)}</text>'
            )
    for line in pic.lines:
        if not line.xs:
            continue
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(line.xs, line.ys, strict=True))
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        out.append(
            f'<polyline fill="none" stroke="{line.colour}" stroke-width="1.6"{dash} '
            f'points="{points}"><title>{html.escape(line.label)}</title></polyline>'
        )
    for t, label, colour in pic.markers:
        x = px(t)
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" stroke="{colour}" '
            f'stroke-width="1.2"/><text x="{x - 3:.1f}" y="{TOP + 12}" text-anchor="end" '
            f'fill="{colour}">{html.escape(label[:40])}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def legend(pic: Picture) -> list[tuple[str, str, bool]]:
    """(label, colour, dashed) of each drawn series, for a legend beside the picture."""
    return [(line.label, line.colour, line.dashed) for line in pic.lines if line.xs]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _thin(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """At most MAX_POINTS points: each bucket keeps its lowest and highest, in time order."""
    n = len(xs)
    if n <= MAX_POINTS:
        return list(xs), list(ys)
    size = math.ceil(n / (MAX_POINTS / 2))
    out_x: list[float] = []
    out_y: list[float] = []
    for start in range(0, n, size):
        idx = range(start, min(n, start + size))
        lo = min(idx, key=lambda i: ys[i])
        hi = max(idx, key=lambda i: ys[i])
        for i in sorted({lo, hi}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


_STEPS_MIB = (1, 2, 5, 10, 20, 25, 50, 100, 128, 256, 512, 1024, 2048, 4096, 8192)


def _nice_top(value: float) -> float:
    """A round top for the y axis at or above `value`: four steps of a round size."""
    for step in _STEPS_MIB:
        if 4 * step * (1 << 20) >= value:
            return 4.0 * step * (1 << 20)
    gib = math.ceil(value / 4 / (1 << 30))
    return 4.0 * gib * (1 << 30)
