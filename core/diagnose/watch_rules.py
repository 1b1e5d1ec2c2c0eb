"""Why a watched process died, from what the watch saw: its trace (RAM, each GPU, every
process's VRAM, the process's own RSS, TensorFlow's numbers when the first cell reports them)
and how it ended (its exit status, the kernel log's OOM kill or Xid lines for it).

Pure rules over `core.telemetry` items, so a live watch and a recorded trace give the same
verdict. A process that ended normally gets no cause: nothing is invented.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfdoctor.core.diagnose.engine import CauseInfo, shipped_causes
from tfdoctor.core.diagnose.telemetry_rules import fit_line
from tfdoctor.core.model import Cause, Evidence

GIB = float(1 << 30)
WALL_FRACTION = 0.95  # a GPU this full (or RAM this used) is at the wall
WINDOW_S = 60.0  # how far back from the end the rules look
GROWTH_MIN = 1 << 30  # a neighbour's or a leak's growth worth naming, in bytes
LEAK_R2 = 0.8
# a climb to the wall quicker than this is a start-up taking its memory (a model, its first
# batch: a real H200 filled in 2.3 s, tests/fixtures/traces/real_h200_watch_torch_fragmentation.*),
# not a leak (a real H100 leak took 11 s)
LEAK_MIN_S = 5.0
FRAGMENTED = 0.7  # TF had less than this share of the GPU in use when it ran out: fragments
TF_LEAK_MIN = 256 << 20  # TF's in-use growth over the epochs worth calling a leak


@dataclass
class Ending:
    """How the watched process ended.

    how: "exited" (a child: its status is known), "vanished" (another process: it is gone),
    or "running" (the watch was stopped first).
    """

    how: str
    exit_code: int | None = None
    signal: str | None = None
    oom_kill_line: str | None = None  # the kernel log's OOM-kill record naming the pid
    xid_lines: list[str] = field(default_factory=list)
    restart_lines: list[str] = field(default_factory=list)  # the Jupyter server's, if found

    @property
    def normal(self) -> bool:
        """Ended on its own with status 0 (or the watch stopped first): nothing to explain."""
        if self.how == "running":
            return True
        return (
            self.how == "exited"
            and self.exit_code == 0
            and not self.oom_kill_line
            and not self.xid_lines
        )

    def words(self) -> str:
        if self.how == "running":
            return "still running when the watch stopped"
        if self.signal:
            return f"killed by {self.signal}"
        if self.how == "exited":
            return f"exited with status {self.exit_code}"
        return "disappeared"

    def to_json(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "oom_kill_line": self.oom_kill_line,
            "xid_lines": self.xid_lines,
            "restart_lines": self.restart_lines,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ending:
        """Raises KeyError, TypeError or ValueError on malformed data."""
        how = str(data["how"])
        if how not in ("exited", "vanished", "running"):
            raise ValueError(f"unknown ending {how!r}")
        code = data.get("exit_code")
        return cls(
            how,
            int(code) if code is not None else None,
            str(data["signal"]) if data.get("signal") else None,
            str(data["oom_kill_line"]) if data.get("oom_kill_line") else None,
            [str(x) for x in data.get("xid_lines") or ()],
            [str(x) for x in data.get("restart_lines") or ()],
        )


def _gib(v: float) -> str:
    return f"{v / GIB:.1f} GiB"


def tf_total(item: dict[str, Any], key: str) -> float:
    """TensorFlow's `current` or `peak` over every device of a "tf" item."""
    return float(
        sum(int(v.get(key) or 0) for k, v in item.items() if k != "t" and isinstance(v, dict))
    )


def _samples(items: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [i for k, i in items if k == "sample" and isinstance(i.get("t"), (int, float))]


def _vram_of(sample: dict[str, Any], gpu: int, pid: int) -> int | None:
    for g in sample.get("gpus") or []:
        if g.get("index") == gpu:
            for p in g.get("procs") or []:
                if p.get("pid") == pid:
                    return int(p.get("used") or 0)
            return 0
    return None


PREALLOCATED = 0.6  # of the card, taken at once and held: a framework's own pool
FLAT = 0.02  # of the card: how far that pool may move and still be flat
POOL_WITHIN_S = 5.0  # after its first use of the GPU (the CUDA context comes first)


def preallocated_pool(items: Iterable[tuple[str, dict[str, Any]]], pid: int) -> str | None:
    """Why the VRAM series says nothing, when that is so: the process took most of a card at
    once and held it unchanged (TensorFlow's default pool, JAX's 75%), so what it used inside
    never showed (a real JAX leak on an H200 did just this: tests/fixtures/traces/
    real_h200_watch_jax_leak.*). One line for people, or None."""
    samples = _samples(items)
    gpus = {g.get("index") for s in samples for g in s.get("gpus") or []}
    for gpu in sorted(i for i in gpus if isinstance(i, int)):
        rows = [
            (float(s["t"]), float(g.get("total") or 0), _vram_of(s, gpu, pid) or 0)
            for s in samples
            for g in s.get("gpus") or []
            if g.get("index") == gpu
        ]
        held = [row for row in rows if row[2] > 0]
        big = [i for i, (_, total, v) in enumerate(held) if total and v >= PREALLOCATED * total]
        if not big or held[big[0]][0] - held[0][0] > POOL_WITHIN_S:
            continue  # never took most of the card, or grew into it: not a pool made at start
        t0, total, level = held[big[0]]
        values = [v for _, _, v in held[big[0] :]]
        while len(values) > 1 and values[-1] < level - FLAT * total:
            values.pop()  # the pool given back on its way out
        if len(values) >= 3 and max(values) - min(values) <= FLAT * total:
            return (
                f"It took {_gib(level)} of GPU {gpu}'s {_gib(total)} ({level / total:.0%}) "
                f"at once, {t0:.0f} s in, and held it unchanged: its framework reserves a pool "
                "up front (TensorFlow's default, JAX's 75%), so the VRAM seen here cannot show "
                "what it used. Watch it again with the pool off (TF_FORCE_GPU_ALLOW_GROWTH=true "
                "for TensorFlow, XLA_PYTHON_CLIENT_PREALLOCATE=false for JAX)."
            )
    return None


HELD_BY_OTHERS = 0.5  # of the card, held by other processes while the watched one died


def _held_by_others(
    rows: list[tuple[float, dict[str, Any], int]],
    gpu: int,
    pid: int,
    ending: Ending,
    cause: Any,
    span: tuple[float, float] | None,
    share: float = HELD_BY_OTHERS,
    conf: float = 0.6,
) -> None:
    """The card never filled, but other processes held half of it or more at the end: an
    allocation bigger than what they left failed (PyTorch's OOM with 125 GiB of a 140 GiB H200
    held by another process, for real: tests/fixtures/traces/real_h200_watch_torch_other_*).
    A candidate: the process may also have asked for more than the whole card."""
    t, g, _ = rows[-1]
    total = float(g.get("total") or 0)
    held = {
        p["pid"]: int(p.get("used") or 0)
        for p in g.get("procs") or []
        if isinstance(p.get("pid"), int) and p["pid"] != pid
    }
    if not total or sum(held.values()) < share * total:
        return
    top = sorted(held.items(), key=lambda kv: -kv[1])[:3]
    who = ", ".join(f"pid {opid} held {_gib(v)}" for opid, v in top)
    cause(
        "gpu_memory_contention",
        conf,
        [f"{who} of GPU {gpu}'s {_gib(total)} when pid {pid} {ending.words()} at {t:.0f} s"],
        span,
    )


def watched_causes(
    items: Iterable[tuple[str, dict[str, Any]]],
    pid: int,
    ending: Ending,
    causes: dict[str, CauseInfo] | None = None,
) -> list[Cause]:
    """The causes of a watched process's end, best first; [] when it ended normally.

    Args:
        items: the watch's timeline items (kind, item), in time order.
        pid: the watched process (its children's RSS is counted in its own).
        ending: how it ended and what the kernel log said about it.
        causes: the cause catalogue (the shipped one by default).
    """
    items = list(items)
    ooms = [i for k, i in items if k == "marker" and i.get("category") == "oom"]
    if ending.normal and not ooms:  # an OOM the notebook caught still wants its why
        return []
    info = causes or shipped_causes()
    samples = _samples(items)
    out: list[Cause] = []

    def cause(cid: str, conf: float, evidence: list[str], at: tuple[float, float] | None) -> None:
        c = info[cid]
        ev = tuple(Evidence(text, source="watch", at=at) for text in evidence)
        out.append(Cause(cid, round(conf, 2), c.title, c.explanation, ev, c.fixes))

    end_t = float(samples[-1]["t"]) if samples else 0.0
    recent = [s for s in samples if s["t"] >= end_t - WINDOW_S]
    # the last sample that still saw the process: "at the end"
    alive = [s for s in recent if str(pid) in (s.get("rss") or {})]
    window = (float(recent[0]["t"]), end_t) if recent else None

    # --- host RAM: the kernel's OOM killer, or RAM at the wall when it vanished
    said: list[str] = []
    seen = [
        (float(s["t"]), float(s["rss"][str(pid)]))
        for s in alive
        if isinstance(s["rss"].get(str(pid)), (int, float)) and s["rss"][str(pid)] > 0
    ]
    if ending.oom_kill_line:
        said.append(ending.oom_kill_line)
    if seen:
        peak_t, peak = max(seen, key=lambda tv: tv[1])
        said.append(
            f"its memory (RSS) climbed from {_gib(seen[0][1])} to {_gib(peak)} in the "
            f"{peak_t - seen[0][0]:.0f} s before it ended"
        )
    at_wall = False
    for s in recent[-8:]:  # the last seconds: RAM or the process's cgroup at its limit
        total, avail = s.get("ram_total"), s.get("ram_available")
        if not isinstance(total, (int, float)) or not isinstance(avail, (int, float)):
            continue
        if total and avail < (1 - WALL_FRACTION) * total and not at_wall:
            at_wall = True
            said.append(f"RAM available fell to {_gib(avail)} of {_gib(total)}")
    cg_rows = [s["cgroup"] for s in recent if isinstance(s.get("cgroup"), dict)]
    cg_peak = max(cg_rows, key=lambda c: c.get("usage") or 0, default=None)
    if cg_peak is not None and cg_peak.get("limit"):
        usage, limit = cg_peak.get("usage") or 0, cg_peak["limit"]
        if usage >= WALL_FRACTION * limit:
            at_wall = True
            said.append(f"its memory cgroup used {_gib(usage)} of its {_gib(limit)} limit")
    killed = ending.signal == "SIGKILL" or ending.how == "vanished"
    if ending.oom_kill_line:
        cause("host_oom", 0.97, said, window)
    elif at_wall and killed:
        cause("host_oom", 0.75, said, window)

    # --- the GPU: at the wall, and who grew into it
    gpus = {g.get("index") for s in recent for g in s.get("gpus") or []}
    for gpu in sorted(i for i in gpus if isinstance(i, int)):
        rows = [
            (float(s["t"]), g, _vram_of(s, gpu, pid) or 0)
            for s in recent
            for g in s.get("gpus") or []
            if g.get("index") == gpu and isinstance(g.get("used"), (int, float))
        ]
        mine = [(t, v) for t, _, v in rows if v > 0]
        if rows and not mine and rows[-1][0] >= end_t - 2.0:
            # it got none of this GPU: others holding all of it when it died can be why (its
            # first CUDA call refused: real, tests/fixtures/traces/real_h200_watch_torch_card_*)
            _held_by_others(rows, gpu, pid, ending, cause, window, share=WALL_FRACTION, conf=0.5)
        if not rows or not mine:
            continue  # the watched process held nothing here
        # up to its end: what others took after it died is not why it died
        rows = [r for r in rows if r[0] <= mine[-1][0] + 1.0]
        full = [
            (t, g) for t, g, _ in rows if g.get("total") and g["used"] >= WALL_FRACTION * g["total"]
        ]
        if not full:
            _held_by_others(rows, gpu, pid, ending, cause, (mine[0][0], end_t))
            continue
        t_full, g_full = full[0]
        total = float(g_full["total"])
        peak_used = max(float(g["used"]) for _, g, _ in rows)
        died_at = mine[-1][0]
        # every other process on this GPU: its growth over the window
        others: dict[int, list[tuple[float, int]]] = {}
        for t, g, _ in rows:
            for p in g.get("procs") or []:
                if p.get("pid") != pid and isinstance(p.get("pid"), int):
                    others.setdefault(p["pid"], []).append((t, int(p.get("used") or 0)))
        grown: dict[int, tuple[int, int]] = {}
        for opid, vals in others.items():
            # a process that appeared during the window started from nothing
            start = 0 if vals[0][0] > rows[0][0] + 1.0 else vals[0][1]
            grown[opid] = (start, max(v for _, v in vals))
        mine_growth = max(v for _, v in mine) - mine[0][1]
        neighbour = max(grown.items(), key=lambda kv: kv[1][1] - kv[1][0], default=None)
        span = (mine[0][0], end_t)
        if neighbour is not None:
            opid, (start, peak) = neighbour
            growth = peak - start
            if growth >= GROWTH_MIN and growth > 2 * max(mine_growth, 0):
                cause(
                    "gpu_memory_contention",
                    0.85,
                    [
                        f"pid {opid} grew from {_gib(start)} to {_gib(peak)} on GPU {gpu} "
                        f"while pid {pid} held {_gib(mine[-1][1])}",
                        f"GPU {gpu} was {g_full['used'] / total:.0%} full at "
                        f"{t_full:.0f} s; pid {pid} {ending.words()} by {died_at:.0f} s",
                    ],
                    span,
                )
                continue
        xs = [t for t, _ in mine]
        ys = [float(v) for _, v in mine]
        slope, r2 = fit_line(xs, ys)
        grew_for = xs[ys.index(max(ys))] - xs[0]
        if mine_growth >= GROWTH_MIN and r2 >= LEAK_R2 and slope > 0 and grew_for >= LEAK_MIN_S:
            cause(
                "memory_leak",
                0.8,
                [
                    f"pid {pid}'s VRAM on GPU {gpu} grew steadily from {_gib(ys[0])} to "
                    f"{_gib(max(ys))} ({slope / GIB:.2f} GiB/s, R² {r2:.2f}) until the GPU "
                    f"was full ({_gib(peak_used)} of {_gib(total)})"
                ],
                span,
            )
            cause(
                "gpu_oom",
                0.6,
                [f"GPU {gpu} reached {_gib(peak_used)} of {_gib(total)}"],
                span,
            )
        else:
            cause(
                "gpu_oom",
                0.75,
                [
                    f"GPU {gpu} reached {_gib(peak_used)} of {_gib(total)}; pid {pid} "
                    f"held {_gib(max(ys))} and {ending.words()}"
                ],
                span,
            )

    # --- TensorFlow's own numbers, from the notebook's first cell
    tf_rows = [
        (float(i["t"]), i) for k, i in items if k == "tf" and isinstance(i.get("t"), (int, float))
    ]
    if ooms:
        oom = ooms[-1]
        before = [row for t, row in tf_rows if t <= float(oom["t"]) + 1.0]
        in_use = tf_total(before[-1], "current") if before else None
        peak = max((tf_total(row, "peak") for row in before), default=0.0)
        gpu_total = next(
            (
                float(g["total"])
                for s in reversed(samples)
                for g in s.get("gpus") or []
                if isinstance(g.get("total"), (int, float))
            ),
            None,
        )
        message = str(oom.get("label", "")).removeprefix("OOM: ")
        at = (float(oom["t"]) - 10.0, float(oom["t"]))
        if in_use is not None and gpu_total and in_use < FRAGMENTED * gpu_total:
            cause(
                "fragmentation",
                0.65,
                [
                    f"TensorFlow had {_gib(in_use)} in use (peak {_gib(peak)}) of the GPU's "
                    f"{_gib(gpu_total)} when it ran out of memory",
                    message[:300],
                ],
                at,
            )
        elif not any(c.id in ("gpu_oom", "gpu_memory_contention") for c in out):
            said = [message[:300]]
            if in_use is not None:
                said.append(f"TensorFlow had {_gib(in_use)} in use, peak {_gib(peak)}")
            cause("gpu_oom", 0.85, said, at)
    epochs = [float(i["t"]) for k, i in items if k == "marker" and "epoch" in str(i.get("label"))]
    if len(epochs) >= 3 and tf_rows and not any(c.id == "memory_leak" for c in out):
        at_epochs = []
        for t_end in epochs:
            last = [row for t, row in tf_rows if t <= t_end]
            if last:
                at_epochs.append(tf_total(last[-1], "current"))
        rising = all(b > a for a, b in itertools.pairwise(at_epochs))
        if len(at_epochs) >= 3 and rising and at_epochs[-1] - at_epochs[0] >= TF_LEAK_MIN:
            cause(
                "memory_leak",
                0.7,
                [
                    f"TensorFlow's memory in use after each epoch rose from "
                    f"{_gib(at_epochs[0])} to {_gib(at_epochs[-1])} over {len(at_epochs)} "
                    "epochs: something keeps tensors from one epoch to the next"
                ],
                (epochs[0], epochs[-1]),
            )

    # --- the driver: Xid errors are a hardware or driver fault on that GPU
    if ending.xid_lines:
        cause("illegal_memory_access_or_hw", 0.85, list(ending.xid_lines[:3]), window)
    out.sort(key=lambda c: -c.confidence)
    return out
