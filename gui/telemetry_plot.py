"""The live memory plot: VRAM, TF in use and peak, worker RSS, system RAM and swap on one time
axis, limits as horizontal lines, markers (phases, OOM, crash) as labelled vertical lines, and
a small step-time plot below sharing the time axis.

Fed with telemetry items (`core.telemetry.Timeline.since`): `consume()` appends to growing
numpy columns; a QTimer redraws dirty curves at most FRAME_MS apart with `setData` (curves are
created once; peak downsampling and clip-to-view keep an hour at 10 Hz cheap).
"""

from __future__ import annotations

import html
import logging
from typing import Any, ClassVar

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from tfdoctor.core import series
from tfdoctor.core.series import (
    GIB,
    GPU_COLOURS,
    MARKER_COLOURS,
    MIB,
    WORKER,
    format_bytes,
)
from tfdoctor.core.series import style as series_style

log = logging.getLogger(__name__)

FRAME_MS = 100

PROBE_OK = (46, 125, 50)  # a batch-search probe that trained: green; one that failed: red
PROBE_FAILED = (198, 40, 40)


def legend_html(entries: list[tuple[str, str, bool]]) -> str:
    """The legend as a line of text above the plot (it never covers the data)."""
    parts = [
        f'<span style="color:{colour}">{"╍╍" if dashed else "━━"}</span>&nbsp;'
        + html.escape(label).replace(" ", "&nbsp;")  # an entry wraps whole, never "TF / peak"
        for label, colour, dashed in entries
    ]
    return "&nbsp;&nbsp; ".join(parts)


class ByteAxis(pg.AxisItem):  # type: ignore[misc]  # pyqtgraph is untyped
    """A y axis whose ticks read as MiB/GiB while the data stay in bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [format_bytes(v) for v in values]

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, float]]:
        """Ticks on round binary sizes (256 MiB, 1 GiB, 2 GiB ...)."""
        span = max(maxVal - minVal, 1.0)
        want = span / max(size / 60.0, 2.0)
        steps = [MIB * k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]
        steps += [GIB * k for k in (1, 2, 4, 8, 16, 32, 64, 128)]
        major = next((s for s in steps if s >= want), steps[-1])
        return [(major, 0.0)]


class _Column:
    """A growing (x, y) pair of float64 arrays, amortised O(1) append."""

    def __init__(self) -> None:
        self.x = np.empty(1024)
        self.y = np.empty(1024)
        self.n = 0

    def append(self, x: float, y: float) -> None:
        if self.n == len(self.x):
            self.x = np.resize(self.x, 2 * self.n)
            self.y = np.resize(self.y, 2 * self.n)
        self.x[self.n] = x
        self.y[self.n] = y
        self.n += 1


class TelemetryPlot(QWidget):
    """Memory over time (top) and step time (bottom)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("telemetryPlot")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.memory = pg.PlotWidget(self, axisItems={"left": ByteAxis(orientation="left")})
        self.memory.setObjectName("memoryPlot")
        self.memory.showGrid(x=False, y=True, alpha=0.25)  # a vertical grid costs a frame
        self.memory.setLabel("bottom", "time", units="s")
        self.memory.setLabel("left", "memory")
        self.memory.getPlotItem().setMouseEnabled(x=True, y=False)
        # the legend and the phases are text rows outside the plot: they never cover the data,
        # and labels of phases a second apart never run into each other
        self.legend_label = QLabel(self)
        self.legend_label.setObjectName("plotLegend")
        self.legend_label.setWordWrap(True)
        self.legend_label.setTextFormat(Qt.TextFormat.RichText)
        self.phase_label = QLabel(self)
        self.phase_label.setObjectName("infoLabel")
        self.phase_label.setWordWrap(True)
        self.steps = pg.PlotWidget(self)
        self.steps.setObjectName("stepPlot")
        self.steps.showGrid(x=False, y=True, alpha=0.25)
        self.steps.setLabel("left", "step", units="s")
        self.steps.setXLink(self.memory)
        self.steps.setMaximumHeight(110)
        self.speed_label = QLabel(self)
        self.speed_label.setObjectName("speedLabel")
        self.empty_label = QLabel(
            "Memory over time appears here when a run starts (or open a recorded trace).", self
        )
        self.empty_label.setObjectName("plotPlaceholder")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)  # never what sets the window's width
        layout.addWidget(self.empty_label)
        layout.addWidget(self.legend_label)
        layout.addWidget(self.memory, 3)
        under = QHBoxLayout()  # the phases (or a search's probes) and the speed share a row
        under.addWidget(self.phase_label, 1)
        top_right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop
        under.addWidget(self.speed_label, 0, top_right)
        layout.addLayout(under)
        layout.addWidget(self.steps, 1)
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self.redraw)
        self.clear()

    # -- data
    def clear(self, process: str = WORKER) -> None:
        """Empty the plot; `process` names whose RSS and VRAM the next series are."""
        self._process = process
        self._timer.stop()
        self.memory.clear()
        self.steps.clear()
        self._legend: list[tuple[str, str, bool]] = []
        self.legend_label.clear()
        self.legend_label.hide()
        self._phases: list[tuple[float, str]] = []
        self.phase_label.clear()
        self.phase_label.hide()
        self.probes: list[tuple[int, str, bool]] = []  # (batch, outcome words, trained)
        self._probe_start: tuple[float, str] | None = None
        self.columns: dict[str, _Column] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.limits: dict[str, pg.InfiniteLine] = {}
        self.markers: list[pg.InfiniteLine] = []
        self.moment: pg.LinearRegionItem | None = None
        self._dirty: set[str] = set()
        self.step_column = _Column()
        self.step_curve = self.steps.plot(pen=pg.mkPen("#8c8c8c", width=1))
        self.steps.hide()
        self._configure(self.step_curve)
        self.speed_label.setText("")
        self.empty_label.show()

    def series_lengths(self) -> dict[str, int]:
        out = {name: col.n for name, col in self.columns.items()}
        out["step_s"] = self.step_column.n
        return out

    def consume(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Take timeline items (kind, item) in time order."""
        for kind, item in items:
            t = item.get("t")
            if not isinstance(t, (int, float)):
                continue
            if kind == "sample":
                self._sample(float(t), item)
            elif kind == "tf":
                self._tf(float(t), item)
            elif kind == "step":
                step_s = item.get("step_s")
                if isinstance(step_s, (int, float)):
                    self.step_column.append(float(t), float(step_s))
                    self._dirty.add("__steps")
                eps = item.get("examples_per_s")
                if isinstance(eps, (int, float)):
                    self.speed_label.setText(
                        f"step {item.get('step')}: {eps:,.0f} examples/s, "
                        f"{float(step_s or 0) * 1000:.1f} ms/step"
                    )
            elif kind == "marker":
                self._marker(float(t), str(item.get("label", "")), str(item.get("category")))
            elif kind == "limit":
                key = str(item.get("key", "limit"))
                self._limit(key, item.get("value"), str(item.get("label", key)), "#e377c2")
        if self._dirty and not self._timer.isActive():
            self._timer.start()

    def _put(self, name: str, t: float, value: Any) -> None:
        if not isinstance(value, (int, float)):
            return
        col = self.columns.get(name)
        if col is None:
            col = self.columns[name] = _Column()
            self._curve(name)
        col.append(t, float(value))
        self._dirty.add(name)

    def _sample(self, t: float, s: dict[str, Any]) -> None:
        self._put("ram_used", t, s.get("ram_used"))
        self._limit("ram_total", s.get("ram_total"), "RAM total", "#1f77b4")
        if s.get("swap_total"):
            self._put("swap_used", t, s.get("swap_used"))
        rss = s.get("rss")
        self._put("rss", t, series.rss_bytes(s))
        cgroup = s.get("cgroup")
        if isinstance(cgroup, dict):  # a capped run: the number its cap is decided on
            self._put("cgroup", t, cgroup.get("usage"))
        gpus = s.get("gpus") or []
        if gpus and isinstance(rss, dict) and rss:  # what the followed processes hold on GPUs
            mine = [
                p.get("used", 0)
                for g in gpus
                for p in g.get("procs") or []
                if str(p.get("pid")) in rss
            ]
            if mine:
                self._put("worker_vram", t, sum(mine))
        for g in gpus:
            i = g.get("index", 0)
            self._put(f"gpu{i}_used", t, g.get("used"))
            colour = GPU_COLOURS[i % len(GPU_COLOURS)]
            self._limit(f"gpu{i}_total", g.get("total"), f"GPU {i} total", colour)

    def _tf(self, t: float, item: dict[str, Any]) -> None:
        self._put("tf_current", t, series.tf_bytes(item, "current"))
        self._put("tf_peak", t, series.tf_bytes(item, "peak"))

    # -- drawing
    @staticmethod
    def _configure(curve: pg.PlotDataItem) -> None:
        curve.setDownsampling(auto=True, method="peak")
        curve.setClipToView(True)

    def _curve(self, name: str) -> None:
        if name.startswith("gpu"):
            i = int(name[3:].split("_")[0])
            label, colour, dashed = f"GPU {i} used", GPU_COLOURS[i % len(GPU_COLOURS)], False
        else:
            label, colour, dashed = series_style(name, self._process)
        # 1-px (cosmetic) pens: Qt strokes wider lines several times slower (benchmarked)
        style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
        pen = pg.mkPen(colour, width=1, style=style)
        curve = self.memory.plot(pen=pen)
        self._legend.append((label, colour, dashed))
        self.legend_label.setText(legend_html(self._legend))
        self.legend_label.show()
        self._configure(curve)
        self.curves[name] = curve
        self.empty_label.hide()

    def _limit(self, key: str, value: Any, label: str, colour: str) -> None:
        if not isinstance(value, (int, float)) or value <= 0:
            return
        line = self.limits.get(key)
        if line is None:
            line = pg.InfiniteLine(
                pos=float(value),
                angle=0,
                pen=pg.mkPen(colour, width=1, style=Qt.PenStyle.DotLine),
                label=f"{label}: {format_bytes(float(value))}",
                labelOpts={"position": 0.97, "color": colour, "anchors": [(1, 1), (1, 1)]},
            )
            self.memory.addItem(line, ignoreBounds=True)  # the y range follows the data
            self.limits[key] = line
        elif line.value() != value:
            line.setValue(float(value))

    def _marker(self, t: float, label: str, category: str) -> None:
        if category == "probe":
            self._probe_start = (t, label)
            self._update_strip()
        elif category == "probe_end":
            self._probe_end(t, label)
        colour = MARKER_COLOURS.get(category, "#8c8c8c")
        solid = category in ("oom", "crash", "guard")
        style = Qt.PenStyle.SolidLine if solid else Qt.PenStyle.DashLine
        opts = {
            "position": 0.92 - 0.1 * (len(self.markers) % 4),
            "color": colour,
            "rotateAxis": (1, 0),
            "anchors": [(0, 0), (0, 0)],
        }
        # phases and probes are named in the rows outside the plot, and in a search a probe's
        # band says how it ended; the line says it on hover
        searching = bool(self.probes) or self._probe_start is not None
        named = category not in ("phase", "probe", "probe_end") and not (
            searching and category in ("crash", "oom", "guard", "killed")
        )
        line = pg.InfiniteLine(
            pos=t,
            angle=90,
            pen=pg.mkPen(colour, width=1, style=style),
            label=label if named else None,
            labelOpts=opts if named else None,
        )
        line.setToolTip(f"{label} at {t:.1f} s")
        if category == "phase":
            self._phases.append((t, label))
            self._update_strip()
        if category in ("probe", "probe_end") or (category == "phase" and searching):
            line.setVisible(False)  # a probe's band is its mark; its workers' phases are noise
        line.category = category
        line.text = label
        self.memory.addItem(line, ignoreBounds=True)
        self.markers.append(line)

    def redraw(self) -> None:
        """Push new points to the curves that changed (the frame timer calls this)."""
        dirty, self._dirty = self._dirty, set()
        for name in dirty:
            if name == "__steps":
                c = self.step_column
                self.step_curve.setData(c.x[: c.n], c.y[: c.n])
                self.steps.setVisible(c.n > 1)  # no room taken before there are step times
                continue
            col = self.columns[name]
            self.curves[name].setData(col.x[: col.n], col.y[: col.n])
        if not self._dirty:
            self._timer.stop()

    def show_moment(self, start: float, end: float) -> None:
        """Highlight a stretch of the run (a cause's evidence) and zoom the time axis to it."""
        if getattr(self, "moment", None) is not None:
            self.memory.removeItem(self.moment)
        self.moment = pg.LinearRegionItem(
            (start, end), movable=False, brush=pg.mkBrush(255, 200, 0, 50)
        )
        self.memory.addItem(self.moment, ignoreBounds=True)
        pad = max(1.0, 0.15 * (end - start))
        self.memory.setXRange(max(0.0, start - pad), end + pad, padding=0)

    def _probe_end(self, t: float, label: str) -> None:
        """Shade a batch-search probe's stretch, green if it trained, red if not, and name it
        (batch size and outcome) on the band and in the row under the plot."""
        if self._probe_start is None:
            return
        t0 = self._probe_start[0]
        self._probe_start = None
        batch_text, _, words = label.partition(": ")
        trained = words == "trained"
        try:
            batch = int(batch_text.split()[-1])
        except (ValueError, IndexError):
            return
        r, g, b = PROBE_OK if trained else PROBE_FAILED
        band = pg.LinearRegionItem((t0, t), movable=False, brush=pg.mkBrush(r, g, b, 28))
        for edge in band.lines:
            edge.setPen(pg.mkPen(r, g, b, 90, width=1))
        pg.InfLineLabel(  # the batch size up the band's left edge, inside the plot
            band.lines[0],
            text=f"{batch} {'✓' if trained else '✗'}",
            position=0.96,
            rotateAxis=(1, 0),
            anchors=[(1, 0), (1, 0)],
            color=(r, g, b),
        )
        band.setToolTip(f"batch size {batch}: {words} ({t0:.1f}–{t:.1f} s)")
        self.memory.addItem(band, ignoreBounds=True)
        self.probes.append((batch, words, trained))
        self._update_strip()

    def _update_strip(self) -> None:
        """The row under the plot: a search's probes (batch size and outcome), else the phases
        of the run with their times."""
        nb = "\u00a0"  # an entry wraps whole: never "5.8 / s"
        if self.probes or self._probe_start is not None:
            entries = [f"{n} {'✓' if ok else '✗ ' + w}" for n, w, ok in self.probes]
            text = "Batch sizes tried: "
        else:
            entries = [f"{name} {at:.1f} s" for at, name in self._phases]
            text = "Phases: "
        text += " · ".join(e.replace(" ", nb) for e in entries)
        self.phase_label.setText(text)
        self.phase_label.show()

    def legend_names(self) -> list[str]:
        """The series named in the legend row, in order."""
        return [label for label, _, _ in self._legend]

    def marker_labels(self) -> list[str]:
        return [str(getattr(m, "text", "")) for m in self.markers]


def _series(items: list[tuple[str, dict[str, Any]]]) -> dict[str, tuple[list[float], list[float]]]:
    """Per-run memory series for a comparison: worker RSS, TF in use, GPU used (summed)."""
    return series.memory_series(items)


class ComparisonPlot(pg.PlotWidget):  # type: ignore[misc]  # pyqtgraph is untyped
    """Two runs on one time axis: before (dashed) and after (solid), same colour per series."""

    COLOURS: ClassVar[dict[str, str]] = {
        "Worker RSS": "#ff7f0e",
        "TF in use": "#9467bd",
        "GPU used": "#2ca02c",
    }

    def __init__(
        self,
        before: list[tuple[str, dict[str, Any]]],
        after: list[tuple[str, dict[str, Any]]],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent, axisItems={"left": ByteAxis(orientation="left")})
        self.setObjectName("comparisonPlot")
        self.setMinimumHeight(180)
        self.showGrid(x=False, y=True, alpha=0.25)
        self.setLabel("bottom", "time", units="s")
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.legend_entries: list[tuple[str, str, bool]] = []  # shown as a row above the plot
        top, right = 0.0, 0.0
        for label, items, style in (
            ("before", before, Qt.PenStyle.DashLine),
            ("after", after, Qt.PenStyle.SolidLine),
        ):
            for name, (xs, ys) in _series(items).items():
                pen = pg.mkPen(self.COLOURS.get(name, "#444"), width=1, style=style)
                curve = self.plot(xs, ys, pen=pen)
                self.curves[f"{name} ({label})"] = curve
                colour = self.COLOURS.get(name, "#444")
                self.legend_entries.append((f"{name} ({label})", colour, label == "before"))
                top, right = max(top, max(ys, default=0.0)), max(right, max(xs, default=0.0))
        self.getAxis("left").setWidth(64)
        # both runs whole, from zero: the point is to compare their heights
        self.setYRange(0, top * 1.05 or 1.0, padding=0)
        self.setXRange(0, right or 1.0, padding=0.02)
