"""Apply and verify: re-run the same benchmark with a fix and compare before and after.

A fix becomes benchmark knobs (memory growth, a GPU memory limit, the async allocator, mixed
precision, a smaller batch, XLA, streaming data) or environment variables for the worker
(logging, GPU choice, XLA's CUDA folder). The comparison says whether the run survived, and
its peak VRAM, peak TF memory, peak RAM and speed, side by side, with both runs' telemetry.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import BenchResult, SupervisorOptions, run_bench
from tfdoctor.core.events import Event, EventBuffer
from tfdoctor.core.fixes import FixError, contradiction, plan
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Target
from tfdoctor.core.telemetry import Timeline


def _memory_limit(cfg: BenchConfig, params: dict[str, str]) -> BenchConfig:
    mb = params.get("memory_limit_mb")
    try:
        return dataclasses.replace(cfg, memory_limit_mb=int(str(mb)), memory_growth=False)
    except ValueError:
        raise FixError(f"memory_limit_mb must be a number of MiB, not {mb!r}") from None


def _smaller_batch(cfg: BenchConfig, params: dict[str, str]) -> BenchConfig:
    size = params.get("batch_size")
    try:
        batch = int(size) if size else max(1, int(cfg.batch_size * 0.5))
    except ValueError:
        raise FixError(f"batch_size must be a whole number, not {size!r}") from None
    return dataclasses.replace(cfg, batch_size=batch)


# How each benchmark knob a fix names (`bench` in fixes.toml, catalog.BENCH_KNOBS) changes the
# run; the parameters are the fix's defaults overridden by the caller's.
KNOBS: dict[str, Callable[[BenchConfig, dict[str, str]], BenchConfig]] = {
    "memory_growth": lambda c, p: dataclasses.replace(c, memory_growth=True, memory_limit_mb=None),
    "memory_limit_mb": _memory_limit,
    "allocator": lambda c, p: dataclasses.replace(c, allocator="cuda_malloc_async"),
    "mixed_precision": lambda c, p: dataclasses.replace(c, mixed_precision=True),
    "jit_compile": lambda c, p: dataclasses.replace(c, jit_compile=not c.jit_compile),
    "data": lambda c, p: dataclasses.replace(c, data="stream"),
    "batch_size": _smaller_batch,
}


def fixed_run(
    target: Target, config: BenchConfig, fix_ids: list[str], params: dict[str, str] | None = None
) -> tuple[Target, BenchConfig, list[str]]:
    """The target and config with the fixes in effect, and notes on fixes a benchmark
    cannot show.

    Raises:
        FixError: an unknown fix, or none of the fixes changes the benchmark.
    """
    params = dict(params or {})
    known = catalog.fixes()
    cfg = config
    env = dict(target.env)
    notes: list[str] = []
    changed = False
    for fid in fix_ids:
        if fid not in known:
            raise FixError(f"unknown fix {fid!r}")
        knob = known[fid].bench  # fixes.toml: the benchmark setting that shows this fix
        if knob is not None:
            was = cfg.batch_size
            cfg = KNOBS[knob](cfg, {**dict(known[fid].params), **params})
            if knob == "batch_size" and not params.get("batch_size"):
                notes.append(
                    f"{fid}: batch size {was} → {cfg.batch_size}, half the run's, as a test "
                    "(no batch search measured the largest that fits)"
                )
        elif known[fid].applicable and (known[fid].env or known[fid].unset):
            p = plan([fid], params)
            env.update(p.env)
            for k in p.unset:
                env.pop(k, None)
        else:
            notes.append(f"{fid}: not something a benchmark run can show ({known[fid].summary})")
            continue
        changed = True
    if not changed:
        raise FixError("none of these fixes changes how the benchmark runs: nothing to verify")
    return dataclasses.replace(target, env=tuple(env.items())), cfg.validate(), notes


def summary(result: BenchResult, items: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One run's numbers for the side-by-side table."""
    m = result.metrics
    gpu_peak = max(
        (
            int(g.get("used") or 0)
            for kind, item in items
            if kind == "sample"
            for g in item.get("gpus") or []
        ),
        default=None,
    )
    tf_peak = m.get("tf_peak_bytes") or {}
    return {
        "status": result.outcome.status,
        "survived": result.outcome.status == "completed",
        "detail": result.outcome.detail,
        "config": result.config.describe(),
        "peak_vram_bytes": gpu_peak,
        "peak_tf_bytes": max(tf_peak.values()) if tf_peak else None,
        "peak_rss_bytes": m.get("rss_peak_bytes"),
        "peak_ram_used_bytes": m.get("ram_used_peak_bytes"),
        "steps_per_s": m.get("steady_steps_per_s"),
        "causes": [c.id for c in result.diagnosis.causes],
    }


# The side-by-side comparison: row label, key in `summary`
COMPARISON_ROWS = (
    ("outcome", "status"),
    ("peak VRAM", "peak_vram_bytes"),
    ("peak TF memory", "peak_tf_bytes"),
    ("peak worker RSS", "peak_rss_bytes"),
    ("peak RAM used", "peak_ram_used_bytes"),
    ("steps/s", "steps_per_s"),
)


@dataclass
class Verification:
    fix_ids: list[str]
    before: dict[str, Any]
    after: dict[str, Any]
    notes: list[str]
    before_result: BenchResult
    after_result: BenchResult
    before_telemetry: list[tuple[str, dict[str, Any]]]
    after_telemetry: list[tuple[str, dict[str, Any]]]

    @property
    def fixed(self) -> bool:
        """The run died before and survives with the fix."""
        return not self.before["survived"] and bool(self.after["survived"])

    @property
    def verdict(self) -> str:
        """One line for people: fixed, survives, or not fixed."""
        if self.fixed:
            return "fixed: the run died before and survives with the fix"
        if self.after["survived"]:
            return "the run survives with the fix"
        return "not fixed: the run still fails with the fix"

    def table(self, size: Callable[[Any], str], missing: str = "-") -> list[tuple[str, str, str]]:
        """The comparison as text rows (label, before, after); byte counts through `size`."""
        rows = []
        for label, key in COMPARISON_ROWS:
            cells = []
            for side in (self.before, self.after):
                val = side.get(key)
                if key.endswith("_bytes"):
                    cells.append(size(val) if val else missing)
                elif isinstance(val, float):
                    cells.append(f"{val:.2f}")
                else:
                    cells.append(str(val if val is not None else missing))
            rows.append((label, cells[0], cells[1]))
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "fixes": self.fix_ids,
            "fixed": self.fixed,
            "before": self.before,
            "after": self.after,
            "notes": self.notes,
        }

    def to_saved(self) -> dict[str, Any]:
        """Everything but the telemetry (saved apart, see `from_saved`)."""
        return {
            **self.to_json(),
            "before_result": self.before_result.to_json(),
            "after_result": self.after_result.to_json(),
        }

    @classmethod
    def from_saved(
        cls,
        data: Mapping[str, Any],
        before_telemetry: list[tuple[str, dict[str, Any]]],
        after_telemetry: list[tuple[str, dict[str, Any]]],
    ) -> Verification:
        """A verification as `to_saved` wrote it, with its two runs' telemetry.

        Raises:
            ValueError: malformed data (one line).
        """
        try:
            return cls(
                [str(f) for f in data["fixes"]],
                dict(data["before"]),
                dict(data["after"]),
                [str(n) for n in data.get("notes") or ()],
                BenchResult.from_json(data["before_result"]),
                BenchResult.from_json(data["after_result"]),
                before_telemetry,
                after_telemetry,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"a malformed verification ({type(exc).__name__}: {exc})") from None


def next_to_try(
    proposed: list[str],
    tried: dict[tuple[str, ...], bool],
    can_verify: Callable[[list[str]], bool],
) -> list[tuple[str, ...]]:
    """After a fix that did not fix the run: the next proposed fix not tried yet that a run
    can show, and it together with the fixes that did not work alone (when they combine:
    never two that contradict each other). Most important first; empty when none is left.

    `tried` maps the fixes of each verification (in order) to whether the run survived."""
    failed = [fids for fids, ok in tried.items() if not ok]
    done = {f for fids in tried for f in fids}
    out: list[tuple[str, ...]] = []
    nxt = next((f for f in proposed if f not in done and can_verify([f])), None)
    if nxt is not None:
        out.append((nxt,))
        alone = [fids[0] for fids in failed if len(fids) == 1]
        combo = tuple(dict.fromkeys([*alone, nxt]))
        if (
            len(combo) > 1
            and combo not in tried
            and contradiction(combo) is None
            and can_verify(list(combo))
        ):
            out.append(combo)
    return out


def what_worked(tried: dict[tuple[str, ...], bool]) -> str:
    """One line on the verifications so far: which fix made the run survive, which did not."""
    ok = [" + ".join(fids) for fids, survived in tried.items() if survived]
    bad = [" + ".join(fids) for fids, survived in tried.items() if not survived]
    if ok:
        return f"{ok[0]} worked" + (f"; {', '.join(bad)} did not" if bad else "")
    return f"not fixed by {', '.join(bad)}" if bad else ""


def verify(
    target: Target,
    config: BenchConfig,
    fix_ids: list[str],
    params: dict[str, str] | None = None,
    options: SupervisorOptions | None = None,
    *,
    before: tuple[BenchResult, list[tuple[str, dict[str, Any]]]] | None = None,
    events: EventBuffer[Event] | None = None,
    cancel: threading.Event | None = None,
) -> Verification:
    """Run the benchmark without (unless `before` is given) and with the fixes.

    Raises:
        FixError: fixes the benchmark cannot show (see fixed_run).
        targetrun.TargetError, ConfigError: as run_bench.
    """
    fixed_target, fixed_config, notes = fixed_run(target, config, fix_ids, params)
    if before is None:
        tl = Timeline()
        res = run_bench(target, config, options, events=events, cancel=cancel, timeline=tl)
        before = (res, [item for _, item in tl.since(0)])
    tl_after = Timeline()
    after = run_bench(
        fixed_target, fixed_config, options, events=events, cancel=cancel, timeline=tl_after
    )
    after_items = [item for _, item in tl_after.since(0)]
    return Verification(
        list(fix_ids),
        summary(before[0], before[1]),
        summary(after, after_items),
        notes,
        before[0],
        after,
        before[1],
        after_items,
    )
